//! The HTTP service and connection settings, shared word for word by the weir and tokio
//! servers: only the timer and the stream type differ.

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response};

/// The service: every request gets `200 Hello, World!`.
pub(super) async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, World!",
    ))))
}

/// hyper's HTTP/1 defaults (keep-alive on, 30 s header-read timeout once a timer is set) with
/// `timer`; without the header-read timeout unless `header_timeout`.
pub(super) fn http1_builder<T>(timer: T, header_timeout: bool) -> http1::Builder
where
    T: hyper::rt::Timer + Send + Sync + 'static,
{
    let mut builder = http1::Builder::new();
    builder.timer(timer);
    if !header_timeout {
        builder.header_read_timeout(None);
    }
    builder
}

/// The raw servers' answer to every request: hyper's response to `hello`, byte for byte in
/// length (its `date` header is always 29 characters), with a fixed date.
pub(super) const RAW_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\
date: Mon, 30 Nov 2026 00:00:00 GMT\r\n\r\nHello, World!";

/// [`RAW_RESPONSE`] this many times in a row: the raw servers answer a burst of pipelined
/// requests with one `send` of a prefix.
const RAW_BATCH: usize = 32;

/// `RAW_RESPONSE` repeated [`RAW_BATCH`] times.
pub(super) fn raw_responses() -> Vec<u8> {
    RAW_RESPONSE.repeat(RAW_BATCH)
}

/// Counts the requests a byte stream completes: every request of the load generators ends with
/// an empty line (`\r\n\r\n`) and carries no body.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RequestCounter {
    /// How many bytes of `\r\n\r\n` the stream ends with so far (0..=3).
    matched: u8,
}

impl RequestCounter {
    /// Feeds `data`; returns how many requests it completed.
    #[inline]
    pub(super) fn feed(&mut self, data: &[u8]) -> usize {
        const END: &[u8; 4] = b"\r\n\r\n";
        let mut done = 0;
        for &b in data {
            let m = self.matched as usize;
            self.matched = if b == END[m] {
                if m == 3 {
                    done += 1;
                    0
                } else {
                    self.matched + 1
                }
            } else if b == b'\r' {
                1
            } else {
                0
            };
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_across_reads() {
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let stream = req.repeat(3);
        for split in 0..stream.len() {
            let mut c = RequestCounter::default();
            let n = c.feed(&stream[..split]) + c.feed(&stream[split..]);
            assert_eq!(n, 3, "split at {split}");
        }
    }

    #[test]
    fn raw_response_is_as_long_as_hypers() {
        // "HTTP/1.1 200 OK\r\ncontent-length: 13\r\ndate: <29 chars>\r\n\r\nHello, World!"
        assert_eq!(RAW_RESPONSE.len(), 17 + 20 + 6 + 29 + 2 + 2 + 13);
    }
}

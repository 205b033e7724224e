//! wrk's text output, parsed (the `http`, `pinned` and `https` scenarios run wrk).

use std::io;
use std::net::SocketAddr;
use std::process::Command;

use crate::load::Phase;

/// What wrk reported.
#[derive(Debug, Default)]
pub(super) struct WrkResult {
    pub(super) requests: f64,
    pub(super) req_per_s: f64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) socket_errors: f64,
    pub(super) non_2xx: f64,
}

/// `1.23ms` → 1230 (µs).
fn wrk_time_us(s: &str) -> Option<f64> {
    let (num, mult) = if let Some(v) = s.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1e6)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// Whether `wrk` can be run.
pub(super) fn have_wrk() -> bool {
    Command::new("wrk").arg("--version").output().is_ok()
}

/// Runs `wrk ARGS --latency http://ADDR/` as the measurement window of a round (reporting the
/// window's start and end through `on_phase`), and parses what it printed.
pub(super) fn run_wrk(
    addr: SocketAddr,
    args: &[String],
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<WrkResult> {
    run_wrk_url(&format!("http://{addr}/"), args, on_phase)
}

/// [`run_wrk`] against `url` (an `https://` one: wrk speaks TLS through OpenSSL, a full
/// handshake on every connection, certificates unchecked).
pub(super) fn run_wrk_url(
    url: &str,
    args: &[String],
    on_phase: &mut dyn FnMut(Phase),
) -> io::Result<WrkResult> {
    let mut cmd = Command::new("wrk");
    cmd.args(args).arg("--latency").arg(url);
    on_phase(Phase::MeasureStart);
    let out = cmd.output()?;
    on_phase(Phase::MeasureEnd);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "wrk failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    parse_wrk(&String::from_utf8_lossy(&out.stdout))
}

pub(super) fn parse_wrk(out: &str) -> io::Result<WrkResult> {
    let mut r = WrkResult::default();
    let mut got_rps = false;
    for line in out.lines() {
        let l = line.trim();
        let words: Vec<&str> = l.split_whitespace().collect();
        if let Some(v) = l.strip_prefix("Requests/sec:") {
            r.req_per_s = v.trim().parse().map_err(io::Error::other)?;
            got_rps = true;
        } else if words.len() >= 2 && words[1] == "requests" && words.get(2) == Some(&"in") {
            r.requests = words[0].parse().unwrap_or(0.0);
        } else if words.len() == 2 && words[0] == "50%" {
            r.p50_us = wrk_time_us(words[1]).unwrap_or(f64::NAN);
        } else if words.len() == 2 && words[0] == "99%" {
            r.p99_us = wrk_time_us(words[1]).unwrap_or(f64::NAN);
        } else if let Some(v) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            r.socket_errors = v
                .split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<f64>().ok())
                .sum();
        } else if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            r.non_2xx = v.trim().parse().unwrap_or(0.0);
        }
    }
    if !got_rps {
        return Err(io::Error::other(format!(
            "could not parse wrk output:\n{out}"
        )));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output() {
        let out = "Running 2s test @ http://127.0.0.1:1/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   812.00us  300.00us   5.00ms   80.00%
  Latency Distribution
     50%  722.00us
     75%    1.00ms
     90%    1.20ms
     99%    3.89ms
  134000 requests in 2.00s, 11.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  67000.50
Transfer/sec:      5.50MB
";
        let r = parse_wrk(out).unwrap();
        assert_eq!(r.req_per_s, 67000.5);
        assert_eq!(r.requests, 134000.0);
        assert_eq!(r.p50_us, 722.0);
        assert_eq!(r.p99_us, 3890.0);
        assert_eq!(r.socket_errors, 3.0);
        assert_eq!(r.non_2xx, 4.0);
        assert!(parse_wrk("garbage").is_err());
    }
}

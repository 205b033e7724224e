//! Address resolution for `bind`/`connect`: the [`ToSocketAddrs`] trait.
//!
//! Literal addresses (`SocketAddr`, `(IpAddr, u16)`, `"127.0.0.1:80"`, …) resolve without
//! blocking. Host names (`"localhost:80"`, `("example.com", 443)`) go through the system
//! resolver (`getaddrinfo`), which blocks: inside a weir runtime it runs on the runtime's
//! blocking pool, elsewhere (under the fallback reactor) inline on the calling thread.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Types that resolve to one or more socket addresses, for `bind` and `connect`.
///
/// Implemented for [`SocketAddr`], [`SocketAddrV4`], [`SocketAddrV6`], `(IpAddr, u16)`,
/// `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`, `(&str, u16)`, `(String, u16)`, `&str`, [`String`],
/// `[SocketAddr]` (so `&[SocketAddr]`), and references to any of these.
///
/// The trait is sealed: its resolution method is internal to weir. Literal addresses never
/// block; a host name is resolved on weir's blocking pool inside a weir runtime and inline on
/// the calling thread outside one. Operations taking a `ToSocketAddrs` try every resolved
/// address in order and return the last error if none succeeds.
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use weir_net::TcpStream;
///
/// let a = TcpStream::connect("127.0.0.1:8080").await?; // literal: no lookup
/// let b = TcpStream::connect(("localhost", 8080)).await?; // host name: getaddrinfo
/// # drop((a, b));
/// # Ok(())
/// # }
/// ```
pub trait ToSocketAddrs: sealed::ToSocketAddrsPriv {}

#[allow(unreachable_pub)]
pub(crate) mod sealed {
    use super::Resolve;

    /// The internal half of [`ToSocketAddrs`](super::ToSocketAddrs).
    pub trait ToSocketAddrsPriv {
        /// Either the addresses themselves (literals) or a host name still to be looked up.
        #[doc(hidden)]
        fn to_resolve(&self) -> Resolve;
    }
}

/// The result of [`sealed::ToSocketAddrsPriv::to_resolve`].
#[doc(hidden)]
#[derive(Debug)]
pub enum Resolve {
    /// Already resolved (or failed to parse).
    Done(io::Result<Vec<SocketAddr>>),
    /// A `host:port` string for the system resolver.
    Lookup(String),
    /// A host name and a port for the system resolver.
    LookupPort(String, u16),
}

/// Resolves `addr` (by value; pass `&addr` to keep it): literals at once, host names on the blocking pool inside a weir runtime
/// (inline outside one).
pub(crate) async fn resolve<A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    let job = match addr.to_resolve() {
        Resolve::Done(r) => return r,
        job => job,
    };
    let lookup = move || -> io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs as _;
        match job {
            Resolve::Done(r) => r,
            Resolve::Lookup(s) => Ok(s.as_str().to_socket_addrs()?.collect()),
            Resolve::LookupPort(h, p) => Ok((h.as_str(), p).to_socket_addrs()?.collect()),
        }
    };
    match weir_executor::Handle::try_current() {
        Ok(rt) => rt
            .spawn_blocking(lookup)
            .await
            .map_err(|e| io::Error::other(format!("address lookup did not complete: {e}")))?,
        Err(_) => lookup(),
    }
}

/// Resolves `host` to socket addresses, like tokio's `lookup_host`: literals at once, host
/// names through the system resolver (on the runtime's blocking pool inside a weir runtime,
/// inline on the calling thread outside one).
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// for addr in weir_net::lookup_host(("localhost", 8080)).await? {
///     println!("{addr}");
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// A string that is neither an address nor `host:port`, a resolver error (e.g. an unknown
/// host), or the runtime shutting down during the lookup.
pub async fn lookup_host<A: ToSocketAddrs>(
    host: A,
) -> io::Result<impl Iterator<Item = SocketAddr>> {
    Ok(resolve(host).await?.into_iter())
}

/// The error of a `bind`/`connect` that tried every resolved address: the last attempt's
/// error, or `InvalidInput` when the name resolved to no address at all.
pub(crate) fn last_error(last: Option<io::Error>) -> io::Error {
    last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    })
}

fn one(a: SocketAddr) -> Resolve {
    Resolve::Done(Ok(vec![a]))
}

macro_rules! literal {
    ($($t:ty => |$s:ident| $e:expr;)*) => {$(
        impl ToSocketAddrs for $t {}
        impl sealed::ToSocketAddrsPriv for $t {
            fn to_resolve(&self) -> Resolve {
                let $s = self;
                one($e)
            }
        }
    )*};
}

literal! {
    SocketAddr => |s| *s;
    SocketAddrV4 => |s| SocketAddr::V4(*s);
    SocketAddrV6 => |s| SocketAddr::V6(*s);
    (IpAddr, u16) => |s| SocketAddr::new(s.0, s.1);
    (Ipv4Addr, u16) => |s| SocketAddr::new(IpAddr::V4(s.0), s.1);
    (Ipv6Addr, u16) => |s| SocketAddr::new(IpAddr::V6(s.0), s.1);
}

impl ToSocketAddrs for [SocketAddr] {}
impl sealed::ToSocketAddrsPriv for [SocketAddr] {
    fn to_resolve(&self) -> Resolve {
        Resolve::Done(Ok(self.to_vec()))
    }
}

impl ToSocketAddrs for str {}
impl sealed::ToSocketAddrsPriv for str {
    fn to_resolve(&self) -> Resolve {
        match self.parse::<SocketAddr>() {
            Ok(a) => one(a),
            Err(_) => Resolve::Lookup(self.to_owned()),
        }
    }
}

impl ToSocketAddrs for String {}
impl sealed::ToSocketAddrsPriv for String {
    fn to_resolve(&self) -> Resolve {
        self.as_str().to_resolve()
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl sealed::ToSocketAddrsPriv for (&str, u16) {
    fn to_resolve(&self) -> Resolve {
        let (host, port) = *self;
        match host.parse::<IpAddr>() {
            Ok(ip) => one(SocketAddr::new(ip, port)),
            Err(_) => Resolve::LookupPort(host.to_owned(), port),
        }
    }
}

impl ToSocketAddrs for (String, u16) {}
impl sealed::ToSocketAddrsPriv for (String, u16) {
    fn to_resolve(&self) -> Resolve {
        (self.0.as_str(), self.1).to_resolve()
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrs + ?Sized> sealed::ToSocketAddrsPriv for &T {
    fn to_resolve(&self) -> Resolve {
        (**self).to_resolve()
    }
}

#[cfg(test)]
mod tests {
    use super::sealed::ToSocketAddrsPriv;
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    #[test]
    fn literals_resolve_without_lookup() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let v6: SocketAddr = "[::1]:81".parse().unwrap();
        for r in [
            v4.to_resolve(),
            "127.0.0.1:80".to_resolve(),
            String::from("127.0.0.1:80").to_resolve(),
            ("127.0.0.1", 80).to_resolve(),
            (Ipv4Addr::LOCALHOST, 80).to_resolve(),
            (IpAddr::from(Ipv4Addr::LOCALHOST), 80).to_resolve(),
        ] {
            let Resolve::Done(Ok(a)) = r else {
                panic!("literal resolved by lookup: {r:?}")
            };
            assert_eq!(a, vec![v4]);
        }
        let Resolve::Done(Ok(a)) = ("::1", 81).to_resolve() else {
            panic!("v6 literal")
        };
        assert_eq!(a, vec![v6]);
        let list = [v4, v6];
        let Resolve::Done(Ok(a)) = list[..].to_resolve() else {
            panic!("slice")
        };
        assert_eq!(a, list.to_vec());
    }

    #[test]
    fn host_names_are_looked_up() {
        assert!(matches!("localhost:80".to_resolve(), Resolve::Lookup(_)));
        assert!(matches!(
            ("localhost", 80).to_resolve(),
            Resolve::LookupPort(..)
        ));
        let addrs = block_on(resolve("localhost:80")).unwrap();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
    }

    #[test]
    fn no_address_is_invalid_input() {
        let empty: &[SocketAddr] = &[];
        let addrs = block_on(resolve(empty)).unwrap();
        assert!(addrs.is_empty());
        assert_eq!(last_error(None).kind(), io::ErrorKind::InvalidInput);
    }
}

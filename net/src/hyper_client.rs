//! hyper-util's legacy client on weir's streams (feature `hyper-client`): [`Connection`] for
//! [`TcpStream`] and [`UnixStream`], so a connector that yields them (weir's
//! `weir::http::HttpConnector`, or your own) plugs into `hyper_util::client::legacy::Client`.

use std::net::SocketAddr;

use hyper_util::client::legacy::connect::{Connected, Connection};

use crate::{TcpStream, UnixStream};

/// The addresses of a TCP connection the client made, attached to every response it carries
/// (`response.extensions().get::<HttpInfo>()`).
#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpInfo {
    remote_addr: SocketAddr,
    local_addr: SocketAddr,
}

#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
impl HttpInfo {
    /// The server's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote_addr
    }

    /// The client's end of the connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
impl Connection for TcpStream {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        match (self.peer_addr(), self.local_addr()) {
            (Ok(remote_addr), Ok(local_addr)) => connected.extra(HttpInfo {
                remote_addr,
                local_addr,
            }),
            // The peer is already gone; the client finds out on its first read or write.
            _ => connected,
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
impl Connection for UnixStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

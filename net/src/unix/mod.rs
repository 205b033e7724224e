//! Unix-domain sockets.
// PLACEHOLDER: being written (helper "udp-unix").

/// A Unix listener.
#[derive(Debug)]
pub struct UnixListener(());
/// A Unix stream.
#[derive(Debug)]
pub struct UnixStream(());
/// A Unix datagram socket.
#[derive(Debug)]
pub struct UnixDatagram(());

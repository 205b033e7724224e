//! TCP: [`TcpListener`], [`TcpStream`], [`TcpSocket`].
// PLACEHOLDER: being written (helper "tcp").

/// A TCP listener.
#[derive(Debug)]
pub struct TcpListener(());
/// A TCP stream.
#[derive(Debug)]
pub struct TcpStream(());
/// A TCP socket before it listens or connects.
#[derive(Debug)]
pub struct TcpSocket(());

//! UDP.
// PLACEHOLDER: being written (helper "udp-unix").

/// A UDP socket.
#[derive(Debug)]
pub struct UdpSocket(());

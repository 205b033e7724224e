//! The socket options of [`UdpSocket`]: broadcast, multicast, TTL, traffic class, device, and
//! the pending error.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use socket2::SockRef;

use super::UdpSocket;

impl UdpSocket {
    /// Whether `SO_BROADCAST` is set.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets `SO_BROADCAST`: allows sending to broadcast addresses.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// Whether IPv4 multicast sent by this socket loops back to local sockets
    /// (`IP_MULTICAST_LOOP`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)` (e.g. on an IPv6 socket).
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v4(on)
    }

    /// The time-to-live of outgoing IPv4 multicast (`IP_MULTICAST_TTL`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.io.get_ref().multicast_ttl_v4()
    }

    /// Sets `IP_MULTICAST_TTL` (1 keeps multicast on the local network).
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_multicast_ttl_v4(ttl)
    }

    /// Whether IPv6 multicast sent by this socket loops back (`IPV6_MULTICAST_LOOP`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)` (e.g. on an IPv4 socket).
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v6()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v6(on)
    }

    /// Joins the IPv4 multicast group `multiaddr` on the interface with address `interface`
    /// (`Ipv4Addr::UNSPECIFIED` lets the kernel choose).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IP_ADD_MEMBERSHIP)`.
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().join_multicast_v4(&multiaddr, &interface)
    }

    /// Joins the IPv6 multicast group `multiaddr` on the interface with index `interface`
    /// (0 lets the kernel choose).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IPV6_ADD_MEMBERSHIP)`.
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().join_multicast_v6(multiaddr, interface)
    }

    /// Leaves an IPv4 multicast group joined with
    /// [`join_multicast_v4`](Self::join_multicast_v4).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IP_DROP_MEMBERSHIP)`.
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v4(&multiaddr, &interface)
    }

    /// Leaves an IPv6 multicast group joined with
    /// [`join_multicast_v6`](Self::join_multicast_v6).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IPV6_DROP_MEMBERSHIP)`.
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v6(multiaddr, interface)
    }

    /// The unicast time-to-live of outgoing packets (`IP_TTL`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `IP_TTL`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The IPv4 type-of-service byte of outgoing packets (`IP_TOS`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn tos_v4(&self) -> io::Result<u32> {
        SockRef::from(self.io.get_ref()).tos_v4()
    }

    /// Sets `IP_TOS` (DSCP and ECN bits).
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_tos_v4(tos)
    }

    /// The IPv6 traffic class of outgoing packets (`IPV6_TCLASS`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn tclass_v6(&self) -> io::Result<u32> {
        SockRef::from(self.io.get_ref()).tclass_v6()
    }

    /// Sets `IPV6_TCLASS`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_tclass_v6(tclass)
    }

    /// The interface the socket is bound to (`SO_BINDTODEVICE`), if any.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
        SockRef::from(self.io.get_ref()).device()
    }

    /// Binds the socket to an interface by name (`SO_BINDTODEVICE`); `None` removes the
    /// binding. Usually needs `CAP_NET_RAW`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)` (`EPERM` without the capability).
    pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).bind_device(interface)
    }

    /// Takes the pending socket error (`SO_ERROR`), if any — for instance an ICMP error that
    /// no receive has reported yet.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

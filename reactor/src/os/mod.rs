//! OS-specific controls of a reactor, outside the portable API: each submodule holds the
//! controls of one OS as extension traits, implemented only where the OS has them.

#[cfg(target_os = "linux")]
pub mod linux;

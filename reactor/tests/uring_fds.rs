//! No fd is left behind by an io_uring reactor (its ring, its eventfd): counted in a test
//! binary of its own, since other tests open fds concurrently.

mod support;

use std::os::fd::AsRawFd;
use std::time::Duration;

use weir_reactor::for_executor::{Driver, DriverConfig};
use weir_reactor::{Backend, Interest, Registration};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_dropped_reactor_closes_its_ring_and_eventfd() {
    if !support::uring("a_dropped_reactor_closes_its_ring_and_eventfd") {
        return;
    }
    let before = open_fds();
    for _ in 0..20 {
        let mut d = Driver::new(&DriverConfig {
            backend: Backend::IoUring,
            ..DriverConfig::default()
        })
        .unwrap();
        let (r, w) = support::pipe();
        let reg = Registration::with_handle(r.as_raw_fd(), Interest::READABLE, d.handle()).unwrap();
        support::write1(&w);
        d.park(Some(Duration::from_secs(10))).unwrap();
        // A thread change rebuilds the ring: the old one must be closed too.
        let d = std::thread::spawn(move || {
            let mut d = d;
            d.poll().unwrap();
            d
        })
        .join()
        .unwrap();
        drop(reg);
        drop(d);
    }
    assert_eq!(open_fds(), before);
}

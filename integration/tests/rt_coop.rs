//! The cooperative budget: a task that never blocks cannot starve timers or other tasks.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir::io::unix::AsyncFd;

rt_test! {
    fn always_ready_loop_does_not_starve_a_timer(rt) {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            // An eventfd that stays readable: `readable()` is ready on every call, so without a
            // budget this loop would never return to the scheduler.
            let efd = AsyncFd::new(common::eventfd()).unwrap();
            common::write_fd(efd.get_ref(), &1u64.to_ne_bytes()).unwrap();
            let spinner = weir::spawn(async move {
                let mut n = 0u64;
                while !s.load(Ordering::Relaxed) {
                    let _g = efd.readable().await.unwrap();
                    n += 1;
                }
                n
            });
            weir::time::sleep(Duration::from_millis(2)).await;
            stop.store(true, Ordering::Relaxed);
            assert!(spinner.await.unwrap() > 0);
        });
    }
}

//! A guard from `Runtime::enter` may still be in scope when the runtime is shut down by value
//! (tokio's guard allows this).

use std::time::Duration;

fn main() {
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(1)
        .build()
        .unwrap();
    let _guard = rt.enter();
    rt.shutdown_timeout(Duration::from_secs(10));

    let rt = weir::runtime::Builder::new_current_thread().build().unwrap();
    let _guard = rt.handle().enter();
    drop(rt);
}

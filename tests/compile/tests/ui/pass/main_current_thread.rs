// A renamed weir crate, the current-thread flavor, the mio backend, adaptive min_wait, and a
// `#[weir::main]` function that is not `main`.
extern crate weir as runtime_crate;

use std::time::Duration;

#[runtime_crate::main(
    flavor = "current_thread",
    backend = "mio",
    min_wait_adaptive = "100us",
    crate = "runtime_crate"
)]
async fn compute(/* no parameters */) -> u64 {
    runtime_crate::time::sleep(Duration::from_millis(1)).await;
    runtime_crate::spawn(async { 7 }).await.unwrap() * 6
}

fn main() {
    assert_eq!(compute(), 42);
}

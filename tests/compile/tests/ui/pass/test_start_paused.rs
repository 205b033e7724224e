use std::time::Duration;

#[weir::test(start_paused = true)]
async fn an_hour_in_no_time() {
    let start = weir::time::Instant::now();
    weir::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(3600));
}

#[weir::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let start = weir::time::Instant::now();
    weir::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(3600));
}

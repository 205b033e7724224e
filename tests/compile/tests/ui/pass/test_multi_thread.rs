// Tests are compiled out of this (non-test) build, but the attributes must still expand.

#[weir::test(flavor = "multi_thread")]
async fn multi_thread() {
    weir::time::sleep(std::time::Duration::from_millis(1)).await;
}

#[weir::test(
    flavor = "multi_thread",
    workers = 2,
    min_wait = "0us",
    backend = "epoll"
)]
/// Doc comments and other attributes stay.
#[should_panic(expected = "boom")]
async fn multi_thread_panics() {
    panic!("boom");
}

#[weir::test]
#[ignore = "shows that #[ignore] is kept"]
async fn current_thread() -> Result<(), weir::task::JoinError> {
    assert_eq!(weir::spawn(async { 2 }).await?, 2);
    Ok(())
}

fn main() {}

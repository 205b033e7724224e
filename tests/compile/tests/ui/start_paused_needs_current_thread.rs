#[weir::test(flavor = "multi_thread", start_paused = true)]
async fn multi_thread_test() {}

#[weir::test(start_paused = "true")]
async fn quoted() {}

#[weir::main(start_paused = true)]
async fn main() {}

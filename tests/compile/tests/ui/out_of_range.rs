#[weir::main(workers = 5000, min_wait = "200ms", busy_poll = "2s")]
async fn main() {}

#[weir::main(workers = 2, min_wait = "1ms", workers = 4)]
async fn main() {}

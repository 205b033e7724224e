#[weir::main(backend = "uring")]
async fn main() {}

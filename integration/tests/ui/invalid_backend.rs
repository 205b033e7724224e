#[weir::main(backend = "io_uring")]
async fn main() {}

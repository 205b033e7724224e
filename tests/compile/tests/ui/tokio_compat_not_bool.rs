#[weir::main(tokio_compat = "true")]
async fn main() {}

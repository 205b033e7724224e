#[weir::main(foo = 1)]
async fn main() {}

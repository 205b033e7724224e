#[weir::main(crate = "not_weir")]
async fn main() {}

#[weir::main]
fn main() {}

#[weir::test]
fn not_async_test() {}

#[weir::main(workers(4))]
async fn main() {}

#[weir::main(workers)]
async fn no_value() {}

#[weir::main(workers = )]
async fn empty_value() {}

#[weir::main("multi_thread")]
async fn literal() {}

#[weir::main(workers = 2 flavor = "multi_thread")]
async fn missing_comma() {}

#[weir::main(crate = weir)]
async fn unquoted_crate() {}

#[weir::main(flavor = "bogus")]
async fn main() {}

#[weir::test(flavor = "multi-thread")]
async fn dash() {}

#[weir::test(flavor = multi_thread)]
async fn unquoted() {}

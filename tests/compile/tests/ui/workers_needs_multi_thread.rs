#[weir::test(workers = 4)]
async fn default_flavor() {}

#[weir::main(flavor = "current_thread", workers = 4)]
async fn main() {}

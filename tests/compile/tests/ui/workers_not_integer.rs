#[weir::main(workers = "4")]
async fn main() {}

const N: usize = 4;

#[weir::main(workers = N)]
async fn constant() {}

#[weir::main(workers = 2.5)]
async fn float() {}

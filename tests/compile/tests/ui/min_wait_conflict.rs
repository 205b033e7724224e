#[weir::main(min_wait = "100us", min_wait_adaptive = "200us")]
async fn main() {}

#[weir::main(min_wait_adaptive = "0us")]
async fn adaptive_zero() {}

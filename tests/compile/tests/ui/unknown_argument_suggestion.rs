#[weir::test(threads = 2)]
async fn tokio_name() {}

#[weir::test(multi_thread)]
async fn bare_flavor() {}

#[weir::test(min_wiat = "1ms")]
async fn typo() {}

fn main() {}

#[weir::main(min_wait = "200xs")]
async fn main() {}

#[weir::test(busy_poll = "50")]
async fn missing_unit() {}

#[weir::test(min_wait = "1.5ms")]
async fn fraction() {}

#[weir::test(busy_poll = 50)]
async fn not_a_string() {}

#[weir::test(min_wait_adaptive = "99999999999s")]
async fn overflow() {}

#[weir::test(min_wait = "200 us")]
async fn whitespace() {}

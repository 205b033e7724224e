use std::time::Duration;

#[weir::main(workers = 2, min_wait = "200us", busy_poll = "50us")]
async fn main() {
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            weir::spawn(async move {
                weir::time::sleep(Duration::from_micros(50 * i)).await;
                i
            })
        })
        .collect();
    let mut sum = 0;
    for handle in handles {
        sum += handle.await.unwrap();
    }
    assert_eq!(sum, 6);
}

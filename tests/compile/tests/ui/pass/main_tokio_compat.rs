// Library code calling tokio's runtime APIs runs on weir with the compat runtime.
#[weir::main(workers = 2, tokio_compat = true)]
async fn main() {
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    let answer = tokio::spawn(async { 42 }).await.unwrap();
    assert_eq!(answer, 42);
}

//! A task may await a `JoinHandle` whose output borrows `'static` data: the outer future is
//! `Send` for every lifetime the compiler picks for the output (`JoinHandle<T>: Send` needs
//! `T: Send` only, as in tokio).

fn assert_send<T: Send>(_: &T) {}

fn main() {
    let rt = weir::runtime::Builder::new_multi_thread()
        .workers(1)
        .build()
        .unwrap();
    let out = rt.block_on(async {
        weir::spawn(async { weir::spawn(async { "hi" }).await })
            .await
            .unwrap()
            .unwrap()
    });
    assert_eq!(out, "hi");

    let nested = async {
        let h = weir::spawn(async { "borrowed" });
        h.await.unwrap()
    };
    assert_send(&nested);
    let h = rt.spawn(nested);
    assert_eq!(rt.block_on(h).unwrap(), "borrowed");
}

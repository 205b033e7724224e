#[weir::test]
async fn takes_args(n: u32) {
    let _ = n;
}

#[weir::test]
#[test]
async fn twice() {}

fn main() {}

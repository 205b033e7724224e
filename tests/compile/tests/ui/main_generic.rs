#[weir::main]
async fn main<T: Default>() {
    let _ = T::default();
}

#[weir::main]
async fn with_where() -> u32
where
    u32: Copy,
{
    1
}

#[weir::main]
unsafe extern "C" fn bad_shape() {}

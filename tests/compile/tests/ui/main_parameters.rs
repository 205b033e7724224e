#[weir::main]
async fn main(args: Vec<String>) {
    let _ = args;
}

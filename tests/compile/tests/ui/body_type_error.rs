#[weir::main]
async fn main() -> Result<(), String> {
    let n = 5;
    Ok(n)
}

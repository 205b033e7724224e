use std::error::Error;
use std::fmt;

#[derive(Debug)]
struct Odd(u32);

impl fmt::Display for Odd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is odd", self.0)
    }
}

impl Error for Odd {}

fn half(n: u32) -> Result<u32, Odd> {
    if n % 2 == 0 { Ok(n / 2) } else { Err(Odd(n)) }
}

/// `?` converts into the declared error type; `return` leaves the body early.
#[weir::main]
pub(crate) async fn main() -> Result<(), Box<dyn Error>> {
    #![allow(clippy::needless_return)]
    let n = weir::spawn(async { 84 }).await?;
    let n = half(n)?;
    assert_eq!(n, 42);
    if n == 42 {
        return Ok(());
    }
    unreachable!();
}

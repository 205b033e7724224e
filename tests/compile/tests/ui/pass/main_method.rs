//! `#[weir::main]` on methods and on functions with parameters (not `main` itself).

struct App {
    base: u32,
}

impl App {
    #[weir::main(flavor = "current_thread")]
    async fn run(&self) -> u32 {
        let base = self.base;
        weir::spawn(async move { base + 1 }).await.unwrap()
    }

    #[weir::main(workers = 2, name = "consumer")]
    async fn consume(self, extra: u32) -> Result<u32, std::num::ParseIntError> {
        assert_eq!(weir::runtime::Handle::current().name(), Some("consumer"));
        let parsed: u32 = "5".parse()?;
        if extra == 0 {
            return Ok(0);
        }
        Ok(parsed + self.base + extra)
    }
}

#[weir::main]
async fn add(a: u32, (b, c): (u32, u32)) -> u32 {
    a + b + c
}

fn main() {
    let app = App { base: 1 };
    assert_eq!(app.run(), 2);
    assert_eq!(app.consume(3), Ok(9));
    assert_eq!(add(1, (2, 3)), 6);
}

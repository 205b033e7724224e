#[weir::main]
struct Main;

fn main() {}

//! Compile tests of `#[weir::main]` and `#[weir::test]`: the error messages of wrong uses
//! (`tests/ui/*.rs` with their `.stderr`) and a few shapes that must compile and run
//! (`tests/ui/pass/*.rs`).
//!
//! Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p weir-compile-tests --test macros_ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/*.rs");
}

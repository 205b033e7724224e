//! Compile tests of API shapes that tokio code relies on: each `tests/shape/*.rs` must compile
//! (and its `main` run) against weir.

#[test]
fn shapes_compile() {
    trybuild::TestCases::new().pass("tests/shape/*.rs");
}

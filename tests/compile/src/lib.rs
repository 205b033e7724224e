//! weir's compile tests live in `tests/`: the error messages of `#[weir::main]` and
//! `#[weir::test]` (`tests/ui/`) and the API shapes tokio code relies on (`tests/shape/`). This
//! library is empty; the package exists so that trybuild's test project depends on weir and
//! tokio only, not on every dependency of the integration tests.

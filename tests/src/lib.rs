//! weir's integration tests live in `tests/`; this library is empty. They are a package of
//! their own so that the dependencies they need (real HTTP clients, WebSocket clients, tower
//! middleware) are not built for the examples of the `weir` crate.

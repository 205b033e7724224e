//! The `#[weir::main]` and `#[weir::test]` attributes.
//!
//! Use them through the `weir` crate, which re-exports both: `#[weir::main]` turns
//! `async fn main` into a synchronous `main` that builds a weir runtime and blocks on the body;
//! `#[weir::test]` does the same for a `#[test]` function.
//!
//! ```ignore
//! #[weir::main(workers = 4, min_wait = "200us")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let answer = weir::spawn(async { 6 * 7 }).await?;
//!     println!("{answer}");
//!     Ok(())
//! }
//! ```
//!
//! # Arguments
//!
//! Both attributes take the same `name = value` arguments, separated by commas, each at most
//! once:
//!
//! | argument | value | builder call |
//! |---|---|---|
//! | `flavor` | `"multi_thread"` (default of `main`) or `"current_thread"` (default of `test`) | `Builder::new_multi_thread()` / `Builder::new_current_thread()` |
//! | `workers` (or tokio's `worker_threads`) | integer literal ≥ 1; multi-thread runtimes only | `.workers(n)` |
//! | `name` | non-empty string: the runtime's name (`Handle::name`) | `.name("…")` |
//! | `min_wait` | duration string; `"0us"` turns min_wait off | `.min_wait(d)` |
//! | `min_wait_adaptive` | duration string > 0; not together with `min_wait` | `.min_wait_adaptive(d)` |
//! | `busy_poll` | duration string | `.busy_poll(d)` |
//! | `backend` | `"epoll"`, `"mio"`, `"io_uring"` or `"auto"` | `.backend(Backend::Epoll)`, `.backend(Backend::Mio)`, `.backend(Backend::IoUring)`, `.backend(Backend::Auto)` |
//! | `start_paused` | `true` or `false`; `true` needs the current-thread flavour | `.start_paused(b)` |
//! | `tokio_compat` | `true` or `false`; `true` needs weir's `tokio-compat` feature | `.tokio_compat(b)` |
//! | `crate` | string holding the path of the weir crate (default `"::weir"`) | — |
//!
//! Settings left out keep the builder's defaults (for `workers`: the available parallelism; for
//! `backend`: the `WEIR_BACKEND` environment variable, else epoll).
//!
//! `backend = "io_uring"` falls back to epoll, with one warning, where the kernel refuses
//! io_uring (`kernel.io_uring_disabled`, a seccomp filter, an old kernel); `"auto"` takes
//! io_uring where the kernel offers it and epoll otherwise. A `backend` given here wins over
//! `WEIR_BACKEND`. For io_uring without the fallback, build the runtime with
//! `Builder::backend_strict(true)`, or leave `backend` out and run with
//! `WEIR_BACKEND=io_uring!`.
//!
//! A duration string is an integer followed by a unit, with nothing in between: `ns`, `us` (or
//! `µs`), `ms` or `s`, as in `"50ns"`, `"200us"`, `"1ms"`, `"2s"`. It must fit in a `u64` of
//! nanoseconds. Values above the runtime's limits (`weir::runtime::MAX_WORKERS`,
//! `MAX_MIN_WAIT`, `MAX_BUSY_POLL`) are rejected at compile time.
//!
//! Mistakes are compile errors at the offending token that say what to write instead, e.g.
//!
//! ```text
//! error: invalid value for `flavor`: "multi"; accepted values: "current_thread", "multi_thread"
//!  --> src/main.rs:1:23
//!   |
//! 1 | #[weir::main(flavor = "multi")]
//!   |                       ^^^^^^^
//! ```
//!
//! # The generated code
//!
//! The body becomes a nested `async fn` with the declared return type, so `return`, `?` and
//! `.await` work as in any `async fn`, and type errors point into the body. The outer function
//! keeps the name, visibility, attributes and return type, builds the runtime (panicking with
//! the builder's error if the settings are rejected at run time), and returns what
//! `Runtime::block_on` returns. The function must therefore be an `async fn` without
//! generics, `unsafe`, `const` or an ABI. Being a nested function, the body cannot name `Self`
//! or the enclosing function's local items from outside it.
//!
//! A `#[weir::main]` function other than `main` may take parameters, `self` included, as with
//! tokio (`#[weir::main] async fn run(&self)` in an `impl` block): its body then becomes an
//! `async move` block capturing them, which may name `Self`. `main` itself and `#[weir::test]`
//! functions take no parameters.
//!
//! The range checks against `weir::runtime::MAX_*` are `const` assertions in the generated
//! function, so they report at the offending value as `evaluation panicked: ...`. Inside
//! `#[weir::test]` they only run in test builds (`cargo test`), where the function exists.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod args;
mod duration;
mod expand;

use proc_macro::TokenStream;

use crate::args::Kind;

/// Runs an `async fn` — usually `main` — to completion on a new weir runtime.
///
/// The function must be `async`; `main` takes no parameters, other functions and methods may
/// (`async fn run(&self)`). It may return anything (a `Result` for `?` in `main`, for
/// example). Its name, visibility, attributes and return type are kept. The default runtime is
/// multi-threaded with one worker per available CPU.
///
/// Arguments (all optional; see the [crate documentation](crate) for details): `workers = 4`,
/// `flavor = "current_thread" | "multi_thread"`, `name = "my-runtime"`, `min_wait = "200us"`,
/// `min_wait_adaptive = "200us"`, `busy_poll = "50us"`, `backend = "epoll" | "mio" | "io_uring" | "auto"`,
/// `start_paused = true` (current-thread flavour only), `tokio_compat = true` (feature
/// `tokio-compat`), `crate = "path::to::weir"`.
///
/// ```ignore
/// use std::time::Duration;
///
/// #[weir::main(workers = 2, min_wait = "200us", busy_poll = "50us")]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let task = weir::spawn(async {
///         weir::time::sleep(Duration::from_millis(1)).await;
///         "done"
///     });
///     println!("{}", task.await?);
///     Ok(())
/// }
/// ```
///
/// This is equivalent to
///
/// ```ignore
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     weir::runtime::Builder::new_multi_thread()
///         .workers(2)
///         .min_wait(std::time::Duration::from_micros(200))
///         .busy_poll(std::time::Duration::from_micros(50))
///         .build()
///         .expect("could not build the weir runtime")
///         .block_on(async {
///             // the body
///             # Ok(())
///         })
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Kind::Main, args.into(), item.into()).into()
}

/// Runs an `async fn` test on a new weir runtime.
///
/// Generates a `#[test]` function (do not add `#[test]` yourself). Other attributes, such as
/// `#[should_panic]`, `#[ignore]` and doc comments, are kept. The default runtime is a
/// current-thread runtime: the test body and every task it spawns run on the test's thread.
/// Ask for worker threads with `flavor = "multi_thread"` (and optionally `workers = n`).
///
/// Takes the same arguments as [`macro@main`]. `start_paused = true` starts the runtime with
/// its clock paused (`weir::time::pause`): sleeps and timeouts complete as soon as the test has
/// nothing else to do, at their exact deadlines on the paused clock.
///
/// ```ignore
/// use std::time::Duration;
///
/// #[weir::test]
/// async fn sleeps() {
///     weir::time::sleep(Duration::from_millis(1)).await;
/// }
///
/// #[weir::test(flavor = "multi_thread", workers = 2, backend = "mio")]
/// async fn spawns() -> Result<(), weir::task::JoinError> {
///     assert_eq!(weir::spawn(async { 1 + 1 }).await?, 2);
///     Ok(())
/// }
///
/// #[weir::test(start_paused = true)]
/// async fn an_hour_in_no_time() {
///     let start = weir::time::Instant::now();
///     weir::time::sleep(Duration::from_secs(3600)).await;
///     assert_eq!(start.elapsed(), Duration::from_secs(3600));
/// }
///
/// #[weir::test]
/// #[should_panic(expected = "boom")]
/// async fn panics() {
///     panic!("boom");
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Kind::Test, args.into(), item.into()).into()
}

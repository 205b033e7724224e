//! `#[weir::test]` expansions run: each test spawns a task and sleeps on the runtime the
//! attribute built.

use std::thread;
use std::time::{Duration, Instant};

/// Spawns a task that sleeps, awaits it, and checks that the sleep took at least as long as
/// asked.
async fn spawn_and_sleep() -> u32 {
    let start = Instant::now();
    let task = weir::task::spawn(async {
        weir::time::sleep(Duration::from_millis(2)).await;
        21
    });
    weir::time::sleep(Duration::from_millis(1)).await;
    let value = task.await.expect("the spawned task failed");
    assert!(start.elapsed() >= Duration::from_millis(2));
    value * 2
}

#[weir::test]
async fn default_flavor() {
    assert_eq!(spawn_and_sleep().await, 42);
}

#[weir::test]
async fn current_thread_by_default() {
    // Spawned tasks run on the test's own thread.
    let test_thread = thread::current().id();
    let task_thread = weir::task::spawn(async { thread::current().id() })
        .await
        .unwrap();
    assert_eq!(task_thread, test_thread);
}

#[weir::test(flavor = "multi_thread", workers = 2)]
async fn multi_thread_two_workers() {
    assert_eq!(spawn_and_sleep().await, 42);
    // Spawned tasks run on the workers, not on the test's thread.
    let test_thread = thread::current().id();
    let task_thread = weir::task::spawn(async { thread::current().id() })
        .await
        .unwrap();
    assert_ne!(task_thread, test_thread);
    let index = weir::task::spawn(async { weir::runtime::worker_index() })
        .await
        .unwrap();
    assert!(matches!(index, Some(0 | 1)), "worker index {index:?}");
}

/// tokio's spelling of `workers`, so that a tokio attribute ports unchanged.
#[weir::test(flavor = "multi_thread", worker_threads = 3)]
async fn tokio_spelling_worker_threads() {
    assert_eq!(weir::runtime::Handle::current().num_workers(), 3);
}

#[weir::test(min_wait = "1ms")]
async fn min_wait() {
    assert_eq!(spawn_and_sleep().await, 42);
}

#[weir::test(backend = "mio")]
async fn mio_backend() {
    assert_eq!(spawn_and_sleep().await, 42);
}

#[weir::test(
    flavor = "multi_thread",
    workers = 2,
    min_wait_adaptive = "200us",
    busy_poll = "50us",
    backend = "epoll"
)]
async fn all_settings() {
    assert_eq!(spawn_and_sleep().await, 42);
}

/// `start_paused = true`: the clock stands still and jumps to the next timer when the test is
/// idle, so an hour's sleep completes at once, exactly an hour later on the paused clock.
#[weir::test(start_paused = true)]
async fn start_paused() {
    let start = weir::time::Instant::now();
    let task = weir::task::spawn(weir::time::sleep(Duration::from_secs(3600)));
    weir::time::sleep(Duration::from_secs(7200)).await;
    task.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(7200));
    weir::time::advance(Duration::from_secs(1)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(7201));
}

#[weir::test(start_paused = false)]
async fn start_paused_false() {
    let start = weir::time::Instant::now();
    weir::time::sleep(Duration::from_millis(1)).await;
    assert!(start.elapsed() >= Duration::from_millis(1));
    // A running clock may still be paused by the test.
    weir::time::pause();
    let t = weir::time::Instant::now();
    weir::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(t.elapsed(), Duration::from_secs(60));
}

/// `?` and `return` work in the body; the test's return type is kept.
#[weir::test]
async fn returns_result() -> Result<(), weir::task::JoinError> {
    let n = weir::task::spawn(async { 1 }).await?;
    if n == 1 {
        return Ok(());
    }
    unreachable!()
}

#[weir::test]
#[should_panic(expected = "boom from the body")]
async fn should_panic_is_kept() {
    weir::time::sleep(Duration::from_micros(10)).await;
    panic!("boom from the body");
}

#[weir::test(flavor = "multi_thread", workers = 2)]
#[should_panic(expected = "boom from a task")]
async fn task_panic_reaches_the_test() {
    let error = weir::task::spawn(async { panic!("boom from a task") })
        .await
        .unwrap_err();
    assert!(error.is_panic());
    std::panic::resume_unwind(error.into_panic());
}

#[weir::test]
#[ignore = "shows that #[ignore] is kept; never run"]
async fn ignore_is_kept() {
    panic!("ignored tests do not run");
}

/// The compile-time range checks of the macros compare against these constants; their error
/// messages quote the values (`macros/src/expand.rs`). Update the messages when this fails.
#[test]
fn limits_quoted_by_the_macros() {
    assert_eq!(weir::runtime::MAX_WORKERS, 1024);
    assert_eq!(weir::runtime::MAX_MIN_WAIT, Duration::from_millis(100));
    assert_eq!(weir::runtime::MAX_BUSY_POLL, Duration::from_secs(1));
}

#[weir::test(name = "named-test")]
async fn name_sets_the_runtime_name() {
    assert_eq!(weir::runtime::Handle::current().name(), Some("named-test"));
}

#[weir::test(flavor = "multi_thread", name = "named-multi")]
async fn name_with_multi_thread() {
    let name = weir::spawn(async { weir::runtime::Handle::current().name().map(str::to_owned) })
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("named-multi"));
}

//! A program whose library code uses tokio's runtime directly — `tokio::fs::read` under a
//! `JoinSet`, a background task with `tokio::spawn` and `tokio::time::interval`, a retry loop
//! with `tokio::time::sleep` — ported from `apps/tokio/lib_tasks.rs` by changing its
//! runtime line only: on weir with the tokio compat runtime, the library is unchanged.
//!
//! ```text
//! cargo run -p weir-tests --bin lib_tasks
//! ```

mod library {
    use std::io;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use tokio::task::JoinSet;

    /// Reads every file concurrently; the results come back in input order.
    pub(crate) async fn load_all(paths: Vec<PathBuf>) -> io::Result<Vec<Vec<u8>>> {
        let mut set = JoinSet::new();
        for (i, path) in paths.into_iter().enumerate() {
            set.spawn(async move { (i, tokio::fs::read(path).await) });
        }
        let mut out = vec![Vec::new(); set.len()];
        while let Some(joined) = set.join_next().await {
            let (i, read) = joined.expect("a reader task panicked");
            out[i] = read?;
        }
        Ok(out)
    }

    /// Counts ticks of `period` in a background task until the handle is aborted.
    pub(crate) fn start_ticker(period: Duration) -> (tokio::task::JoinHandle<()>, Arc<AtomicU64>) {
        let ticks = Arc::new(AtomicU64::new(0));
        let counter = ticks.clone();
        let task = tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            loop {
                interval.tick().await;
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        (task, ticks)
    }

    /// Runs `attempt` until it succeeds, sleeping 1, 2, 4 … ms between tries.
    pub(crate) async fn with_retry<T, E>(mut attempt: impl FnMut(u32) -> Result<T, E>) -> T {
        let mut n = 0;
        loop {
            match attempt(n) {
                Ok(v) => return v,
                Err(_) => tokio::time::sleep(Duration::from_millis(1 << n.min(6))).await,
            }
            n += 1;
        }
    }
}

use std::sync::atomic::Ordering;
use std::time::Duration;

#[weir::main(tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let dir = std::env::temp_dir().join(format!("lib-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let paths: Vec<_> = (0..8).map(|i| dir.join(format!("file-{i}"))).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(p, vec![b'x'; i])?;
    }
    let (ticker, ticks) = library::start_ticker(Duration::from_millis(1));
    let files = library::load_all(paths).await?;
    let sizes: Vec<usize> = files.iter().map(Vec::len).collect();
    assert_eq!(sizes, (0..8).collect::<Vec<_>>());
    let tries = library::with_retry(|n| if n < 3 { Err(n) } else { Ok(n + 1) }).await;
    while ticks.load(Ordering::Relaxed) < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    ticker.abort();
    std::fs::remove_dir_all(&dir)?;
    println!("loaded {} files, {tries} tries, ticker ran", sizes.len());
    Ok(())
}

//! weir's PostgreSQL pool and Redis client, on two workers: each worker queries the database
//! and the cache through connections opened on itself.
//!
//! ```text
//! cargo run -p weir-datastores -- up          # a private PostgreSQL and Redis; prints their URLs
//! DATABASE_URL=postgres://weir@127.0.0.1:PORT/weir REDIS_URL=redis://127.0.0.1:PORT/ \
//!   cargo run -p weir-postgres --example pool_and_cache
//! ```

use std::time::Duration;

use weir_postgres::tokio_postgres::NoTls;
use weir_postgres::{Manager, Pool};
use weir_redis::redis::AsyncCommands;

#[weir::main(workers = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let db_url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL (see the docs)")?;
    let redis_url = std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL (see the docs)")?;
    let pool: Pool = Pool::builder(Manager::new(db_url.parse()?, NoTls))
        .max_size(4)
        .wait_timeout(Some(Duration::from_secs(2)))
        .build()?;
    let cache = weir_redis::Client::open(redis_url.as_str())?;

    let handle = weir::runtime::Handle::current();
    let mut tasks = Vec::new();
    for worker in 0..handle.num_workers() {
        let (pool, cache) = (pool.clone(), cache.clone());
        tasks.push(handle.spawn_on(worker, async move {
            let client = pool.get().await?;
            let stmt = client
                .prepare_cached("SELECT 'hello from worker ' || $1::int")
                .await?;
            let greeting: String = client.query_one(&stmt, &[&(worker as i32)]).await?.get(0);
            let mut conn = cache.connection();
            let key = format!("greeting:{worker}");
            let () = conn.set_ex(&key, &greeting, 60).await?;
            let cached: String = conn.get(&key).await?;
            println!(
                "worker {worker}: {cached} (database connection opened on worker {:?})",
                client.home_worker()
            );
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    println!("pool: {:?}", pool.stats());
    println!("redis connections opened: {}", cache.connects());
    Ok(())
}

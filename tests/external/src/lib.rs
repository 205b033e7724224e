//! What a user's crate does with weir's clients and the current majors of what they wrap:
//! redis 1.x through weir-redis, tokio-postgres 0.7 through weir-postgres, each named by the
//! user's own dependency (`redis = "1"`, `tokio-postgres = "0.7"`), not the re-export. It has
//! to compile: were the client built on another major than the user's, the user's
//! `AsyncCommands` or `Config` would not fit it.

use redis::AsyncCommands;
use redis::aio::ConnectionLike;

/// Sets and reads a key through weir-redis's connection for this worker, with the user's
/// `redis::AsyncCommands`.
pub async fn greeting(cache: &weir_redis::Client) -> redis::RedisResult<Option<String>> {
    let mut conn = cache.connection();
    let () = conn.set_ex("greeting", "hello", 60).await?;
    conn.get("greeting").await
}

/// weir-redis's connection is a connection of the user's redis.
pub fn as_redis_connection(conn: weir_redis::Connection) -> impl ConnectionLike {
    conn
}

/// A per-worker pool of tokio-postgres clients, built from the user's tokio-postgres `Config`
/// and TLS choice.
pub fn pool(url: &str) -> Result<weir_postgres::Pool, Box<dyn std::error::Error>> {
    let config: tokio_postgres::Config = url.parse()?;
    let manager = weir_postgres::Manager::new(config, tokio_postgres::NoTls);
    Ok(weir_postgres::Pool::builder(manager).max_size(4).build()?)
}

/// A query through the pool, its rows the user's tokio-postgres rows.
pub async fn users(pool: &weir_postgres::Pool) -> Result<i64, Box<dyn std::error::Error>> {
    let client = pool.get().await?;
    let client: &tokio_postgres::Client = &client;
    let row: tokio_postgres::Row = client.query_one("SELECT count(*) FROM users", &[]).await?;
    Ok(row.get(0))
}

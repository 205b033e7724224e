//! A database-and-cache HTTP service: axum 0.8, PostgreSQL through tokio-postgres and a
//! deadpool-postgres pool, Redis through the `redis` crate's multiplexed connection, tower-http's
//! trace and timeout layers, an outbound call through hyper-util's legacy client, and graceful
//! shutdown on ctrl-c and SIGTERM.
//!
//! This is its native form on weir (binary `service_native`): the same service as
//! `apps/service.rs` (the tokio port, binary `service`), with weir's own clients and no tokio
//! runtime (weir-postgres, weir-redis). It differs from the port in the lines that build the pools and connections — the
//! PostgreSQL pool, the Redis client, the HTTP client's connector — their imports, the timeout
//! layer, the main attribute, and the listener: a `ShardedListener` with one accept loop per
//! worker, so that each worker serves the connections it accepted, with the database and cache
//! connections it opened. `tests/service.rs` checks that nothing else differs.
//!
//! Routes:
//! - `GET /health`: `ok`.
//! - `GET /user/{id}`: the user as JSON, from Redis (`x-cache: hit`) or else from PostgreSQL,
//!   then cached (`x-cache: miss`); when Redis fails, from PostgreSQL (`x-cache: bypass`).
//! - `GET /db/{id}`: the user from PostgreSQL.
//! - `POST /user` with `{"name": …, "email": …}`: inserts, answers 201 with the new user.
//! - `GET /sleep/{ms}`: holds a pooled connection for `SELECT pg_sleep(ms / 1000)`.
//! - `GET /upstream`: `GET $UPSTREAM_URL` through hyper-util's client, its body relayed.
//!
//! Errors answer 5xx with a body that says what failed: 503 when the database is unreachable
//! or its pool has no connection free within `POOL_WAIT_MS`, 500 for a failed query, 502 for a
//! failed upstream, 408 when a request outlives `REQUEST_TIMEOUT_MS`. The service stays up and
//! reconnects when a server comes back.
//!
//! ```text
//! cargo run -p weir-datastores -- up      # prints POSTGRES_URL and REDIS_URL
//! DATABASE_URL=postgres://weir@127.0.0.1:PORT/weir REDIS_URL=redis://127.0.0.1:PORT/ \
//!   ADDR=127.0.0.1:3000 cargo run -p weir-tests --bin service
//! curl localhost:3000/user/42
//! ```
//!
//! Environment: `ADDR` (127.0.0.1:3000), `DATABASE_URL`, `REDIS_URL`, `UPSTREAM_URL`,
//! `POOL_SIZE` (8), `POOL_WAIT_MS` (2000), `REQUEST_TIMEOUT_MS` (10000), `CACHE_TTL_S` (300),
//! `POOL_PER_WORKER` (true: PostgreSQL connections kept per worker and one Redis connection per
//! worker; false: one list and one connection for all workers). On exit it prints the
//! runtime's cross-worker wake-ups.
//! The number of runtime threads follows the CPUs the process may use (`taskset`).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tower_http::trace::TraceLayer;
use weir::http::TimeoutLayer;
use weir::http::{HttpConnector, WeirExecutor};
use weir_postgres::{ConnectError, Manager, Pool, PoolError};

// The runtime's signal handling (the one import that differs between the two forms).
use weir::signal as sig;

#[derive(Clone, Debug, Deserialize, Serialize)]
struct User {
    id: i64,
    name: String,
    email: String,
}

#[derive(Debug, Deserialize)]
struct NewUser {
    name: String,
    email: String,
}

/// A failed request: status and a body saying what failed.
#[derive(Debug)]
struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

impl From<PoolError<ConnectError>> for Failure {
    fn from(e: PoolError<ConnectError>) -> Self {
        match e {
            PoolError::Timeout(_) => Failure(
                StatusCode::SERVICE_UNAVAILABLE,
                "database pool exhausted: no connection free in time".into(),
            ),
            e => Failure(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("database unavailable: {e}"),
            ),
        }
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        let status = if e.is_closed() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        Failure(status, format!("database error: {e}"))
    }
}

/// A multiplexed Redis connection per worker, each made on first use and made again after it
/// failed.
struct Cache {
    client: weir_redis::Client,
    ttl: u64,
}

/// Longest wait for Redis before the request goes on without it.
const REDIS_WAIT: Duration = Duration::from_secs(1);

impl Cache {
    async fn get(&self, key: &str) -> redis::RedisResult<Option<String>> {
        self.client.connection().get(key).await
    }

    async fn set(&self, key: &str, value: &str) -> redis::RedisResult<()> {
        self.client.connection().set_ex(key, value, self.ttl).await
    }
}

#[derive(Clone)]
struct AppState {
    pool: Pool,
    cache: Arc<Cache>,
    http: Client<HttpConnector, Empty<Bytes>>,
    upstream: Option<String>,
}

async fn health() -> &'static str {
    "ok"
}

async fn select_user(pool: &Pool, id: i64) -> Result<User, Failure> {
    let client = pool.get().await?;
    let stmt = client
        .prepare_cached("SELECT id, name, email FROM users WHERE id = $1")
        .await?;
    match client.query_opt(&stmt, &[&id]).await? {
        Some(row) => Ok(User {
            id: row.get(0),
            name: row.get(1),
            email: row.get(2),
        }),
        None => Err(Failure(StatusCode::NOT_FOUND, format!("no user {id}"))),
    }
}

fn with_cache_header(body: Response, how: &'static str) -> Response {
    let mut r = body;
    r.headers_mut()
        .insert("x-cache", HeaderValue::from_static(how));
    r
}

async fn user(State(st): State<AppState>, Path(id): Path<i64>) -> Result<Response, Failure> {
    let key = format!("user:{id}");
    let cached = st.cache.get(&key).await;
    if let Ok(Some(json)) = &cached {
        let r = ([("content-type", "application/json")], json.clone()).into_response();
        return Ok(with_cache_header(r, "hit"));
    }
    let user = select_user(&st.pool, id).await?;
    let json = serde_json::to_string(&user).expect("a user serialises");
    let how = match cached {
        Ok(_) if st.cache.set(&key, &json).await.is_ok() => "miss",
        _ => "bypass",
    };
    let r = ([("content-type", "application/json")], json).into_response();
    Ok(with_cache_header(r, how))
}

async fn db(State(st): State<AppState>, Path(id): Path<i64>) -> Result<Json<User>, Failure> {
    Ok(Json(select_user(&st.pool, id).await?))
}

async fn create_user(
    State(st): State<AppState>,
    Json(new): Json<NewUser>,
) -> Result<(StatusCode, Json<User>), Failure> {
    let client = st.pool.get().await?;
    let row = client
        .query_one(
            "INSERT INTO users (name, email) VALUES ($1, $2) RETURNING id",
            &[&new.name, &new.email],
        )
        .await?;
    let user = User {
        id: row.get(0),
        name: new.name,
        email: new.email,
    };
    Ok((StatusCode::CREATED, Json(user)))
}

async fn sleep(State(st): State<AppState>, Path(ms): Path<u32>) -> Result<String, Failure> {
    let client = st.pool.get().await?;
    client
        .execute("SELECT pg_sleep($1)", &[&(f64::from(ms) / 1000.0)])
        .await?;
    Ok(format!("slept {ms} ms"))
}

async fn upstream(State(st): State<AppState>) -> Result<Response, Failure> {
    let bad =
        |e: &dyn std::fmt::Display| Failure(StatusCode::BAD_GATEWAY, format!("upstream: {e}"));
    let Some(url) = st.upstream.as_deref() else {
        return Err(Failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "upstream: UPSTREAM_URL is not set".into(),
        ));
    };
    let uri = url.parse().map_err(|e| bad(&e))?;
    let resp = st.http.get(uri).await.map_err(|e| bad(&e))?;
    let status = resp.status();
    let body = resp.into_body().collect().await.map_err(|e| bad(&e))?;
    Ok((status, body.to_bytes()).into_response())
}

fn env_or<T: FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} does not parse")),
        Err(_) => default,
    }
}

fn app() -> Router {
    let db_url =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://weir@127.0.0.1/weir".into());
    let pg = tokio_postgres::Config::from_str(&db_url).expect("DATABASE_URL");
    let per_worker = env_or("POOL_PER_WORKER", true);
    let pool = Pool::builder(Manager::new(pg, tokio_postgres::NoTls))
        .per_worker(per_worker)
        .max_size(env_or("POOL_SIZE", 8))
        .wait_timeout(Some(Duration::from_millis(env_or("POOL_WAIT_MS", 2000))))
        .connect_timeout(Some(Duration::from_secs(2)))
        .build()
        .expect("database pool");
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
    let redis_config = weir_redis::Config::new()
        .connect_timeout(Some(REDIS_WAIT))
        .response_timeout(Some(REDIS_WAIT));
    let cache = Arc::new(Cache {
        client: if per_worker {
            weir_redis::Client::with_config(redis_url, redis_config)
        } else {
            weir_redis::Client::single(redis_url, redis_config)
        }
        .expect("REDIS_URL"),
        ttl: env_or("CACHE_TTL_S", 300),
    });
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    let http = Client::builder(WeirExecutor).build(connector);
    let state = AppState {
        pool,
        cache,
        http,
        upstream: std::env::var("UPSTREAM_URL").ok(),
    };
    let timeout = Duration::from_millis(env_or("REQUEST_TIMEOUT_MS", 10_000));
    Router::new()
        .route("/health", get(health))
        .route("/user/{id}", get(user))
        .route("/user", post(create_user))
        .route("/db/{id}", get(db))
        .route("/sleep/{ms}", get(sleep))
        .route("/upstream", get(upstream))
        .layer(TraceLayer::new_for_http())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        .with_state(state)
}

/// Resolves on ctrl-c or SIGTERM.
async fn shutdown() {
    let mut term = sig::unix::signal(sig::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = sig::ctrl_c() => println!("ctrl-c: shutting down"),
        _ = term.recv() => println!("SIGTERM: shutting down"),
    }
}

/// Replies leave at once, not after a Nagle delay: what `weir::serve` does for each
/// connection, and what `axum::serve` leaves to the listener (`ListenerExt::tap_io`).
#[allow(dead_code)] // weir::serve sets it itself
fn nodelay(tcp: &mut tokio::net::TcpStream) {
    let _ = tcp.set_nodelay(true);
}

#[weir::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = weir::net::ShardedListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr());
    weir::serve(listener, app())
        .with_graceful_shutdown(shutdown())
        .await?;
    let m = weir::runtime::Handle::current().metrics();
    let cross: u64 = m.workers().iter().map(|w| w.cross_worker_wakes).sum();
    println!("cross-worker wake-ups: {cross}");
    eprintln!("runtime metrics: {:?}", m.workers());
    println!("bye");
    Ok(())
}

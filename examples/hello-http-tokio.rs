//! The hello-http server on tokio's multi-thread runtime, for side-by-side comparison with
//! `examples/hello-http.rs` (`scripts/wrk-compare.sh` runs both).
//!
//! ```text
//! cargo run --release --example hello-http-tokio -- --port 8081 [--workers N]
//! curl http://127.0.0.1:8081/        # Hello, World!
//! ```
//!
//! Arguments as in hello-http: `--addr IP:PORT` (default `127.0.0.1:8080`), `--port N`,
//! `--workers N` (default: one per CPU).
//!
//! The service, the hyper connection settings and the argument parsing are *the same code*:
//! this file includes `hello-http.rs` as a module and uses its `hello`, `http1_builder`,
//! `is_peer_gone` and `parse_args`. Only the runtime lines differ: tokio's runtime and
//! listener, `TokioIo` around the stream, `TokioTimer`.

use std::error::Error;
use std::io;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

#[path = "hello-http.rs"]
#[allow(dead_code)] // its weir `main` and `serve` are not used here
mod weir_hello;

use weir_hello::{hello, http1_builder, is_peer_gone, parse_args};

/// Accepts connections from `listener` forever, serving each on its own task.
async fn serve(listener: TcpListener) -> io::Result<()> {
    let builder = http1_builder(TokioTimer::new());
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of fds or a connection reset before accept: keep serving.
                eprintln!("accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        let conn = builder.serve_connection(TokioIo::new(stream), service_fn(hello));
        tokio::spawn(async move {
            if let Err(e) = conn.await
                && !is_peer_gone(&e)
            {
                eprintln!("connection: {e:?}");
            }
        });
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = args.workers {
        runtime.worker_threads(n);
    }
    let runtime = runtime.build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.addr).await?;
        println!(
            "tokio hello-http listening on http://{}/",
            listener.local_addr()?
        );
        serve(listener).await
    })?;
    Ok(())
}

use axum::{Router, routing::get};

#[weir::main]
async fn main() -> std::io::Result<()> {
    let app = Router::new().route("/", get(|| async { "Hello from weir!\n" }));
    // ADDR=127.0.0.1:0 takes any free port.
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = weir::net::TcpListener::bind(addr.as_str()).await?;
    println!("listening on http://{}", listener.local_addr()?);
    weir::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = weir::signal::ctrl_c().await;
        })
        .await
}

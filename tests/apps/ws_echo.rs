//! A WebSocket echo server with axum's `WebSocketUpgrade`, ported from
//! `apps/tokio/ws_echo.rs` by changing its runtime lines only. The HTTP connection is
//! served on weir; axum hands the upgraded socket to a task it starts with `tokio::spawn`, so
//! the echo loop runs on the tokio compat runtime, over weir's socket.
//!
//! ```text
//! cargo run -p weir-tests --bin ws_echo      # ws://127.0.0.1:3002/ws
//! ```

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;

async fn upgrade(ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(echo)
}

async fn echo(mut socket: WebSocket) {
    while let Some(Ok(message)) = socket.recv().await {
        let reply = match message {
            Message::Text(text) => Message::Text(format!("echo: {text}").into()),
            Message::Binary(bytes) => Message::Binary(bytes),
            Message::Close(_) => break,
            // Pings are answered by axum itself.
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        if socket.send(reply).await.is_err() {
            break;
        }
    }
}

#[weir::main(tokio_compat = true)]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3002".into());
    let listener = weir::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    weir::serve(listener, Router::new().route("/ws", get(upgrade))).await
}

//! The original of `apps/ws_echo.rs`, written for tokio: a WebSocket echo server with
//! axum's `WebSocketUpgrade`. It is compiled with the tests so the comparison stays honest;
//! run it with `cargo run -p weir-tests --bin ws_echo_tokio`.

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

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3002".into());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, Router::new().route("/ws", get(upgrade))).await
}

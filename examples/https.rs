//! "Hello, World!" over HTTPS on weir: HTTP/2 and HTTP/1.1 by ALPN, graceful shutdown, and
//! certificate reload on SIGHUP.
//!
//! ```text
//! cargo run --release --example https [-- --addr 127.0.0.1:8443 --cert CERT.pem --key KEY.pem]
//! curl --cacert /tmp/weir-https-example/ca.pem https://localhost:8443/            # HTTP/2
//! curl --http1.1 --cacert /tmp/weir-https-example/ca.pem https://localhost:8443/  # HTTP/1.1
//! ```
//!
//! Arguments: `--addr IP:PORT` (default `127.0.0.1:8443`), `--workers N`, `--cert` and `--key`
//! (a PEM certificate chain and its key). Without `--cert` and `--key` it makes a private CA
//! and a certificate for `localhost` and `127.0.0.1` signed by it, and writes the CA's
//! certificate where `--ca-out PATH` says (default `weir-https-example/ca.pem` in the
//! temporary directory) for clients to trust.
//!
//! It is `examples/hello-http.rs` behind a `weir::tls::TlsListener`: each handshake runs on a
//! task of its own, at most 10 s and at most 1024 at once; the answer names the HTTP version
//! and the TLS version. SIGHUP reads `--cert` and `--key` again and serves the new
//! certificate to every later handshake. SIGINT (ctrl-c) or SIGTERM stops accepting, lets the
//! requests in flight finish (every connection ends with a TLS `close_notify`), and exits with
//! status 0. `RUST_LOG`-style logs are not set up here; failed handshakes are counted, and the
//! counts printed at exit.

use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::routing::get;
use weir::net::TcpListener;
use weir::signal::unix::{SignalKind, signal};
use weir::tls::{TlsConfig, TlsConnectInfo, TlsListener, TlsStats};

/// `GET /`: names the protocols the request came over.
pub(crate) async fn hello(ConnectInfo(tls): ConnectInfo<TlsConnectInfo>, req: Request) -> String {
    format!(
        "Hello, World! ({:?} over {})\n",
        req.version(),
        tls.protocol_version()
            .map_or_else(|| "TLS".to_owned(), |v| format!("{v:?}"))
    )
}

/// The application.
pub(crate) fn app() -> Router {
    Router::new().route("/", get(hello))
}

/// Serves [`app`] over TLS on `listener` with `config` until `shutdown` completes, then
/// finishes the requests in flight. Returns the listener's handshake counters.
pub(crate) async fn serve(
    listener: TcpListener,
    config: TlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<TlsStats> {
    let listener = TlsListener::new(listener, config);
    let stats = listener.stats();
    weir::serve(
        listener,
        app().into_make_service_with_connect_info::<TlsConnectInfo>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    Ok(stats)
}

/// A private CA and a certificate for `localhost` and `127.0.0.1` signed by it: the CA's
/// certificate (PEM), and the server's chain and key (PEM).
pub(crate) fn make_certificate() -> Result<(String, String, String), rcgen::Error> {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "weir https example CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate()?)?;
    let key = rcgen::KeyPair::generate()?;
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
        .signed_by(&key, &ca)?;
    Ok((ca.pem(), leaf.pem(), key.serialize_pem()))
}

/// Command-line arguments.
#[derive(Debug)]
struct Args {
    addr: SocketAddr,
    workers: Option<usize>,
    cert_and_key: Option<(PathBuf, PathBuf)>,
    ca_out: PathBuf,
}

/// Parses the arguments; exits with a usage line on anything else.
fn parse_args() -> Args {
    fn usage(problem: &str) -> ! {
        eprintln!(
            "{problem}\nusage: [--addr IP:PORT] [--workers N] [--cert CERT.pem --key KEY.pem | --ca-out PATH]"
        );
        std::process::exit(2)
    }
    fn value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> T {
        let Some(value) = value else {
            usage(&format!("{flag} needs a value"))
        };
        value
            .parse()
            .unwrap_or_else(|_| usage(&format!("bad value for {flag}: {value}")))
    }
    let mut addr = SocketAddr::from(([127, 0, 0, 1], 8443));
    let (mut workers, mut cert, mut key) = (None, None, None);
    let mut ca_out = std::env::temp_dir()
        .join("weir-https-example")
        .join("ca.pem");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--addr" => addr = value(&flag, args.next()),
            "--workers" => match value(&flag, args.next()) {
                0 => usage("--workers must be at least 1"),
                n => workers = Some(n),
            },
            "--cert" => cert = Some(value::<PathBuf>(&flag, args.next())),
            "--key" => key = Some(value::<PathBuf>(&flag, args.next())),
            "--ca-out" => ca_out = value(&flag, args.next()),
            _ => usage(&format!("unknown argument {flag}")),
        }
    }
    let cert_and_key = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => usage("--cert and --key go together"),
    };
    Args {
        addr,
        workers,
        cert_and_key,
        ca_out,
    }
}

/// Completes at the first SIGINT or SIGTERM.
async fn shutdown_signal() -> io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let interrupt = pin!(weir::signal::ctrl_c());
    let terminate = pin!(terminate.recv());
    futures::future::select(interrupt, terminate).await;
    Ok(())
}

/// Reloads the certificate from `cert` and `key` at every SIGHUP.
async fn reload_on_sighup(config: TlsConfig, cert: PathBuf, key: PathBuf) -> io::Result<()> {
    let mut hangups = signal(SignalKind::hangup())?;
    while hangups.recv().await.is_some() {
        match config.reload_from_pem_files(&cert, &key).await {
            Ok(()) => println!("SIGHUP: serving the certificate in {}", cert.display()),
            Err(e) => eprintln!("SIGHUP: keeping the certificate in use: {e}"),
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args();
    let mut runtime = weir::runtime::Builder::new_multi_thread();
    if let Some(n) = args.workers {
        runtime.workers(n);
    }
    let runtime = runtime.build()?;
    runtime.block_on(async {
        let config = match &args.cert_and_key {
            Some((cert, key)) => {
                let config = TlsConfig::from_pem_files(cert, key).await?;
                weir::spawn(reload_on_sighup(config.clone(), cert.clone(), key.clone()));
                config
            }
            None => {
                let (ca, chain, key) = make_certificate()?;
                if let Some(dir) = args.ca_out.parent() {
                    weir::fs::create_dir_all(dir).await?;
                }
                weir::fs::write(&args.ca_out, ca).await?;
                println!(
                    "a certificate for localhost made; its CA is in {}",
                    args.ca_out.display()
                );
                TlsConfig::from_pem(chain.as_bytes(), key.as_bytes())?
            }
        };
        let listener = TcpListener::bind(args.addr).await?;
        println!(
            "weir https listening on https://{}/",
            listener.local_addr()?
        );
        let stats = serve(listener, config, async {
            if let Err(e) = shutdown_signal().await {
                eprintln!("cannot listen for SIGINT and SIGTERM ({e}); serving until killed");
                std::future::pending::<()>().await;
            }
            println!("shutting down: finishing the requests in flight");
        })
        .await?;
        println!("handshakes: {stats:?}");
        println!("bye");
        Ok::<(), Box<dyn Error>>(())
    })?;
    Ok(())
}

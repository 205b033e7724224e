//! gRPC with tonic on weir and no tokio runtime: a tonic server through `weir_grpc::serve`,
//! a tonic client over `weir_grpc::connect`, a unary call and a server-streaming call, the
//! peer's address in the handler, graceful shutdown with a call in flight, and a connection
//! reset mid-stream after which the channel connects again.
//!
//! The service is written out as tonic's code generator would write it from
//!
//! ```text
//! service Echo {
//!   rpc Say (EchoRequest) returns (EchoReply);
//!   rpc Count (EchoRequest) returns (stream EchoReply);
//! }
//! ```
//!
//! (no `protoc` needed to build the tests). Every wait is bounded; nothing asserts a timing.

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use futures_core::Stream;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::{Grpc, NamedService, ServerStreamingService, UnaryService};
use tonic::service::Routes;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;
use weir::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, PartialEq, prost::Message)]
struct EchoRequest {
    #[prost(string, tag = "1")]
    message: String,
    /// `Count`: how many replies; `Say`: ignored.
    #[prost(uint32, tag = "2")]
    count: u32,
    /// `Count`: wait for the test's signal before each reply after the first.
    #[prost(bool, tag = "3")]
    paced: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct EchoReply {
    #[prost(string, tag = "1")]
    message: String,
    #[prost(uint32, tag = "2")]
    index: u32,
    /// The caller's address as the server saw it (`Request::remote_addr`).
    #[prost(string, tag = "3")]
    peer: String,
}

type ReplyStream = Pin<Box<dyn Stream<Item = Result<EchoReply, Status>> + Send>>;
type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The service's state: a gate that paced streams wait on.
#[derive(Clone, Default)]
struct Echo {
    gate: Arc<tokio::sync::Notify>,
}

fn no_tokio_runtime() -> Result<(), Status> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => Err(Status::internal("a tokio runtime is running this handler")),
        Err(_) => Ok(()),
    }
}

impl Echo {
    async fn say(&self, req: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        no_tokio_runtime()?;
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
        let m = req.into_inner().message;
        Ok(Response::new(EchoReply {
            message: format!("you said {m}"),
            index: 0,
            peer,
        }))
    }

    async fn count(&self, req: Request<EchoRequest>) -> Result<Response<ReplyStream>, Status> {
        no_tokio_runtime()?;
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
        let r = req.into_inner();
        let gate = self.gate.clone();
        let replies = futures::stream::unfold(0, move |i| {
            let (gate, message, peer) = (gate.clone(), r.message.clone(), peer.clone());
            async move {
                if i == r.count {
                    return None;
                }
                if r.paced && i > 0 {
                    gate.notified().await;
                }
                let reply = EchoReply {
                    message,
                    index: i,
                    peer,
                };
                Some((Ok(reply), i + 1))
            }
        });
        Ok(Response::new(Box::pin(replies) as ReplyStream))
    }
}

// What tonic's code generator emits for the server: a tower service routing by path.

impl NamedService for Echo {
    const NAME: &'static str = "weir.test.Echo";
}

impl tower::Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFut<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        struct Say(Echo);
        impl UnaryService<EchoRequest> for Say {
            type Response = EchoReply;
            type Future = BoxFut<Result<Response<EchoReply>, Status>>;
            fn call(&mut self, req: Request<EchoRequest>) -> Self::Future {
                let echo = self.0.clone();
                Box::pin(async move { echo.say(req).await })
            }
        }
        struct Count(Echo);
        impl ServerStreamingService<EchoRequest> for Count {
            type Response = EchoReply;
            type ResponseStream = ReplyStream;
            type Future = BoxFut<Result<Response<ReplyStream>, Status>>;
            fn call(&mut self, req: Request<EchoRequest>) -> Self::Future {
                let echo = self.0.clone();
                Box::pin(async move { echo.count(req).await })
            }
        }
        let echo = self.clone();
        match req.uri().path() {
            "/weir.test.Echo/Say" => Box::pin(async move {
                let mut grpc = Grpc::new(ProstCodec::<EchoReply, EchoRequest>::default());
                Ok(grpc.unary(Say(echo), req).await)
            }),
            "/weir.test.Echo/Count" => Box::pin(async move {
                let mut grpc = Grpc::new(ProstCodec::<EchoReply, EchoRequest>::default());
                Ok(grpc.server_streaming(Count(echo), req).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

// What it emits for the client.

struct EchoClient {
    grpc: tonic::client::Grpc<Channel>,
}

impl EchoClient {
    fn new(channel: Channel) -> EchoClient {
        EchoClient {
            grpc: tonic::client::Grpc::new(channel),
        }
    }

    async fn say(&mut self, message: &str) -> Result<EchoReply, Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let req = Request::new(EchoRequest {
            message: message.into(),
            count: 0,
            paced: false,
        });
        let path = http::uri::PathAndQuery::from_static("/weir.test.Echo/Say");
        let codec = ProstCodec::<EchoRequest, EchoReply>::default();
        Ok(self.grpc.unary(req, path, codec).await?.into_inner())
    }

    async fn count(
        &mut self,
        message: &str,
        count: u32,
        paced: bool,
    ) -> Result<Streaming<EchoReply>, Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let req = Request::new(EchoRequest {
            message: message.into(),
            count,
            paced,
        });
        let path = http::uri::PathAndQuery::from_static("/weir.test.Echo/Count");
        let codec = ProstCodec::<EchoRequest, EchoReply>::default();
        Ok(self
            .grpc
            .server_streaming(req, path, codec)
            .await?
            .into_inner())
    }
}

fn runtime() -> weir::runtime::Runtime {
    // No tokio_compat: nothing of tokio's runtime exists in these tests.
    weir::runtime::Builder::new_multi_thread()
        .workers(2)
        .build()
        .unwrap()
}

/// Starts the server on `addr` (port 0: any); returns its address, the shutdown trigger and
/// the serve task.
async fn start(
    addr: SocketAddr,
    echo: Echo,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    weir::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = weir::spawn(
        weir_grpc::serve(listener, Routes::new(echo))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    (addr, stop, server)
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}")).unwrap()
}

#[test]
fn unary_and_streaming_calls_on_weir_alone() {
    runtime().block_on(async {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let (addr, stop, server) = start("127.0.0.1:0".parse().unwrap(), Echo::default()).await;
        let channel = weir_grpc::connect(endpoint(addr)).await.unwrap();
        let mut client = EchoClient::new(channel.clone());

        let reply = client.say("hello").await.unwrap();
        assert_eq!(reply.message, "you said hello");
        let peer: SocketAddr = reply
            .peer
            .parse()
            .expect("the server saw the peer's address");
        assert!(
            peer.ip().is_loopback() && peer.port() != addr.port(),
            "{peer}"
        );

        let replies: Vec<EchoReply> = client
            .count("tick", 100, false)
            .await
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
            .await;
        assert_eq!(replies.len(), 100);
        for (i, r) in replies.iter().enumerate() {
            assert_eq!((r.index as usize, r.message.as_str()), (i, "tick"));
        }

        // Many calls at once over the one HTTP/2 connection.
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let mut c = EchoClient::new(channel.clone());
                weir::spawn(async move { c.say(&format!("n{i}")).await.unwrap().message })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.unwrap(), format!("you said n{i}"));
        }

        let _ = stop.send(());
        weir::time::timeout(LIMIT, server)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    });
}

#[test]
fn graceful_shutdown_lets_a_stream_in_flight_finish() {
    runtime().block_on(async {
        let echo = Echo::default();
        let (addr, stop, server) = start("127.0.0.1:0".parse().unwrap(), echo.clone()).await;
        let mut client = EchoClient::new(weir_grpc::connect(endpoint(addr)).await.unwrap());
        let mut stream = client.count("slow", 3, true).await.unwrap();
        assert_eq!(stream.message().await.unwrap().unwrap().index, 0);
        // Shut down with the stream half sent: it still completes.
        let _ = stop.send(());
        for i in 1..3 {
            echo.gate.notify_one();
            let r = weir::time::timeout(LIMIT, stream.message())
                .await
                .unwrap()
                .unwrap()
                .expect("the stream goes on during shutdown");
            assert_eq!(r.index, i);
        }
        assert!(
            stream.message().await.unwrap().is_none(),
            "the stream ended"
        );
        weir::time::timeout(LIMIT, server)
            .await
            .expect("the server stops once the stream ended")
            .unwrap()
            .unwrap();
        // And the listener is gone.
        assert!(std::net::TcpStream::connect(addr).is_err());
    });
}

/// A TCP proxy on its own threads whose connections can be reset (RST) at once.
struct Proxy {
    addr: SocketAddr,
    conns: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Proxy {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let kept = conns.clone();
        std::thread::spawn(move || {
            for client in l.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = std::net::TcpStream::connect(upstream) else {
                    continue;
                };
                kept.lock().unwrap().push(client.try_clone().unwrap());
                let pipe = |mut from: std::net::TcpStream, mut to: std::net::TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    })
                };
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy { addr, conns }
    }

    /// Resets every connection made so far: the client side gets an RST.
    fn reset(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            socket2::SockRef::from(&c)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            // Unblocks the copying threads, whose copies close the socket: with a zero linger
            // time, the last close sends an RST.
            let _ = c.shutdown(std::net::Shutdown::Read);
        }
    }
}

/// `true` for the statuses of a call that a connection's end failed: a transport error
/// (Unavailable, or Unknown/Internal for an h2 error on the connection), or a call still queued
/// on the connection when it closed, which hyper cancels ("connection closed") and tonic
/// reports as Cancelled with the transport error as its source.
fn ended_by_the_connection(status: &Status) -> bool {
    use std::error::Error;
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal => true,
        tonic::Code::Cancelled => status
            .source()
            .is_some_and(|e| e.is::<tonic::transport::Error>()),
        _ => false,
    }
}

#[test]
fn a_peer_reset_mid_stream_is_an_error_and_the_channel_reconnects() {
    runtime().block_on(async {
        let echo = Echo::default();
        let (addr, stop, server) = start("127.0.0.1:0".parse().unwrap(), echo.clone()).await;
        let proxy = Proxy::start(addr);
        let channel = weir_grpc::connect_lazy(endpoint(proxy.addr));
        let mut client = EchoClient::new(channel.clone());
        // A stream the server never ends by itself: the proxy's reset reaches the server
        // through the proxy's threads, so a short stream could finish first under load.
        let mut stream = client.count("doomed", u32::MAX, true).await.unwrap();
        assert_eq!(stream.message().await.unwrap().unwrap().index, 0);
        proxy.reset();
        let err = weir::time::timeout(LIMIT, async {
            loop {
                echo.gate.notify_one();
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("the stream ended cleanly after a reset"),
                    Err(status) => break status,
                }
            }
        })
        .await
        .expect("the client learns of the reset");
        assert!(ended_by_the_connection(&err), "{err:?}");
        // The channel connects again on a later call.
        let reply = weir::time::timeout(LIMIT, async {
            loop {
                match client.say("again").await {
                    Ok(r) => break r,
                    // A call may still meet the reset connection before the channel has seen
                    // it end.
                    Err(s) if ended_by_the_connection(&s) => {
                        weir::time::sleep(Duration::from_millis(10)).await
                    }
                    Err(s) => panic!("{s:?}"),
                }
            }
        })
        .await
        .expect("the channel reconnects");
        assert_eq!(reply.message, "you said again");
        let _ = stop.send(());
        weir::time::timeout(LIMIT, server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
}

#[test]
fn an_unknown_method_is_unimplemented() {
    runtime().block_on(async {
        let (addr, stop, server) = start("127.0.0.1:0".parse().unwrap(), Echo::default()).await;
        let channel = weir_grpc::connect(endpoint(addr)).await.unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/weir.test.Echo/Nope");
        let codec = ProstCodec::<EchoRequest, EchoReply>::default();
        let err = grpc
            .unary(Request::new(EchoRequest::default()), path, codec)
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unimplemented);
        let _ = stop.send(());
        weir::time::timeout(LIMIT, server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
}

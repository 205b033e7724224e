//! Tracing: the runtime emits spans and events under `weir::task`, `weir::worker`,
//! `weir::sched` and `weir::net`, with the fields the crate docs promise.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Subscriber;
use tracing::{Event, Metadata};

/// Records `target: name` of every span and event.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<BTreeSet<String>>>);

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let m = attrs.metadata();
        self.0
            .lock()
            .unwrap()
            .insert(format!("{}: {}", m.target(), m.name()));
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        struct Msg(String);
        impl tracing::field::Visit for Msg {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut msg = Msg(String::new());
        event.record(&mut msg);
        self.0
            .lock()
            .unwrap()
            .insert(format!("{}: {}", event.metadata().target(), msg.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn runtime_emits_task_worker_and_reactor_traces() {
    let rec = Recorder::default();
    let seen = rec.0.clone();
    // A current-thread runtime runs on this thread, where the scoped subscriber applies.
    tracing::subscriber::with_default(rec, || {
        let rt = weir::runtime::Builder::new_current_thread()
            .min_wait(Duration::from_micros(200))
            .build()
            .unwrap();
        rt.block_on(async {
            // The event reaches the task only through the worker's epoll, so the worker parks
            // in a blocking wait for it, whenever the write happens.
            let (r, w) = common::pipe();
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let writer = std::thread::spawn(move || {
                rx.recv().unwrap();
                common::write_fd(&w, b"x").unwrap();
                w
            });
            weir::spawn(async move {
                let afd = weir::io::unix::AsyncFd::new(r).unwrap();
                tx.send(()).unwrap();
                let _ = afd.readable().await.unwrap();
            })
            .await
            .unwrap();
            drop(writer.join().unwrap());
        });
    });
    let seen = seen.lock().unwrap();
    for expected in [
        "weir::task: spawn",
        "weir::task: poll",
        "weir::task: complete",
        "weir::sched: park",
        "weir::sched: unpark",
        "weir::worker: runtime started",
        "weir::worker: worker started",
        "weir::sched: reactor park",
        "weir::sched: reactor unpark",
        "weir::sched: wait",
    ] {
        assert!(seen.contains(expected), "missing {expected:?} in {seen:#?}");
    }
}

/// One event: target, level, and every field (the message as `message`) formatted with `Debug`
/// (strings unquoted).
#[derive(Clone, Debug)]
struct Captured {
    target: String,
    level: tracing::Level,
    fields: std::collections::BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Records every event with its fields.
#[derive(Clone, Default)]
struct FieldRecorder(Arc<Mutex<Vec<Captured>>>);

impl FieldRecorder {
    fn events(&self, target: &str, message: &str) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.target == target && e.field("message") == Some(message))
            .cloned()
            .collect()
    }
}

impl Subscriber for FieldRecorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        struct Fields(std::collections::BTreeMap<String, String>);
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                self.0.insert(f.name().to_owned(), v.to_owned());
            }
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.insert(f.name().to_owned(), format!("{v:?}"));
            }
        }
        let mut fields = Fields(Default::default());
        event.record(&mut fields);
        let m = event.metadata();
        self.0.lock().unwrap().push(Captured {
            target: m.target().to_owned(),
            level: *m.level(),
            fields: fields.0,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn task_panic_is_an_error_event_with_message_location_and_id() {
    let rec = FieldRecorder::default();
    let (ids, line) = tracing::subscriber::with_default(rec.clone(), || {
        let rt = weir::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let line = line!() + 1;
            let with_message = weir::spawn(async { panic!("the {} went {}", "task", "boom") });
            let with_str = weir::spawn(async { panic!("static boom") });
            let with_any = weir::spawn(async { std::panic::panic_any(42u32) });
            let mut ids = Vec::new();
            for h in [with_message, with_str, with_any] {
                let id = h.id();
                assert!(h.await.unwrap_err().is_panic());
                ids.push(id);
            }
            (ids, line)
        })
    });
    let events = rec.events("weir::task", "task panicked");
    assert_eq!(events.len(), 3, "{events:#?}");
    let expected = ["the task went boom", "static boom", "Box<dyn Any>"];
    for ((e, id), (i, message)) in events.iter().zip(&ids).zip(expected.iter().enumerate()) {
        assert_eq!(e.level, tracing::Level::ERROR);
        assert_eq!(e.field("panic"), Some(*message), "{e:#?}");
        assert_eq!(e.field("task_id"), Some(id.as_u64().to_string().as_str()));
        let at = e.field("spawned_at").expect("spawned_at");
        let want = format!("{}:{}:", file!(), line + i as u32);
        assert!(at.starts_with(&want), "spawned_at {at:?}, expected {want}…");
    }
}

#[test]
fn tcp_accept_connect_and_close_are_debug_events_with_addresses_and_reason() {
    let rec = FieldRecorder::default();
    let (server_addr, client_addr) = tracing::subscriber::with_default(rec.clone(), || {
        let rt = weir::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            use futures::AsyncReadExt;
            let listener = weir::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let server_addr = listener.local_addr().unwrap();
            let client = weir::net::TcpStream::connect(server_addr).await.unwrap();
            let client_addr = client.local_addr().unwrap();
            let (mut server, peer) = listener.accept().await.unwrap();
            assert_eq!(peer, client_addr);
            // The client closes first; the server reads end of stream, then closes.
            drop(client);
            let mut buf = [0u8; 8];
            assert_eq!(server.read(&mut buf).await.unwrap(), 0);
            drop(server);
            (server_addr, client_addr)
        })
    });
    let accepted = rec.events("weir::net", "accepted");
    assert_eq!(accepted.len(), 1, "{accepted:#?}");
    let a = &accepted[0];
    assert_eq!(a.level, tracing::Level::DEBUG);
    assert_eq!(a.field("peer"), Some(client_addr.to_string().as_str()));
    assert_eq!(
        a.field("local"),
        Some(format!("Some({server_addr})").as_str())
    );

    let connected = rec.events("weir::net", "connected");
    assert_eq!(connected.len(), 1, "{connected:#?}");
    assert_eq!(
        connected[0].field("peer"),
        Some(server_addr.to_string().as_str())
    );

    let closed = rec.events("weir::net", "closed");
    assert_eq!(closed.len(), 2, "{closed:#?}");
    let (client_close, server_close) = (&closed[0], &closed[1]);
    assert_eq!(client_close.level, tracing::Level::DEBUG);
    assert_eq!(
        client_close.field("local"),
        Some(format!("Some({client_addr})").as_str())
    );
    assert_eq!(
        client_close.field("tcp_state"),
        Some("ESTABLISHED"),
        "{client_close:#?}"
    );
    assert_eq!(
        client_close.field("reason"),
        Some("closed locally while open")
    );
    assert_eq!(
        server_close.field("peer"),
        Some(format!("Some({client_addr})").as_str())
    );
    assert_eq!(
        server_close.field("tcp_state"),
        Some("CLOSE_WAIT"),
        "{server_close:#?}"
    );
    assert_eq!(server_close.field("reason"), Some("peer closed first"));
}

#[test]
fn unix_accept_is_a_debug_event() {
    let dir = std::env::temp_dir().join(format!("weir-trace-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let rec = FieldRecorder::default();
    tracing::subscriber::with_default(rec.clone(), || {
        let rt = weir::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = weir::net::UnixListener::bind(&path).unwrap();
            let _client = weir::net::UnixStream::connect(&path).await.unwrap();
            let _server = listener.accept().await.unwrap();
        });
    });
    let _ = std::fs::remove_dir_all(&dir);
    let accepted = rec.events("weir::net", "accepted");
    assert_eq!(accepted.len(), 1, "{accepted:#?}");
    assert_eq!(accepted[0].level, tracing::Level::DEBUG);
    let local = accepted[0].field("local").unwrap();
    assert!(local.contains("sock"), "{local}");
}

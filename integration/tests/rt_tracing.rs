//! Tracing: the runtime emits spans and events under `weir::task`, `weir::worker` and
//! `weir::reactor`.

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
        "weir::worker: park",
        "weir::worker: unpark",
        "weir::worker: worker started",
        "weir::reactor: park",
        "weir::reactor: wait",
    ] {
        assert!(seen.contains(expected), "missing {expected:?} in {seen:#?}");
    }
}

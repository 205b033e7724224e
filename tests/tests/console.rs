//! tokio-console's view of a weir program: the probe (`tests/console-probe`) runs with
//! weir's `console` feature and the real console-subscriber, and this test reads its gRPC API
//! with console-api's client, the one tokio-console uses. It asserts what the console would
//! show: the tasks with their names, ids, kinds, spawn locations, polls, wakes and busy time;
//! the timers as resources, polled by tasks; the self-wake and lost-waker conditions, by the
//! console's own rules.
//!
//! console-subscriber refuses to start unless it is compiled with `--cfg tokio_unstable` or
//! `--cfg console_without_tokio_unstable`, which only `RUSTFLAGS` can set. So the probe is built
//! apart, by a nested `cargo build` with `RUSTFLAGS=--cfg console_without_tokio_unstable` into
//! `target/console` (the workspace's own builds keep their flags and their cache). The first
//! build compiles the probe's dependencies (a few minutes on two cores), later ones only what
//! changed. If that build cannot run at all (no `cargo`, dependencies that cannot be fetched),
//! the test prints why and skips; a compile error fails it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use console_api::field::{Name, Value};
use console_api::instrument::InstrumentRequest;
use console_api::instrument::instrument_client::InstrumentClient;
use console_api::resources::resource::kind::{Kind as ResourceKind, Known};

/// The probe's tasks that announce their weir task id (`task <name> <id>`).
const NAMED: [&str; 8] = [
    "probe:ticker",
    "probe:self-wake",
    "probe:lost-waker",
    "probe:long-poll",
    "probe:timeout",
    "probe:spawner",
    "probe:local",
    "probe:blocking",
];

/// The probe's long poll (`LONG_POLL` in its source).
const LONG_POLL: Duration = Duration::from_millis(200);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Builds the probe; `Err` (a reason to skip) when the build could not be attempted.
fn build_probe() -> Result<PathBuf, String> {
    let root = workspace_root();
    let target = root.join("target").join("console");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(&root)
        .args([
            "build",
            "--locked",
            "-p",
            "weir-console-probe",
            "--features",
            "weir/console",
        ])
        .env("RUSTFLAGS", "--cfg console_without_tokio_unstable")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_TARGET_DIR", &target)
        // Debug info is not needed here and is half of the build time.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("could not compile"),
            "the console probe does not compile:\n{stderr}"
        );
        return Err(format!("cargo build failed:\n{stderr}"));
    }
    Ok(target.join("debug").join("weir-console-probe"))
}

/// A task as the console lists it.
#[derive(Debug, Default)]
struct Task {
    name: String,
    kind: String,
    task_id: Option<u64>,
    worker: String,
    file: String,
    stats: Option<console_api::tasks::Stats>,
}

#[derive(Debug, Default)]
struct Timer {
    file: String,
    polled_by: Vec<u64>,
    duration_ms: Option<u64>,
}

/// Everything received so far, folded as the console folds it.
#[derive(Debug, Default)]
struct View {
    tasks: HashMap<u64, Task>,
    timers: HashMap<u64, Timer>,
}

fn field_str(v: &Value) -> String {
    match v {
        Value::DebugVal(s) | Value::StrVal(s) => s.clone(),
        Value::U64Val(n) => n.to_string(),
        Value::I64Val(n) => n.to_string(),
        Value::BoolVal(b) => b.to_string(),
    }
}

impl View {
    fn apply(&mut self, update: console_api::instrument::Update) {
        if let Some(tu) = update.task_update {
            for t in tu.new_tasks {
                let id = t.id.map(|i| i.id).unwrap_or_default();
                let mut task = Task {
                    file: t
                        .location
                        .as_ref()
                        .and_then(|l| l.file.clone())
                        .unwrap_or_default(),
                    ..Task::default()
                };
                for f in &t.fields {
                    let (Some(Name::StrName(name)), Some(value)) = (&f.name, &f.value) else {
                        continue;
                    };
                    match name.as_str() {
                        "task.name" => task.name = field_str(value),
                        "kind" => task.kind = field_str(value),
                        "task.id" => task.task_id = field_str(value).parse().ok(),
                        "task.worker" => task.worker = field_str(value),
                        _ => {}
                    }
                }
                self.tasks.insert(id, task);
            }
            for (id, stats) in tu.stats_update {
                self.tasks.entry(id).or_default().stats = Some(stats);
            }
        }
        if let Some(ru) = update.resource_update {
            for r in ru.new_resources {
                let is_timer = matches!(
                    r.kind.as_ref().and_then(|k| k.kind.as_ref()),
                    Some(ResourceKind::Known(k)) if *k == Known::Timer as i32
                );
                if is_timer && r.concrete_type == "Sleep" {
                    let id = r.id.map(|i| i.id).unwrap_or_default();
                    let file = r.location.and_then(|l| l.file).unwrap_or_default();
                    self.timers.entry(id).or_default().file = file;
                }
            }
            for (id, stats) in ru.stats_update {
                let Some(timer) = self.timers.get_mut(&id) else {
                    continue;
                };
                for a in stats.attributes {
                    if let Some(f) = a.field
                        && matches!(&f.name, Some(Name::StrName(n)) if n == "duration")
                        && let Some(Value::U64Val(ms)) = f.value
                    {
                        timer.duration_ms = Some(ms);
                    }
                }
            }
            for op in ru.new_poll_ops {
                let (Some(res), Some(task)) = (op.resource_id, op.task_id) else {
                    continue;
                };
                if let Some(timer) = self.timers.get_mut(&res.id) {
                    timer.polled_by.push(task.id);
                }
            }
        }
    }

    fn named(&self, name: &str) -> Option<&Task> {
        self.tasks.values().find(|t| t.name == name)
    }

    fn stats(&self, name: &str) -> Option<&console_api::tasks::Stats> {
        self.named(name)?.stats.as_ref()
    }

    fn polls(&self, name: &str) -> u64 {
        self.stats(name)
            .and_then(|s| s.poll_stats.as_ref())
            .map_or(0, |p| p.polls)
    }

    /// tokio-console's self-wake warning: more than half of the task's wakes were self-wakes.
    fn self_wake_warning(&self, name: &str) -> bool {
        self.stats(name)
            .is_some_and(|s| s.wakes > 0 && s.self_wakes * 2 > s.wakes)
    }

    /// tokio-console's lost-waker warning: a live task, not running and not woken, of which no
    /// waker exists (as many drops as clones).
    fn lost_waker_warning(&self, name: &str) -> bool {
        self.stats(name).is_some_and(|s| {
            let p = s.poll_stats.as_ref();
            let idle = p.is_some_and(|p| {
                p.polls > 0
                    && match (&p.last_poll_started, &p.last_poll_ended) {
                        (Some(a), Some(b)) => (b.seconds, b.nanos) >= (a.seconds, a.nanos),
                        _ => false,
                    }
            });
            let woken_since = match (&s.last_wake, p.and_then(|p| p.last_poll_started.as_ref())) {
                (Some(w), Some(started)) => (w.seconds, w.nanos) > (started.seconds, started.nanos),
                _ => false,
            };
            s.dropped_at.is_none() && idle && !woken_since && s.waker_clones == s.waker_drops
        })
    }

    fn busy(&self, name: &str) -> Duration {
        let n = self
            .stats(name)
            .and_then(|s| s.poll_stats.as_ref())
            .and_then(|p| p.busy_time.as_ref())
            .map_or(0, |d| d.seconds as u128 * 1_000_000_000 + d.nanos as u128);
        Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// Timers created in the probe's source and polled by one of its tasks.
    fn probe_timers(&self) -> usize {
        self.timers
            .values()
            .filter(|t| t.file.ends_with("console-probe/src/main.rs") && !t.polled_by.is_empty())
            .count()
    }

    /// Everything the test expects to see.
    fn complete(&self) -> bool {
        NAMED.iter().all(|n| self.named(n).is_some())
            && self.polls("probe:ticker") >= 3
            && self.self_wake_warning("probe:self-wake")
            && self.lost_waker_warning("probe:lost-waker")
            && self.busy("probe:long-poll") >= LONG_POLL
            && self.probe_timers() >= 5
    }
}

/// Kills the probe if the test fails.
struct Probe(Child);

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn console_lists_tasks_timers_and_warnings() {
    let probe = match build_probe() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: the console probe could not be built: {why}");
            return;
        }
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Probe(
        Command::new(&probe)
            .env("WEIR_CONSOLE_PORT", port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the probe"),
    );
    // The probe's announcements (`task <name> <id>`, then `ready`), read on a thread of their
    // own while the view is built.
    let stdout = child.0.stdout.take().expect("piped");
    let announced = std::thread::spawn(move || {
        let mut ids = HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("probe output");
            if line == "ready" {
                return Some(ids);
            }
            let mut words = line.split_whitespace();
            if let (Some("task"), Some(name), Some(id)) = (words.next(), words.next(), words.next())
            {
                ids.insert(name.to_owned(), id.parse::<u64>().expect("a task id"));
            }
        }
        None
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let view = rt.block_on(async {
        let addr = format!("http://127.0.0.1:{port}");
        // The console server starts on its own thread: wait until it accepts.
        let mut client = loop {
            match InstrumentClient::connect(addr.clone()).await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let mut updates = client
            .watch_updates(InstrumentRequest {})
            .await
            .expect("watch_updates")
            .into_inner();
        let mut view = View::default();
        // The first update is sent when the subscription is registered. console-subscriber
        // forwards a timer's polls only to the clients subscribed when they happen, so the
        // probe starts its tasks only now.
        let first = updates
            .message()
            .await
            .expect("an update")
            .expect("a first update");
        view.apply(first);
        {
            use std::io::Write;
            let stdin = child.0.stdin.as_mut().expect("piped");
            stdin
                .write_all(b"go\n")
                .and_then(|()| stdin.flush())
                .expect("start the probe");
        }
        // A guard against a hang only: the test ends as soon as the view is complete.
        let watch = async {
            while let Some(update) = updates.message().await.expect("an update") {
                view.apply(update);
                if view.complete() {
                    break;
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(120), watch)
            .await
            .is_err()
        {
            panic!("the console's view never became complete: {view:#?}");
        }
        view
    });
    let ids = announced
        .join()
        .expect("the reader thread")
        .expect("the probe printed `ready`");
    assert_eq!(
        ids.len(),
        NAMED.len(),
        "the probe's tasks did not all start: {ids:?}"
    );

    // What the console's task list would show (`--nocapture` prints it).
    for t in view.tasks.values() {
        let s = t.stats.unwrap_or_default();
        let p = s.poll_stats.unwrap_or_default();
        println!(
            "{:<18} kind={:<8} id={:<4} worker={:<3} polls={:<4} wakes={:<4} self_wakes={:<4} \
             waker_clones={} waker_drops={} at {}",
            t.name,
            t.kind,
            t.task_id.map_or("-".into(), |i| i.to_string()),
            t.worker,
            p.polls,
            s.wakes,
            s.self_wakes,
            s.waker_clones,
            s.waker_drops,
            t.file
        );
    }
    println!("timers: {}", view.timers.len());

    for name in NAMED {
        let task = view.named(name).unwrap();
        assert_eq!(
            task.task_id,
            Some(ids[name]),
            "{name}: task.id is weir's task id"
        );
        assert!(
            task.file.ends_with("console-probe/src/main.rs"),
            "{name}: spawn location {:?}",
            task.file
        );
        assert!(view.polls(name) >= 1, "{name} was polled");
    }
    assert_eq!(view.named("probe:ticker").unwrap().kind, "task");
    assert_eq!(view.named("probe:ticker").unwrap().worker, "any");
    assert_eq!(view.named("probe:local").unwrap().kind, "local");
    let local_worker = &view.named("probe:local").unwrap().worker;
    assert!(
        local_worker == "0" || local_worker == "1",
        "a local task names its worker: {local_worker:?}"
    );
    assert_eq!(view.named("probe:blocking").unwrap().kind, "blocking");
    assert!(
        view.tasks.values().any(|t| t.kind == "block_on"),
        "the main future is listed"
    );
    let ticker = view.stats("probe:ticker").unwrap();
    assert!(
        ticker.wakes >= 2,
        "the ticker's wakes are counted: {ticker:?}"
    );
    assert!(view.self_wake_warning("probe:self-wake"));
    assert!(!view.self_wake_warning("probe:ticker"));
    assert!(view.lost_waker_warning("probe:lost-waker"));
    assert!(!view.lost_waker_warning("probe:self-wake"));
    assert!(view.busy("probe:long-poll") >= LONG_POLL);
    assert!(view.probe_timers() >= 5, "timers: {:#?}", view.timers);
    assert!(
        view.timers.values().any(|t| t.duration_ms.is_some()),
        "timers report their duration"
    );
    let ticker_id = view
        .tasks
        .iter()
        .find(|(_, t)| t.name == "probe:ticker")
        .map(|(id, _)| *id)
        .unwrap();
    assert!(
        view.timers
            .values()
            .any(|t| t.polled_by.contains(&ticker_id)),
        "the ticker's interval is polled by the ticker"
    );

    // Closing its standard input ends the probe.
    drop(child.0.stdin.take());
    let status = child.0.wait().expect("probe exit");
    assert!(status.success(), "the probe exited with {status}");
}

//! A private Prometheus server on loopback that scrapes given targets, for the tests of
//! weir's Prometheus export.
//!
//! [`Prometheus::start`] writes a configuration that scrapes each target's `/metrics` every
//! scrape interval, starts Debian's `prometheus` with its own port on 127.0.0.1 and its own
//! data directory in a fresh temporary directory, and returns once the server is ready.
//! [`Prometheus::query`] asks its HTTP query API. The server is stopped, and the directory
//! removed, on drop. Without the binary, starting returns [`Error::Skip`].

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{
    COUNTER, Error, die_with_parent, failed, find_in_path, free_port, stop_child, wait_until,
};

/// A Prometheus server of our own.
#[derive(Debug)]
pub struct Prometheus {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Prometheus {
    /// Starts `prometheus` scraping `targets` (`/metrics`, plain HTTP) every `interval`.
    pub fn start(targets: &[SocketAddr], interval: Duration) -> Result<Prometheus, Error> {
        let bin = find_in_path("prometheus")
            .or_else(|| Some(PathBuf::from("/usr/bin/prometheus")).filter(|p| p.is_file()))
            .ok_or_else(|| {
                Error::Skip("prometheus not found (apt-get install -y prometheus)".into())
            })?;
        let dir = std::env::temp_dir().join(format!(
            "weir-prometheus-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data"))?;
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let interval = format!("{}ms", interval.as_millis().max(1));
        std::fs::write(
            dir.join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n\
                 scrape_configs:\n  - job_name: weir\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )?;
        let port = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(
            dir.join("prometheus.log"),
        )?));
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("start prometheus: {e}")))?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let ready = wait_until(&mut child, "prometheus", || {
            get(addr, "/-/ready").is_ok_and(|(status, _)| status == 200)
        });
        let server = Prometheus {
            dir,
            port,
            child: Some(child),
        };
        ready.map_err(|e| failed(format!("{e}; its log:\n{}", server.log())))?;
        Ok(server)
    }

    /// Its HTTP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log so far (warnings and errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Evaluates the PromQL expression `expr` now (`/api/v1/query`); the JSON answer as text.
    pub fn query(&self, expr: &str) -> Result<String, Error> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let (status, body) = get(addr, &format!("/api/v1/query?query={}", encode(expr)))?;
        if status != 200 {
            return Err(failed(format!("query {expr:?}: status {status}: {body}")));
        }
        Ok(body)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = stop_child(&mut child, libc::SIGTERM);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One HTTP/1.0 GET on loopback: the status and the body.
fn get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP response: {response:?}")))?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    Ok((status, body))
}

//! The napi-lab testbed of `scripts/napi-lab.sh`, for the `napi-lab` case of `pingpong`.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;

/// The script, relative to the repository root.
const SCRIPT: &str = "scripts/napi-lab.sh";

/// The napi-lab testbed (two namespaces joined by a multi-queue veth), torn down on drop.
pub(super) struct Lab {
    script: PathBuf,
    prefix: String,
    pub(super) srv_ns: String,
    cli_ns: String,
    pub(super) server_ip: [u8; 4],
}

impl Lab {
    /// Finds the script and brings the lab up. [`Error::Unavailable`] when the script is
    /// missing or says a capability or a tool is missing (its exit status 2);
    /// [`Error::Os`] when it cannot be run, [`Error::Run`] when it fails otherwise.
    pub(super) fn up() -> Result<Lab, Error> {
        // The repository's own testbed script; it exits with status 2 (and says why) when a
        // capability or a tool is missing.
        let script = script()?;
        let prefix = format!("wb{}", std::process::id());
        let out = Command::new("bash")
            .arg(&script)
            .args(["up", &prefix, "2"])
            .output()
            .map_err(|e| Error::os(format!("running {}", script.display()), e))?;
        if !out.status.success() {
            let why = format!(
                "scripts/napi-lab.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return Err(if out.status.code() == Some(2) {
                Error::unavailable(why)
            } else {
                Error::run(why)
            });
        }
        Ok(Lab {
            srv_ns: format!("{prefix}-srv"),
            cli_ns: format!("{prefix}-cli"),
            script,
            prefix,
            server_ip: [198, 18, 0, 1],
        })
    }

    /// Runs `f` on a thread that has joined the client namespace.
    pub(super) fn in_client<R: Send>(
        &self,
        f: impl FnOnce() -> io::Result<R> + Send,
    ) -> io::Result<R> {
        let path = format!("/var/run/netns/{}", self.cli_ns);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path)?;
                use std::os::fd::AsRawFd;
                // SAFETY: `ns` is an open namespace fd for the duration of the call; setns only
                // changes this thread's network namespace.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                f()
            })
            .join()
            .map_err(|_| io::Error::other("client thread panicked"))?
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["down", &self.prefix])
            .output();
    }
}

/// Finds the repository's `scripts/napi-lab.sh`: in the repository this binary was built from
/// (`bench/..`), else in the nearest directory above the binary that holds it (a binary
/// copied out of `target/` next to a checkout). [`Error::Unavailable`] names the places
/// searched.
fn script() -> Result<PathBuf, Error> {
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let exe = std::env::current_exe().ok();
    let candidates = std::iter::once(built_from.as_path())
        .chain(exe.iter().flat_map(|e| e.ancestors().skip(1)))
        .map(|root| root.join(SCRIPT));
    for path in candidates {
        if path.is_file() {
            return Ok(path);
        }
    }
    Err(Error::unavailable(format!(
        "{SCRIPT} not found in {} nor in any directory above {}",
        built_from.display(),
        exe.as_deref()
            .map_or_else(|| "the binary".into(), |e| e.display().to_string())
    )))
}

//! Asynchronous filesystem access: the functions of [`std::fs`], a [`File`] with the async I/O
//! traits, [`OpenOptions`] and [`read_dir`].
//!
//! ```no_run
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     weir::fs::create_dir_all("/tmp/weir-demo").await?;
//!     weir::fs::write("/tmp/weir-demo/hello.txt", b"hello").await?;
//!
//!     let mut file = weir::fs::File::options()
//!         .append(true)
//!         .open("/tmp/weir-demo/hello.txt")
//!         .await?;
//!     file.write_all(b", world").await?;
//!     file.flush().await?; // the write runs in the background until flushed
//!
//!     let mut text = String::new();
//!     weir::fs::File::open("/tmp/weir-demo/hello.txt").await?.read_to_string(&mut text).await?;
//!     assert_eq!(text, "hello, world");
//!
//!     let mut entries = weir::fs::read_dir("/tmp/weir-demo").await?;
//!     while let Some(entry) = entries.next_entry().await? {
//!         println!("{}", entry.path().display());
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # How it works
//! Linux has no readiness notification for regular files (epoll refuses them), so, like
//! tokio, every operation runs the standard library's blocking call on the runtime's
//! [blocking pool](crate::task::spawn_blocking) and awaits its result. Each call costs a hand-off
//! to a pool thread and back; batch work into few calls (`read` or `write` a whole file at once,
//! or wrap several steps in one `spawn_blocking` of your own) when that matters.
//!
//! A [`File`] keeps one operation in flight at a time. Reads fetch up to the caller's buffer
//! size (at most 2 MiB) and hand out what is left over on the next read; writes are copied
//! into the file's buffer and written in the background, so `poll_write` returns before the
//! data reaches the file: `flush` (or `sync_all`, or `sync_data`) waits for it and reports
//! its error.
//!
//! # Panics
//! Every function and method that touches the filesystem panics outside a weir runtime,
//! because it needs the runtime's blocking pool (call it from a task, inside
//! `Runtime::block_on`, or after `Runtime::enter`).
//!
//! # Cancel safety
//! Dropping one of these futures does not stop the blocking call it started: that call runs
//! to completion on the pool and its result is dropped (a file being written is still written,
//! a directory being removed is still removed).

mod file;
mod open_options;
mod read_dir;

use std::fs::{Metadata, Permissions};
use std::io;
use std::path::{Path, PathBuf};

pub use file::File;
pub use open_options::OpenOptions;
pub use read_dir::{DirEntry, ReadDir, read_dir};

/// Runs the blocking `f` on the blocking pool and returns its result. If the pool drops it
/// unrun (the runtime shut down) or it panics, the error is tokio's: `Other`, with the message
/// "background task failed".
pub(crate) async fn asyncify<F, T>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match weir_executor::spawn_blocking(f).await {
        Ok(r) => r,
        Err(_) => Err(background_failed()),
    }
}

/// The error of an operation whose blocking call never ran or panicked (tokio's).
pub(crate) fn background_failed() -> io::Error {
    io::Error::other("background task failed")
}

/// Reads the whole file at `path` ([`std::fs::read`]).
///
/// # Errors
/// `NotFound` when there is no file at `path`, `PermissionDenied`, `IsADirectory`, or another
/// error of `open(2)`/`read(2)`; an error if the runtime shuts down before the call ran.
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read(path)).await
}

/// Reads the whole file at `path` as UTF-8 ([`std::fs::read_to_string`]).
///
/// # Errors
/// As [`read`], and `InvalidData` when the content is not UTF-8.
pub async fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read_to_string(path)).await
}

/// Writes `contents` to the file at `path`, creating it or replacing what it held
/// ([`std::fs::write`]). The bytes are copied first, so `contents` may be borrowed.
///
/// # Errors
/// `NotFound` when the parent directory does not exist, `PermissionDenied`, or another error
/// of `open(2)`/`write(2)`.
pub async fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    let contents = contents.as_ref().to_owned();
    asyncify(move || std::fs::write(path, contents)).await
}

/// Creates the directory `path` ([`std::fs::create_dir`]).
///
/// # Errors
/// `AlreadyExists` when something exists at `path`, `NotFound` when its parent does not.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::create_dir(path)).await
}

/// Creates the directory `path` and every missing parent ([`std::fs::create_dir_all`]).
/// Succeeds when the directory already exists.
///
/// # Errors
/// When a component exists and is not a directory, or the OS error of `mkdir(2)`.
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::create_dir_all(path)).await
}

/// Removes the file (or symbolic link) at `path` ([`std::fs::remove_file`]).
///
/// # Errors
/// `NotFound` when nothing exists at `path`, `IsADirectory` for a directory.
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_file(path)).await
}

/// Removes the empty directory `path` ([`std::fs::remove_dir`]).
///
/// # Errors
/// `NotFound`, `DirectoryNotEmpty`, `NotADirectory`, or another error of `rmdir(2)`.
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_dir(path)).await
}

/// Removes the directory `path` with everything in it ([`std::fs::remove_dir_all`]; symbolic
/// links inside are removed, not followed).
///
/// # Errors
/// `NotFound` when `path` does not exist, or the first error met while removing.
pub async fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_dir_all(path)).await
}

/// Renames `from` to `to`, replacing `to` if it exists ([`std::fs::rename`]).
///
/// # Errors
/// `NotFound` when `from` does not exist, `CrossesDevices` across filesystems, or another
/// error of `rename(2)`.
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let (from, to) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    asyncify(move || std::fs::rename(from, to)).await
}

/// Copies the contents and permissions of the file `from` to `to`, replacing `to`; returns
/// the number of bytes copied ([`std::fs::copy`]).
///
/// # Errors
/// `NotFound` when `from` does not exist, or another error of opening, reading or writing.
pub async fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    let (from, to) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    asyncify(move || std::fs::copy(from, to)).await
}

/// Creates a hard link `link` to the file `original` ([`std::fs::hard_link`]).
///
/// # Errors
/// `NotFound` when `original` does not exist, `AlreadyExists` when `link` does.
pub async fn hard_link(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let (original, link) = (original.as_ref().to_owned(), link.as_ref().to_owned());
    asyncify(move || std::fs::hard_link(original, link)).await
}

/// Creates a symbolic link `link` pointing at `original`
/// ([`std::os::unix::fs::symlink`]); `original` need not exist.
///
/// # Errors
/// `AlreadyExists` when `link` exists, or another error of `symlink(2)`.
pub async fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let (original, link) = (original.as_ref().to_owned(), link.as_ref().to_owned());
    asyncify(move || std::os::unix::fs::symlink(original, link)).await
}

/// The target of the symbolic link `path` ([`std::fs::read_link`]).
///
/// # Errors
/// `NotFound`, or `InvalidInput` when `path` is not a symbolic link.
pub async fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read_link(path)).await
}

/// The metadata of `path`, following symbolic links ([`std::fs::metadata`]).
///
/// # Errors
/// `NotFound` when nothing exists at `path` (or a link's target is missing).
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::metadata(path)).await
}

/// The metadata of `path` itself, not following a final symbolic link
/// ([`std::fs::symlink_metadata`]).
///
/// # Errors
/// `NotFound` when nothing exists at `path`.
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::symlink_metadata(path)).await
}

/// The absolute form of `path`, with every symbolic link resolved and `.`/`..` removed
/// ([`std::fs::canonicalize`]).
///
/// # Errors
/// `NotFound` when `path` (or a component) does not exist.
pub async fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::canonicalize(path)).await
}

/// Whether something exists at `path`, following symbolic links
/// ([`std::fs::exists`]): `Ok(false)` when it does not, an error when that cannot be told.
///
/// # Errors
/// `PermissionDenied` when a directory on the way cannot be searched, or another error of
/// `stat(2)` other than `ENOENT`.
pub async fn try_exists(path: impl AsRef<Path>) -> io::Result<bool> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::exists(path)).await
}

/// Sets the permissions of `path` ([`std::fs::set_permissions`]).
///
/// # Errors
/// `NotFound`, or `PermissionDenied` when the caller does not own the file.
pub async fn set_permissions(path: impl AsRef<Path>, perm: Permissions) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::set_permissions(path, perm)).await
}

//! [`read_dir`]: the entries of a directory, fetched in batches on the blocking pool.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::fs::{FileType, Metadata};
use std::future::poll_fn;
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use weir_executor::JoinHandle;

use super::asyncify;

/// Entries read per trip to the blocking pool.
const BATCH: usize = 32;

/// Opens the directory `path` for listing its entries ([`std::fs::read_dir`]).
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let mut entries = weir::fs::read_dir("/etc").await?;
/// while let Some(entry) = entries.next_entry().await? {
///     println!("{:?}", entry.file_name());
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// `NotFound` when `path` does not exist, `NotADirectory`, `PermissionDenied`.
///
/// # Panics
/// Outside a weir runtime (the calls run on its blocking pool).
pub async fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    let path = path.as_ref().to_owned();
    let dir = asyncify(move || std::fs::read_dir(path)).await?;
    Ok(ReadDir {
        state: State::Idle(Batch {
            entries: VecDeque::new(),
            dir: Some(dir),
        }),
    })
}

/// The entries of a directory, from [`read_dir`]: call [`next_entry`](Self::next_entry) until
/// it returns `Ok(None)`. `.` and `..` are not listed; the order is the file system's.
///
/// Entries are fetched on the blocking pool up to 32 at a time, so most calls return without
/// a trip there.
pub struct ReadDir {
    state: State,
}

enum State {
    /// Nothing in flight; `entries` are fetched and not yet handed out.
    Idle(Batch),
    /// The blocking pool is fetching the next batch.
    Busy(JoinHandle<Batch>),
}

/// Fetched entries and the directory they come from (`None` once the listing ended).
struct Batch {
    entries: VecDeque<io::Result<DirEntry>>,
    dir: Option<std::fs::ReadDir>,
}

impl Batch {
    /// Reads up to `BATCH` more entries (blocking).
    fn fill(mut self) -> Batch {
        if let Some(dir) = &mut self.dir {
            for _ in 0..BATCH {
                match dir.next() {
                    Some(entry) => self.entries.push_back(entry.map(DirEntry::new)),
                    None => {
                        self.dir = None;
                        break;
                    }
                }
            }
        }
        self
    }
}

impl ReadDir {
    /// The next entry; `Ok(None)` once every entry was returned.
    ///
    /// # Cancel safety
    /// Cancel safe: an entry being fetched when the future is dropped is returned by the next
    /// call.
    ///
    /// # Errors
    /// An error of `readdir(3)` for this entry (listing may go on after it), or an error if
    /// the runtime shut down before the fetch ran.
    pub async fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        poll_fn(|cx| self.poll_next_entry(cx)).await
    }

    /// Polls for the next entry; `Ready(Ok(None))` once every entry was returned. Only the
    /// last task to poll is woken.
    ///
    /// # Errors
    /// As [`next_entry`](Self::next_entry).
    pub fn poll_next_entry(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<DirEntry>>> {
        loop {
            match &mut self.state {
                State::Idle(batch) => {
                    if let Some(entry) = batch.entries.pop_front() {
                        return Poll::Ready(entry.map(Some));
                    }
                    if batch.dir.is_none() {
                        return Poll::Ready(Ok(None));
                    }
                    let batch = std::mem::replace(
                        batch,
                        Batch {
                            entries: VecDeque::new(),
                            dir: None,
                        },
                    );
                    self.state = State::Busy(weir_executor::spawn_blocking(|| batch.fill()));
                }
                State::Busy(handle) => {
                    let batch = ready!(Pin::new(handle).poll(cx));
                    // A failed fetch (the runtime shut down) ends the listing.
                    let (batch, result) = match batch {
                        Ok(batch) => (batch, Ok(())),
                        Err(_) => (
                            Batch {
                                entries: VecDeque::new(),
                                dir: None,
                            },
                            Err(super::background_failed()),
                        ),
                    };
                    self.state = State::Idle(batch);
                    result?;
                }
            }
        }
    }
}

impl fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let busy = matches!(self.state, State::Busy(_));
        f.debug_struct("ReadDir").field("fetching", &busy).finish()
    }
}

/// An entry of a directory listed by [`ReadDir`].
///
/// The name, path, inode number and (on almost every file system) the file type were read
/// with the listing, so asking for them costs nothing; [`metadata`](Self::metadata) makes
/// a trip to the blocking pool.
pub struct DirEntry {
    path: PathBuf,
    name: OsString,
    ino: u64,
    /// `None` when reading it with the listing failed; asked again on demand.
    file_type: Option<FileType>,
}

impl DirEntry {
    fn new(entry: std::fs::DirEntry) -> DirEntry {
        DirEntry {
            path: entry.path(),
            name: entry.file_name(),
            ino: entry.ino(),
            // Free where the file system reports types in the listing (`d_type`); otherwise
            // an `lstat`, done here on the blocking pool.
            file_type: entry.file_type().ok(),
        }
    }

    /// The full path: the directory given to [`read_dir`] joined with the file name.
    pub fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The file name, without the directory.
    pub fn file_name(&self) -> OsString {
        self.name.clone()
    }

    /// The inode number, as listed.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The type of the entry, not following a symbolic link.
    ///
    /// # Errors
    /// When the type was not part of the listing and `lstat(2)` fails (e.g. the entry was
    /// removed since).
    ///
    /// # Panics
    /// Outside a weir runtime, when the type must be read from the file system.
    pub async fn file_type(&self) -> io::Result<FileType> {
        match self.file_type {
            Some(t) => Ok(t),
            None => Ok(self.metadata().await?.file_type()),
        }
    }

    /// The metadata of the entry, not following a symbolic link (as
    /// [`symlink_metadata`](super::symlink_metadata)).
    ///
    /// # Errors
    /// `NotFound` when the entry was removed since it was listed, or another error of
    /// `lstat(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let path = self.path.clone();
        asyncify(move || std::fs::symlink_metadata(path)).await
    }
}

impl fmt::Debug for DirEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DirEntry").field(&self.path).finish()
    }
}

//! [`OpenOptions`]: how to open a [`File`].

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{File, asyncify};

/// Options for opening a [`File`]: the standard library's [`std::fs::OpenOptions`], with an
/// asynchronous [`open`](Self::open). Every setter returns `&mut Self` for chaining.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let log = weir::fs::OpenOptions::new()
///     .append(true)
///     .create(true)
///     .open("/tmp/app.log")
///     .await?;
/// # drop(log);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

impl OpenOptions {
    /// Options with everything off; turn on at least one of `read`, `write` or `append`.
    pub fn new() -> OpenOptions {
        OpenOptions(std::fs::OpenOptions::new())
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.0.read(read);
        self
    }

    /// Open for writing (at the start, overwriting, unless `append` or `truncate`).
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.0.write(write);
        self
    }

    /// Open for appending: every write goes to the end of the file (`O_APPEND`).
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.0.append(append);
        self
    }

    /// Truncate the file to length 0 when opening it (needs `write`).
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.0.truncate(truncate);
        self
    }

    /// Create the file if it does not exist (needs `write` or `append`).
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.0.create(create);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (`O_EXCL`); `create` and
    /// `truncate` are then ignored.
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.0.create_new(create_new);
        self
    }

    /// The permission bits of a file this call creates (default `0o666`, less the umask).
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        self.0.mode(mode);
        self
    }

    /// Extra `open(2)` flags (e.g. `libc::O_NOFOLLOW`); the access mode bits are ignored.
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        self.0.custom_flags(flags);
        self
    }

    /// Opens the file at `path` with these options.
    ///
    /// # Errors
    /// `NotFound` when the file does not exist and `create` is off, `AlreadyExists` with
    /// `create_new`, `PermissionDenied`, `InvalidInput` for an invalid combination (e.g.
    /// `create` without `write`), or another error of `open(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime (the call runs on its blocking pool).
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let (options, path) = (self.0.clone(), path.as_ref().to_owned());
        let std = asyncify(move || options.open(path)).await?;
        Ok(File::from_std(std))
    }
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    fn from(options: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions(options)
    }
}

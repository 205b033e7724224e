//! `weir::fs`: every function on a temporary directory, its not-found errors, `File` reads,
//! writes and seeks through both I/O trait families, `OpenOptions` and `read_dir` — on every
//! runtime flavour and backend.

mod common;

use std::collections::BTreeSet;
use std::io::{ErrorKind, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use weir::fs::{self, File, OpenOptions};

/// A fresh directory under the system temp dir, removed with its contents on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("weir-fs-{}-{tag}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `len` bytes that differ by position, so misplaced bytes are caught.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn assert_not_found<T: std::fmt::Debug>(r: std::io::Result<T>, what: &str) {
    match r {
        Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{what}: {e}"),
        Ok(v) => panic!("{what}: expected NotFound, got {v:?}"),
    }
}

rt_test! {
    fn whole_file_read_write(rt) {
        let dir = TempDir::new("whole");
        rt.block_on(async {
            let path = dir.path("a.txt");
            fs::write(&path, "hello").await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), b"hello");
            assert_eq!(fs::read_to_string(&path).await.unwrap(), "hello");
            // Replaces the content.
            fs::write(&path, vec![0xff, 0xfe]).await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), [0xff, 0xfe]);
            let e = fs::read_to_string(&path).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData);
            // Larger than one blocking-pool transfer of a File.
            let big = pattern(3 * 1024 * 1024 + 17);
            fs::write(&path, &big).await.unwrap();
            assert!(fs::read(&path).await.unwrap() == big);
        });
    }
}

rt_test! {
    fn directories_create_list_remove(rt) {
        let dir = TempDir::new("dirs");
        rt.block_on(async {
            let d = dir.path("d");
            fs::create_dir(&d).await.unwrap();
            assert_eq!(fs::create_dir(&d).await.unwrap_err().kind(), ErrorKind::AlreadyExists);
            let nested = dir.path("x/y/z");
            assert_not_found(fs::create_dir(&nested).await, "create_dir without parent");
            fs::create_dir_all(&nested).await.unwrap();
            fs::create_dir_all(&nested).await.unwrap(); // already there: fine
            assert!(fs::metadata(&nested).await.unwrap().is_dir());

            fs::write(d.join("f"), b"x").await.unwrap();
            let e = fs::remove_dir(&d).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DirectoryNotEmpty);
            fs::remove_file(d.join("f")).await.unwrap();
            fs::remove_dir(&d).await.unwrap();
            assert!(!fs::try_exists(&d).await.unwrap());

            fs::write(nested.join("deep"), b"x").await.unwrap();
            fs::remove_dir_all(dir.path("x")).await.unwrap();
            assert!(!fs::try_exists(dir.path("x")).await.unwrap());
        });
    }
}

rt_test! {
    fn read_dir_lists_every_entry(rt) {
        let dir = TempDir::new("readdir");
        rt.block_on(async {
            // More entries than one fetch from the blocking pool.
            let mut want = BTreeSet::new();
            for i in 0..100 {
                let name = format!("file-{i:03}");
                fs::write(dir.path(&name), b"").await.unwrap();
                want.insert(name);
            }
            fs::create_dir(dir.path("sub")).await.unwrap();
            fs::symlink("file-000", dir.path("link")).await.unwrap();
            want.insert("sub".to_owned());
            want.insert("link".to_owned());

            let mut entries = fs::read_dir(&dir.0).await.unwrap();
            let mut seen = BTreeSet::new();
            while let Some(entry) = entries.next_entry().await.unwrap() {
                let name = entry.file_name().into_string().unwrap();
                assert_eq!(entry.path(), dir.path(&name));
                let file_type = entry.file_type().await.unwrap();
                let meta = entry.metadata().await.unwrap();
                assert_eq!(meta.file_type(), file_type);
                assert_eq!(std::os::unix::fs::MetadataExt::ino(&meta), entry.ino());
                match name.as_str() {
                    "sub" => assert!(file_type.is_dir()),
                    "link" => assert!(file_type.is_symlink(), "not followed"),
                    _ => assert!(file_type.is_file()),
                }
                assert!(seen.insert(name), "listed twice");
            }
            assert_eq!(seen, want);
            // The end is sticky.
            assert!(entries.next_entry().await.unwrap().is_none());
            assert!(format!("{entries:?}").contains("ReadDir"));
        });
    }
}

rt_test! {
    fn links_metadata_permissions_canonicalize(rt) {
        let dir = TempDir::new("links");
        rt.block_on(async {
            let target = dir.path("target");
            fs::write(&target, b"12345").await.unwrap();

            let hard = dir.path("hard");
            fs::hard_link(&target, &hard).await.unwrap();
            assert_eq!(fs::read(&hard).await.unwrap(), b"12345");
            assert_eq!(std::os::unix::fs::MetadataExt::nlink(&fs::metadata(&target).await.unwrap()), 2);
            let e = fs::hard_link(&target, &hard).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);

            let soft = dir.path("soft");
            fs::symlink(&target, &soft).await.unwrap();
            assert_eq!(fs::read_link(&soft).await.unwrap(), target);
            let e = fs::read_link(&target).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "not a link");
            assert_eq!(fs::metadata(&soft).await.unwrap().len(), 5, "followed");
            assert!(fs::symlink_metadata(&soft).await.unwrap().file_type().is_symlink());

            let canonical = fs::canonicalize(dir.0.join(".").join("soft")).await.unwrap();
            assert_eq!(canonical, std::fs::canonicalize(&target).unwrap());

            fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).await.unwrap();
            let mode = fs::metadata(&target).await.unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);

            // A dangling link exists as a link but not as a file.
            let dangling = dir.path("dangling");
            fs::symlink(dir.path("nowhere"), &dangling).await.unwrap();
            assert!(!fs::try_exists(&dangling).await.unwrap());
            assert!(fs::symlink_metadata(&dangling).await.is_ok());
        });
    }
}

rt_test! {
    fn rename_copy_and_exists(rt) {
        let dir = TempDir::new("rename");
        rt.block_on(async {
            let a = dir.path("a");
            let b = dir.path("b");
            let c = dir.path("c");
            fs::write(&a, b"contents").await.unwrap();
            assert!(fs::try_exists(&a).await.unwrap());
            fs::rename(&a, &b).await.unwrap();
            assert!(!fs::try_exists(&a).await.unwrap());
            assert_eq!(fs::copy(&b, &c).await.unwrap(), 8);
            assert_eq!(fs::read(&c).await.unwrap(), b"contents");
            // rename replaces an existing target.
            fs::write(&a, b"new").await.unwrap();
            fs::rename(&a, &c).await.unwrap();
            assert_eq!(fs::read(&c).await.unwrap(), b"new");
        });
    }
}

rt_test! {
    fn missing_paths_are_not_found(rt) {
        let dir = TempDir::new("missing");
        let gone = dir.path("gone");
        let other = dir.path("other");
        rt.block_on(async {
            assert_not_found(fs::read(&gone).await, "read");
            assert_not_found(fs::read_to_string(&gone).await, "read_to_string");
            assert_not_found(fs::write(gone.join("child"), b"x").await, "write under a missing dir");
            assert_not_found(fs::remove_file(&gone).await, "remove_file");
            assert_not_found(fs::remove_dir(&gone).await, "remove_dir");
            assert_not_found(fs::remove_dir_all(&gone).await, "remove_dir_all");
            assert_not_found(fs::rename(&gone, &other).await, "rename");
            assert_not_found(fs::copy(&gone, &other).await, "copy");
            assert_not_found(fs::hard_link(&gone, &other).await, "hard_link");
            assert_not_found(fs::read_link(&gone).await, "read_link");
            assert_not_found(fs::metadata(&gone).await, "metadata");
            assert_not_found(fs::symlink_metadata(&gone).await, "symlink_metadata");
            assert_not_found(fs::canonicalize(&gone).await, "canonicalize");
            assert_not_found(fs::read_dir(&gone).await, "read_dir");
            assert_not_found(
                fs::set_permissions(&gone, std::fs::Permissions::from_mode(0o600)).await,
                "set_permissions",
            );
            assert_not_found(File::open(&gone).await, "File::open");
            assert_not_found(File::create(gone.join("child")).await, "File::create");
            assert!(!fs::try_exists(&gone).await.unwrap());
        });
    }
}

/// Reads, writes and seeks through futures-io's traits, including the read-ahead a `File`
/// keeps between a read and a following seek or write.
async fn futures_round_trip(path: &Path) {
    use futures::FutureExt;
    use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let data = pattern(5 * 1024 * 1024 + 3);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .await
        .unwrap();
    file.write_all(&data).await.unwrap();
    file.flush().await.unwrap();
    assert_eq!(file.metadata().await.unwrap().len(), data.len() as u64);

    assert_eq!(file.seek(SeekFrom::Start(0)).await.unwrap(), 0);
    let mut back = Vec::new();
    file.read_to_end(&mut back).await.unwrap();
    assert!(back == data, "read back what was written");

    // A read that is abandoned after its first poll keeps fetching on the pool; what it
    // fetched is handed out by the next reads ("read ahead").
    file.seek(SeekFrom::Start(100)).await.unwrap();
    let mut large = vec![0u8; 4096];
    let taken = match file.read(&mut large).now_or_never() {
        Some(n) => n.unwrap(), // the pool was quicker than the first poll
        None => 0,
    };
    let at = 100 + taken;
    let mut small = [0u8; 10];
    file.read_exact(&mut small).await.unwrap();
    assert_eq!(&small[..], &data[at..at + 10]);
    // A relative seek counts from what the caller has read, not from what was fetched.
    assert_eq!(
        file.seek(SeekFrom::Current(5)).await.unwrap(),
        (at + 15) as u64
    );
    let taken = match file.read(&mut large).now_or_never() {
        Some(n) => n.unwrap(),
        None => 0,
    };
    let at = at + 15 + taken;
    file.read_exact(&mut small).await.unwrap();
    assert_eq!(&small[..], &data[at..at + 10]);
    // A write after read-ahead lands right after the bytes the caller has read.
    file.write_all(b"XYZ").await.unwrap();
    file.flush().await.unwrap();
    assert_eq!(
        file.seek(SeekFrom::Current(0)).await.unwrap(),
        (at + 13) as u64
    );
    file.seek(SeekFrom::Start(at as u64 + 5)).await.unwrap();
    file.read_exact(&mut small).await.unwrap();
    assert_eq!(&small[..5], &data[at + 5..at + 10]);
    assert_eq!(&small[5..8], b"XYZ");
    assert_eq!(&small[8..], &data[at + 13..at + 15]);

    // From the end; negative positions are an error.
    assert_eq!(
        file.seek(SeekFrom::End(-1)).await.unwrap(),
        data.len() as u64 - 1
    );
    let e = file
        .seek(SeekFrom::Current(-(data.len() as i64) - 10))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);

    // End of file.
    file.seek(SeekFrom::End(0)).await.unwrap();
    assert_eq!(file.read(&mut small).await.unwrap(), 0);

    // set_len, sync, and the std file at the caller's position.
    file.set_len(1000).await.unwrap();
    assert_eq!(file.metadata().await.unwrap().len(), 1000);
    file.sync_all().await.unwrap();
    file.sync_data().await.unwrap();
    file.seek(SeekFrom::Start(10)).await.unwrap();
    file.read_exact(&mut small).await.unwrap();
    let mut medium = [0u8; 100];
    let _ = file.read(&mut medium).now_or_never(); // may read ahead beyond 20
    let mut std_file = file.into_std().await;
    let pos = std::io::Seek::stream_position(&mut std_file).unwrap() as usize;
    assert!(
        (20..=120).contains(&pos),
        "at 20 unless the abandoned read completed"
    );
    let mut file = File::from_std(std_file);
    file.read_exact(&mut small[..5]).await.unwrap();
    assert_eq!(&small[..5], &data[pos..pos + 5]);
    file.close().await.unwrap();
}

rt_test! {
    fn file_round_trip_futures_io(rt) {
        let dir = TempDir::new("file-futures");
        rt.block_on(futures_round_trip(&dir.path("f.bin")));
    }
}

rt_test! {
    fn file_round_trip_tokio_io(rt) {
        use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
        let dir = TempDir::new("file-tokio");
        let path = dir.path("t.bin");
        rt.block_on(async {
            let data = pattern(3 * 1024 * 1024 + 5);
            let mut file = File::create(&path).await.unwrap();
            file.write_all(&data).await.unwrap();
            file.shutdown().await.unwrap(); // flushes
            drop(file);
            let mut file = File::options().read(true).write(true).open(&path).await.unwrap();
            let mut back = Vec::new();
            file.read_to_end(&mut back).await.unwrap();
            assert!(back == data);
            assert_eq!(file.seek(SeekFrom::Start(7)).await.unwrap(), 7);
            let mut small = [0u8; 4];
            file.read_exact(&mut small).await.unwrap();
            assert_eq!(&small[..], &data[7..11]);
            assert_eq!(file.stream_position().await.unwrap(), 11);
            file.write_all(b"tk").await.unwrap();
            file.flush().await.unwrap();
            file.seek(SeekFrom::Start(11)).await.unwrap();
            file.read_exact(&mut small).await.unwrap();
            assert_eq!(&small[..2], b"tk");
            assert_eq!(&small[2..], &data[13..15]);
            let e = file.seek(SeekFrom::Current(-100)).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            file.sync_all().await.unwrap();
        });
    }
}

rt_test! {
    fn background_write_error_is_reported(rt) {
        use futures::io::AsyncWriteExt;
        let dir = TempDir::new("write-err");
        let path = dir.path("ro");
        rt.block_on(async {
            fs::write(&path, b"read only").await.unwrap();
            // Open without write access: the write is queued, then fails on the pool.
            let mut file = File::open(&path).await.unwrap();
            assert_eq!(file.write(b"nope").await.unwrap(), 4, "queued");
            let e = file.flush().await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EBADF));
            // Reported once.
            file.flush().await.unwrap();
            assert_eq!(file.write(b"again").await.unwrap(), 5);
            let e = file.sync_all().await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        });
    }
}

rt_test! {
    fn open_options_and_conversions(rt) {
        use futures::io::{AsyncReadExt, AsyncWriteExt};
        let dir = TempDir::new("options");
        let path = dir.path("o");
        rt.block_on(async {
            let mut f = File::create_new(&path).await.unwrap();
            assert_eq!(File::create_new(&path).await.unwrap_err().kind(), ErrorKind::AlreadyExists);
            f.write_all(b"abc").await.unwrap();
            f.flush().await.unwrap();
            drop(f);

            let mut f = File::options().append(true).open(&path).await.unwrap();
            f.write_all(b"def").await.unwrap();
            f.flush().await.unwrap();
            drop(f);
            assert_eq!(fs::read(&path).await.unwrap(), b"abcdef");

            let mut f = OpenOptions::new().write(true).truncate(true).open(&path).await.unwrap();
            f.write_all(b"x").await.unwrap();
            f.flush().await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), b"x");

            let fresh = dir.path("mode");
            let f = OpenOptions::new().write(true).create(true).mode(0o640).open(&fresh).await.unwrap();
            let mode = f.metadata().await.unwrap().permissions().mode();
            assert_eq!(mode & 0o077 & !0o640, 0, "no more than asked for (less the umask)");
            f.set_permissions(std::fs::Permissions::from_mode(0o604)).await.unwrap();
            assert_eq!(f.metadata().await.unwrap().permissions().mode() & 0o777, 0o604);

            let e = OpenOptions::new().create(true).open(dir.path("c")).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "create needs write");
            let e = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(&path)
                .await
                .unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));

            // try_into_std: refused while a read is in flight or bytes are read ahead, fine
            // when settled.
            use futures::FutureExt;
            fs::write(&path, pattern(1000)).await.unwrap();
            let mut f = File::open(&path).await.unwrap();
            let clone = f.try_clone().await.unwrap();
            let mut large = [0u8; 100];
            if f.read(&mut large).now_or_never().is_none() {
                let mut f = f.try_into_std().expect_err("a read is in flight");
                let mut one = [0u8; 1];
                f.read_exact(&mut one).await.unwrap();
                f.try_into_std().expect_err("99 bytes are read ahead");
            }
            let f = File::from(std::fs::File::open(&path).unwrap());
            let std_file = f.try_into_std().expect("nothing in flight");
            drop(std_file);
            drop(clone);
            assert!(format!("{:?}", File::open(&path).await.unwrap()).contains("File"));
        });
    }
}

/// The types and futures can move between threads, as tokio's can.
#[allow(dead_code)]
fn send_and_sync_promises() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: T) {}
    send_sync::<File>();
    send_sync::<OpenOptions>();
    send_sync::<fs::ReadDir>();
    send_sync::<fs::DirEntry>();
    send(fs::read("x"));
    send(fs::write("x", b"y"));
    send(fs::read_dir("x"));
    send(File::open("x"));
    let file: File = File::from_std(std::fs::File::open("/dev/null").unwrap());
    send(file.sync_all());
    send(file.set_len(0));
}

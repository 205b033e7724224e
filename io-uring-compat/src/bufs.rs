//! The ring of provided buffers that multishot receives pick from (the receive fast path).
//!
//! One buffer group per ring: [`COUNT`] buffers of [`BUF_LEN`] bytes, and the ring of
//! `struct io_uring_buf` entries that offers them to the kernel (registered with
//! `IORING_REGISTER_PBUF_RING`). A receive completion names the buffer it filled
//! (`IORING_CQE_F_BUFFER`); the owner copies the bytes out into the stream's read-ahead queue
//! and gives the buffer back at once, so between two waits every buffer belongs to the kernel.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::IoUring;
use io_uring::types::BufRingEntry;

use crate::ring::Ring;

/// The buffer group id receives name.
pub(crate) const BGID: u16 = 0;
/// Buffers in the group (a power of two, as the kernel requires).
const COUNT: u16 = 256;
/// Bytes per buffer.
const BUF_LEN: usize = 4096;

/// The buffers and their ring.
pub(crate) struct BufRing {
    /// `COUNT` entries, page-aligned (`mmap`): the ring the kernel reads.
    entries: NonNull<BufRingEntry>,
    entries_len: usize,
    /// `COUNT * BUF_LEN` bytes of buffers.
    mem: Box<[u8]>,
    /// Our copy of the ring's tail (the kernel only reads it).
    tail: u16,
}

// SAFETY: the ring's memory is owned by this value and only touched through `&mut self` (by
// the ring's owner) or by the kernel; moving it to another thread moves that ownership.
unsafe impl Send for BufRing {}

impl BufRing {
    pub(crate) fn new() -> io::Result<BufRing> {
        let entries_len = usize::from(COUNT) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping, no address hint; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                entries_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let entries = NonNull::new(p.cast::<BufRingEntry>()).expect("mmap returned null");
        Ok(BufRing {
            entries,
            entries_len,
            mem: vec![0u8; usize::from(COUNT) * BUF_LEN].into_boxed_slice(),
            tail: 0,
        })
    }

    /// Offers every buffer again and registers the group on `ring` (a new ring, or the first).
    ///
    /// # Safety
    /// No request of an earlier ring may still write into the buffers: that ring is closed (its
    /// task work no longer runs receives) or never had the group.
    pub(crate) unsafe fn register(&mut self, ring: &IoUring) -> io::Result<()> {
        self.tail = 0;
        // SAFETY: the tail field lives in the mapping; zeroing it while no ring has the group
        // registered races with nobody.
        unsafe { self.tail_atomic() }.store(0, Ordering::Relaxed);
        for bid in 0..COUNT {
            self.offer(bid);
        }
        self.publish();
        // SAFETY: the mapping and the buffers stay valid until this value is dropped, which
        // happens after the ring is closed (the selector's fields drop the ring first).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.entries.as_ptr() as u64,
                COUNT,
                BGID,
                0,
            )
        }
    }

    /// The `len` bytes the kernel wrote into buffer `bid`.
    pub(crate) fn get(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid % COUNT) * BUF_LEN;
        &self.mem[start..start + len.min(BUF_LEN)]
    }

    /// Gives buffer `bid` back to the kernel.
    pub(crate) fn recycle(&mut self, bid: u16) {
        self.offer(bid % COUNT);
        self.publish();
    }

    /// Writes buffer `bid` into the entry at the tail and advances our tail.
    fn offer(&mut self, bid: u16) {
        let index = usize::from(self.tail & (COUNT - 1));
        let addr = self.mem[usize::from(bid) * BUF_LEN..].as_mut_ptr() as u64;
        // SAFETY: `index < COUNT`, inside the mapping; the kernel does not read an entry past
        // the published tail, so writing it races with nobody. The setters leave the entry's
        // `resv` field (the ring's tail, in entry 0) alone.
        let entry = unsafe { &mut *self.entries.as_ptr().add(index) };
        entry.set_addr(addr);
        entry.set_len(BUF_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the entries written so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: see `tail_atomic`.
        unsafe { self.tail_atomic() }.store(self.tail, Ordering::Release);
    }

    /// The ring's tail, shared with the kernel.
    ///
    /// # Safety
    /// The mapping is live (it is, while `self` is).
    unsafe fn tail_atomic(&self) -> &AtomicU16 {
        // SAFETY: the tail is a naturally aligned u16 inside entry 0 of the live mapping; the
        // kernel reads it with acquire loads, we write it with atomic stores only.
        unsafe { AtomicU16::from_ptr(BufRingEntry::tail(self.entries.as_ptr()).cast_mut()) }
    }
}

impl BufRing {
    /// The buffers of a new `ring` (not enabled yet), registered on it; `None` with one
    /// warning per process when the kernel refuses them (streams are then polled as usual).
    pub(crate) fn for_ring(ring: &Ring) -> Option<BufRing> {
        let built = BufRing::new().and_then(|mut b| {
            // SAFETY: a new ring, which never had the group.
            unsafe { b.register(ring.inner()) }.map(|()| b)
        });
        match built {
            Ok(b) => Some(b),
            Err(e) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        target: "weir::reactor",
                        error = %e,
                        "io_uring receive fast path unavailable (provided-buffer ring refused); \
                         streams are polled for readiness instead"
                    )
                });
                None
            }
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` with this length and is unmapped once.
        unsafe { libc::munmap(self.entries.as_ptr().cast(), self.entries_len) };
    }
}

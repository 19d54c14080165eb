//! A whole file's bytes for readers that parse them in place: memory-mapped
//! when the file is a regular file (no copy, no zeroed pages, parsing starts
//! at once), read into memory otherwise.
//!
//! A mapped file that another process truncates while it is read would
//! raise `SIGBUS` on the pages past its new end. A handler installed with
//! the first mapping maps zeroed memory over such a page instead and marks
//! the mapping: the read goes on over zeros and [`FileBytes::intact`] tells
//! the caller to discard what it made of them; a cut inside the last page
//! raises no fault (the kernel zeroes the rest of that page), so
//! [`FileBytes::intact`] also compares the file's current length with the
//! mapped one. Appends to the file are not seen (the mapping keeps the
//! length it had when it was opened). A file rewritten *in place* while it
//! is mapped changes bytes under the borrows made of them, which Rust does
//! not allow: that is the contract [`read_file`] leaves to its caller, as
//! every memory map does (an append-only log, or a file replaced by rename,
//! never does it).

#![allow(unsafe_code)] // mmap, munmap and the SIGBUS handler; each use says why it is sound

use std::io;
use std::ops::Deref;
use std::path::Path;

/// A file's bytes: mapped, or read.
pub struct FileBytes {
    inner: Inner,
}

enum Inner {
    Read(Vec<u8>),
    #[cfg(target_os = "linux")]
    Mapped(imp::Mapping),
}

impl FileBytes {
    /// True unless the file shrank while it was mapped (the bytes past its
    /// new end then read as zeros, and what was made of them must be discarded).
    pub fn intact(&self) -> bool {
        match &self.inner {
            Inner::Read(_) => true,
            #[cfg(target_os = "linux")]
            Inner::Mapped(m) => m.intact(),
        }
    }

    /// True when the bytes are a memory map of the file (not a copy).
    pub fn is_mapped(&self) -> bool {
        !matches!(self.inner, Inner::Read(_))
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.inner {
            Inner::Read(bytes) => bytes,
            #[cfg(target_os = "linux")]
            Inner::Mapped(m) => m.bytes(),
        }
    }
}

/// The bytes of the file at `path`: memory-mapped when it is a non-empty
/// regular file and the system maps it, read from the same handle otherwise.
///
/// # Safety
///
/// While the returned bytes live, no other process may change bytes of the
/// file within the length it has now (rewrite it in place). Appending to it,
/// replacing it by rename, and truncating it are allowed: appends and
/// replacements are not seen, a truncation is reported by
/// [`FileBytes::intact`] (the bytes past the cut read as zeros).
pub unsafe fn read_file(path: &Path) -> io::Result<FileBytes> {
    use std::io::Read;
    // Opened once: a named pipe opened a second time would wait for another writer.
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    #[cfg(target_os = "linux")]
    if meta.is_file() && meta.len() > 0 {
        if let Ok(len) = usize::try_from(meta.len()) {
            match imp::Mapping::new(file, len) {
                Ok(mapping) => return Ok(FileBytes { inner: Inner::Mapped(mapping) }),
                Err(back) => file = back,
            }
        }
    }
    // `read_to_end` sizes the buffer from the file and reports a failed allocation as an error.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(FileBytes { inner: Inner::Read(bytes) })
}

#[cfg(target_os = "linux")]
mod imp {
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    /// Mappings the SIGBUS handler knows of at once; more are read instead.
    const SLOTS: usize = 8;

    struct Slot {
        /// Claimed by a live mapping.
        taken: AtomicBool,
        start: AtomicUsize,
        end: AtomicUsize,
        /// A page past the file's end was touched and replaced by zeros.
        truncated: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Slot = Slot {
        taken: AtomicBool::new(false),
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        truncated: AtomicBool::new(false),
    };
    static SLOT: [Slot; SLOTS] = [FREE; SLOTS];

    /// The page size and the SIGBUS action that was in place before ours
    /// (`None` when ours could not be installed).
    struct Installed {
        page: usize,
        previous: libc::sigaction,
    }
    static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();

    fn install() -> Option<&'static Installed> {
        INSTALLED
            .get_or_init(|| {
                // SAFETY: sysconf has no preconditions.
                let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
                // SAFETY: both structs are plain C data, zero is a valid
                // value for them; `on_sigbus` has the signature SA_SIGINFO asks for.
                unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
                    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                    libc::sigemptyset(&mut action.sa_mask);
                    let mut previous: libc::sigaction = std::mem::zeroed();
                    (libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0)
                        .then_some(Installed { page, previous })
                }
            })
            .as_ref()
    }

    /// A fault in a mapping of ours: zeros over the page, and the mapping
    /// marked; any other: the action that was there before ours.
    extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
        let addr = unsafe { (*info).si_addr() } as usize;
        let Some(Some(installed)) = INSTALLED.get() else { return };
        for slot in &SLOT {
            let (start, end) = (slot.start.load(Ordering::Acquire), slot.end.load(Ordering::Acquire));
            if start <= addr && addr < end {
                let page = addr & !(installed.page - 1);
                // SAFETY: the page lies inside a mapping of ours (live while
                // its slot holds its range); MAP_FIXED replaces that page
                // only, with zeroed read-only memory. mmap is async-signal-safe.
                let zeros = unsafe {
                    libc::mmap(
                        page as *mut libc::c_void,
                        installed.page,
                        libc::PROT_READ,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    )
                };
                if zeros != libc::MAP_FAILED {
                    slot.truncated.store(true, Ordering::Release);
                    return;
                }
            }
        }
        let previous = &installed.previous;
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            // Put the old action back and return: the fault happens again
            // and takes it (the default ends the process, as it would have).
            // SAFETY: `previous` is the action sigaction gave back.
            unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous handler was installed with SA_SIGINFO, so
            // it has this signature.
            let previous: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            previous(signal, info, context);
        } else {
            // SAFETY: installed without SA_SIGINFO: a one-argument handler.
            let previous: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            previous(signal);
        }
    }

    /// A read-only private mapping of a whole file, known to the handler.
    pub(super) struct Mapping {
        ptr: *mut libc::c_void,
        len: usize,
        slot: &'static Slot,
        /// The mapped file, to compare its current length with `len`.
        file: File,
    }

    // SAFETY: the mapping is read-only memory owned by this value.
    unsafe impl Send for Mapping {}
    // SAFETY: shared access only reads.
    unsafe impl Sync for Mapping {}

    impl Mapping {
        /// Maps `len` bytes of `file`; the file back when it cannot (the caller reads it instead).
        pub(super) fn new(file: File, len: usize) -> Result<Mapping, File> {
            if install().is_none() {
                return Err(file);
            }
            let Some(slot) = SLOT
                .iter()
                .find(|s| s.taken.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok())
            else {
                return Err(file);
            };
            // SAFETY: a fresh read-only private mapping of an open file; the
            // kernel chooses the address.
            let ptr = unsafe {
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
            };
            if ptr == libc::MAP_FAILED {
                slot.taken.store(false, Ordering::Release);
                return Err(file);
            }
            slot.truncated.store(false, Ordering::Release);
            slot.start.store(ptr as usize, Ordering::Release);
            slot.end.store(ptr as usize + len, Ordering::Release);
            Ok(Mapping { ptr, len, slot, file })
        }

        pub(super) fn bytes(&self) -> &[u8] {
            // SAFETY: `len` readable bytes at `ptr` for as long as `self`
            // lives (pages past a truncation read as zeros, see above).
            unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
        }

        /// No page was replaced by zeros, and the file is still at least
        /// as long as the mapping (a cut inside the last page faults nothing).
        pub(super) fn intact(&self) -> bool {
            !self.slot.truncated.load(Ordering::Acquire)
                && self.file.metadata().is_ok_and(|m| m.len() >= self.len as u64)
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            self.slot.start.store(0, Ordering::Release);
            self.slot.end.store(0, Ordering::Release);
            // SAFETY: the mapping made in `new`, no longer borrowed.
            unsafe { libc::munmap(self.ptr, self.len) };
            self.slot.taken.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::read_file;

    #[test]
    fn a_regular_file_is_mapped_and_reads_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        // SAFETY: nothing rewrites the test's file in place.
        let bytes = unsafe { read_file(&path) }.unwrap();
        assert_eq!(&bytes[..], b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(bytes.is_mapped(), cfg!(target_os = "linux"));
        assert!(bytes.intact());
        // An empty file is read (a mapping cannot be empty).
        std::fs::write(&path, b"").unwrap();
        // SAFETY: as above.
        let empty = unsafe { read_file(&path) }.unwrap();
        assert!(empty.is_empty() && !empty.is_mapped());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_named_pipe_is_opened_once_and_read_to_its_end() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        // The writer's open waits for our open; it writes and closes. Had the
        // reader opened the pipe twice, the lines would be lost (or the write
        // refused) and the second open would wait for a writer that never comes.
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut pipe = std::fs::OpenOptions::new().write(true).open(&path)?;
                pipe.write_all(b"{\"a\":1}\n")
            })
        };
        let (sent, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: nothing rewrites a pipe in place.
            let _ = sent.send(unsafe { read_file(&path) }.map(|b| b.to_vec()));
        });
        let bytes = got.recv_timeout(std::time::Duration::from_secs(20)).expect("the read did not end");
        assert_eq!(bytes.unwrap(), b"{\"a\":1}\n");
        writer.join().unwrap().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_truncated_while_mapped_reads_as_zeros_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let page = 4096 * 16;
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![b'x'; page * 3]).unwrap();
        file.sync_all().unwrap();
        // SAFETY: nothing rewrites the test's file in place.
        let bytes = unsafe { read_file(&path) }.unwrap();
        assert!(bytes.is_mapped());
        // Another writer cuts the file to one page's worth.
        file.set_len(page as u64).unwrap();
        // Without the handler this read raises SIGBUS and ends the test process.
        let tail: usize = bytes[page * 2..].iter().map(|&b| usize::from(b)).sum();
        assert_eq!(tail, 0);
        assert_eq!(bytes[0], b'x');
        assert!(!bytes.intact());
        drop(bytes);
        // A later mapping of the same slot starts intact.
        // SAFETY: as above.
        let again = unsafe { read_file(&path) }.unwrap();
        assert!(again.intact() && again.len() == page);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_cut_inside_the_last_page_is_reported_though_nothing_faults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        // Not a whole number of pages: the cut stays inside the last one.
        file.write_all(&vec![b'x'; 10_000]).unwrap();
        file.sync_all().unwrap();
        // SAFETY: the test only truncates the file, which the contract allows.
        let bytes = unsafe { read_file(&path) }.unwrap();
        assert!(bytes.is_mapped() && bytes.intact());
        file.set_len(9_900).unwrap();
        // No SIGBUS: the kernel zeroes the rest of the page.
        assert_eq!(bytes[9_950], 0);
        assert_eq!(bytes[9_899], b'x');
        assert!(!bytes.intact());
    }
}

//! The memory [`crate::host::call`] hands to compiled code: inputs, outputs,
//! the workspace and what the allocator hook returns.
//!
//! On the heap by default. With [`Placement::Guarded`] (`onnxc test
//! --guard-pages`) every buffer gets its own mapping between two
//! `PROT_NONE` pages, its end flush against the second, so that generated
//! code or a kernel that reads or writes one byte past a buffer (or a page
//! before it) faults at once instead of corrupting a neighbour. Allocation
//! is fallible either way: a size the machine cannot give is an error, not
//! an abort.

/// Where buffers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    #[default]
    Heap,
    /// One mapping per buffer, guard pages on both sides, the buffer's end
    /// on the upper guard page (Unix only).
    Guarded,
}

/// Owned memory of `len` bytes at `ptr`, zeroed when made.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    /// Keeps the memory alive; the mapping is unmapped on drop.
    _owner: Owner,
}

enum Owner {
    Heap { _words: Vec<u64> },
    Mapped { _map: Mapping },
}

impl Placement {
    /// `len` zero bytes starting at a multiple of `align` (a power of two,
    /// at most 4096).
    pub fn zeroed(self, len: usize, align: usize) -> Result<Buffer, String> {
        if !align.is_power_of_two() || align > 4096 {
            return Err(format!("buffer alignment {align} is not a power of two up to 4096"));
        }
        match self {
            Placement::Heap => heap(len, align),
            Placement::Guarded => guarded(len, align),
        }
    }

    /// A copy of `bytes` in a buffer of this placement.
    pub fn copy(self, bytes: &[u8], align: usize) -> Result<Buffer, String> {
        let mut b = self.zeroed(bytes.len(), align)?;
        b.bytes_mut().copy_from_slice(bytes);
        Ok(b)
    }

    /// The caller's input bytes as compiled code should see them: the
    /// bytes themselves on the heap, a guarded copy otherwise.
    pub fn input(self, bytes: &[u8], align: usize) -> Result<Option<Buffer>, String> {
        match self {
            Placement::Heap => Ok(None),
            Placement::Guarded => self.copy(bytes, align).map(Some),
        }
    }
}

impl Buffer {
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` addresses `len` initialised bytes this buffer owns.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

fn too_large(len: usize) -> String {
    format!("cannot allocate {len} bytes")
}

fn heap(len: usize, align: usize) -> Result<Buffer, String> {
    // u64 words are 8-byte aligned; larger alignments take slack words.
    let words = len.div_ceil(8).checked_add(align.saturating_sub(8).div_ceil(8)).ok_or_else(|| too_large(len))?;
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).map_err(|_| too_large(len))?;
    v.resize(words, 0);
    let base = v.as_mut_ptr() as *mut u8;
    // SAFETY: the slack words cover the alignment offset.
    let ptr = unsafe { base.add(base.align_offset(align)) };
    Ok(Buffer { ptr, len, _owner: Owner::Heap { _words: v } })
}

/// An anonymous mapping, unmapped on drop.
struct Mapping {
    base: *mut u8,
    size: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base+size` is a mapping this struct made.
        unsafe { libc::munmap(self.base.cast(), self.size) };
    }
}

fn page_size() -> usize {
    // SAFETY: a plain query.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

fn guarded(len: usize, align: usize) -> Result<Buffer, String> {
    let page = page_size();
    // Room for the buffer pushed down to its alignment, in whole pages.
    let data =
        len.checked_add(align - 1).and_then(|n| n.checked_next_multiple_of(page)).ok_or_else(|| too_large(len))?;
    let size = data.checked_add(2 * page).ok_or_else(|| too_large(len))?;
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!("{}: {}", too_large(len), std::io::Error::last_os_error()));
    }
    let map = Mapping { base: base.cast(), size };
    let upper = page + data;
    for at in [0, upper] {
        // SAFETY: both pages lie inside the mapping.
        if unsafe { libc::mprotect(map.base.add(at).cast(), page, libc::PROT_NONE) } != 0 {
            return Err(format!("guard page: {}", std::io::Error::last_os_error()));
        }
    }
    // The end on the upper guard page, the start moved down to `align`.
    let start = (upper - len) & !(align - 1);
    // SAFETY: `page <= start` and `start + len <= upper` inside the mapping.
    let ptr = unsafe { map.base.add(start) };
    Ok(Buffer { ptr, len, _owner: Owner::Mapped { _map: map } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_aligned_and_sized() {
        for placement in [Placement::Heap, Placement::Guarded] {
            for (len, align) in [(0, 1), (1, 1), (13, 8), (4096, 64), (5000, 64), (100, 4096)] {
                let b = placement.zeroed(len, align).expect("allocate");
                assert_eq!(b.len(), len);
                assert_eq!(b.ptr() as usize % align, 0, "{placement:?} {len} {align}");
                assert!(b.bytes().iter().all(|&x| x == 0));
            }
            let b = placement.copy(&[1, 2, 3], 1).expect("copy");
            assert_eq!(b.bytes(), [1, 2, 3]);
        }
    }

    #[test]
    fn a_guarded_buffer_ends_on_its_guard_page() {
        let page = page_size();
        let b = Placement::Guarded.zeroed(24, 8).expect("allocate");
        assert_eq!((b.ptr() as usize + b.len()) % page, 0);
    }

    /// A write one byte past the end kills a forked child with SIGSEGV.
    #[test]
    fn one_byte_past_the_end_faults() {
        let b = Placement::Guarded.zeroed(24, 8).expect("allocate");
        // SAFETY: the child only writes and exits; the parent waits for it.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                b.ptr().add(b.len()).write_volatile(1);
                libc::_exit(0);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            assert!(libc::WIFSIGNALED(status), "the child exited normally");
            assert_eq!(libc::WTERMSIG(status), libc::SIGSEGV);
        }
    }

    #[test]
    fn impossible_sizes_are_errors() {
        assert!(Placement::Heap.zeroed(usize::MAX - 3, 8).is_err());
        assert!(Placement::Guarded.zeroed(usize::MAX - 3, 8).is_err());
        assert!(Placement::Heap.zeroed(8, 3).is_err());
    }
}

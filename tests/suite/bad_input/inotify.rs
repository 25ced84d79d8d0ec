//! Which files a child process opened, seen through Linux inotify: a watch
//! on a folder reports opens of the files in it, a watch on a file reports
//! opens of its inode by any path (a hardlink too).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub struct OpenWatch {
    fd: i32,
}

impl OpenWatch {
    /// Watches `paths` (folders and files) for opens from now on.
    pub fn new(paths: &[&Path]) -> std::io::Result<OpenWatch> {
        // SAFETY: plain syscalls on a descriptor this struct owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let watch = OpenWatch { fd };
        for p in paths {
            let c = CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
            if unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(watch)
    }

    /// The files (not folders) opened since [`OpenWatch::new`]: the name
    /// inside a watched folder, or `(watched file)`.
    pub fn opened_files(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: reads into a buffer of the given length.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            let mut at = 0;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n {
                // SAFETY: the kernel wrote whole events; read_unaligned copes with the byte buffer.
                let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name_bytes = &buf[at + header..(at + header + ev.len as usize).min(n)];
                let name = String::from_utf8_lossy(name_bytes).trim_end_matches('\0').to_string();
                if ev.mask & libc::IN_ISDIR == 0 {
                    names.push(if name.is_empty() { "(watched file)".to_string() } else { name });
                }
                at += header + ev.len as usize;
            }
        }
        names
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this struct owns.
        unsafe { libc::close(self.fd) };
    }
}

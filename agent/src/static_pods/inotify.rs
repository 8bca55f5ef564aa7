//! Changes to the static pod directory as they happen (inotify), as the
//! kubelet's file source sees them: each file created, written, moved in,
//! removed or moved out is an event of its own, so a manifest removed and at
//! once written again is seen as both.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use tokio::io::unix::AsyncFd;

/// One change in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// The file is there, new or changed: read it again.
    Written(String),
    /// The file is gone.
    Removed(String),
    /// Events were lost (the queue overflowed) or the directory itself went
    /// away: read everything again.
    Rescan,
}

/// An inotify watch on one directory.
#[derive(Debug)]
pub(super) struct Watch {
    fd: AsyncFd<OwnedFd>,
}

const WRITTEN: u32 = libc::IN_CREATE | libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_MODIFY;
const REMOVED: u32 = libc::IN_DELETE | libc::IN_MOVED_FROM;
const RESCAN: u32 =
    libc::IN_Q_OVERFLOW | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED;

impl Watch {
    /// Watches `dir` (which must exist).
    pub(super) fn new(dir: &Path) -> io::Result<Self> {
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new descriptor we own.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mask = WRITTEN | REMOVED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR;
        // SAFETY: a valid inotify descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is an open inotify descriptor owned by the AsyncFd for
        // its whole life, so `as_raw_fd` always returns that same descriptor.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// The next batch of changes, in the order they happened.
    pub(super) async fn changes(&mut self) -> io::Result<Vec<Change>> {
        let mut buf = [0u8; 8192];
        loop {
            let mut ready = self.fd.readable().await?;
            let read = ready.try_io(|fd| {
                // SAFETY: reads at most `buf.len()` bytes into `buf`.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            });
            match read {
                Ok(Ok(n)) => return Ok(parse(&buf[..n])),
                Ok(Err(error)) => return Err(error),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Decodes `struct inotify_event` records: wd, mask, cookie, len, then `len`
/// bytes of NUL-padded name.
fn parse(mut buf: &[u8]) -> Vec<Change> {
    const HEADER: usize = 16;
    let word = |b: &[u8], at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let mut out = Vec::new();
    while buf.len() >= HEADER {
        let mask = word(buf, 4);
        let len = word(buf, 12) as usize;
        let Some(raw_name) = buf.get(HEADER..HEADER + len) else {
            break;
        };
        let end = raw_name
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(raw_name.len());
        let name = String::from_utf8_lossy(&raw_name[..end]).into_owned();
        buf = &buf[HEADER + len..];
        let change = if mask & RESCAN != 0 {
            Change::Rescan
        } else if name.is_empty() || name.starts_with('.') {
            continue;
        } else if mask & REMOVED != 0 {
            Change::Removed(name)
        } else if mask & WRITTEN != 0 {
            Change::Written(name)
        } else {
            continue;
        };
        out.push(change);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_removed_and_rewritten_file_is_two_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = Watch::new(dir.path()).unwrap();
        let file = dir.path().join("web.yaml");
        std::fs::write(&file, "a").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::fs::write(dir.path().join(".hidden"), "x").unwrap();
        std::fs::write(&file, "a").unwrap();
        let written = Change::Written("web.yaml".into());
        let removed = Change::Removed("web.yaml".into());
        let want = [written.clone(), removed, written];
        let mut seen: Vec<Change> = Vec::new();
        // Creating and writing a file are several events: consecutive repeats fold.
        while seen.len() < want.len() {
            let batch = tokio::time::timeout(std::time::Duration::from_secs(5), watch.changes())
                .await
                .expect("inotify events")
                .unwrap();
            seen.extend(batch);
            seen.dedup();
        }
        assert_eq!(seen, want);
    }
}

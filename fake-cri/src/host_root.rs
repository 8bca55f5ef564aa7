//! The host root: the directory fake-cri takes the host paths of CRI requests
//! from — the sandbox's log directory, each container's log path and mounts.
//!
//! By default it is `/`: fake-cri sees the host as its client does. A client
//! in a mount namespace of its own (the harness's kubelets, whose `/var/log`
//! and volume tmpfs mounts exist only there) names paths fake-cri's namespace
//! does not show; fake-cri reaches them through the client's root,
//! `/proc/PID/root`. Every host path is resolved under the root as a process
//! chrooted there would resolve it: a symbolic link's absolute target starts
//! again at the root and `..` stops at it. `std::fs::canonicalize` would not
//! do: the kernel reads the `/proc/PID/root` link as `/` and the rest of the
//! path would then be looked up in fake-cri's own namespace.
//!
//! A root may be set after fake-cri started ([`crate::Builder::defer_host_root`]):
//! the client is started once its runtime serves, and its process id is the
//! root. Requests that name host paths wait for it, at most [`WAIT`].

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Error;

/// How long a request that names host paths waits for a deferred root.
pub const WAIT: Duration = Duration::from_secs(10);

/// Linux's limit on symbolic links followed while resolving one path.
const MAX_LINKS: usize = 40;

/// A root host paths are resolved under. Cloning shares it.
#[derive(Debug, Clone)]
pub(crate) struct Root(Arc<Path>);

impl Root {
    /// The root `/`: paths are the host's own.
    pub(crate) fn host() -> Self {
        Self(Arc::from(Path::new("/")))
    }

    fn new(path: PathBuf) -> Self {
        Self(Arc::from(path))
    }

    /// The directory every host path is taken from.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// `path` as the client means it, below the root: symbolic links followed
    /// with the root as `/` (the result has none below the root, but for
    /// components that do not exist yet, which are kept as they are). A
    /// relative path is taken from fake-cri's working directory with the root
    /// `/` (the client's, when both run in one process), else from the root.
    pub(crate) fn resolve(&self, path: &Path) -> std::io::Result<PathBuf> {
        let path = if self.is_host() {
            std::path::absolute(path)?
        } else {
            path.to_owned()
        };
        // Components still to walk, next one last.
        let mut pending: Vec<OsString> = parts(&path).rev().collect();
        let mut resolved = self.0.to_path_buf();
        let mut depth = 0usize;
        let mut links = 0usize;
        let mut exists = true;
        while let Some(part) = pending.pop() {
            if part == ".." {
                if depth > 0 {
                    resolved.pop();
                    depth -= 1;
                }
                continue;
            }
            resolved.push(&part);
            depth += 1;
            if !exists {
                continue;
            }
            let is_link = match std::fs::symlink_metadata(&resolved) {
                Ok(meta) => meta.file_type().is_symlink(),
                // Missing: kept as it is; the operation on the path reports it.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    exists = false;
                    continue;
                }
                // E.g. `No such process`: the root's process has exited.
                Err(e) => return Err(e),
            };
            if !is_link {
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = std::fs::read_link(&resolved)?;
            resolved.pop();
            depth -= 1;
            if target.is_absolute() {
                resolved = self.0.to_path_buf();
                depth = 0;
            }
            pending.extend(parts(&target).rev());
        }
        Ok(resolved)
    }

    /// [`Root::resolve`] for a host path of an `rpc` request.
    pub(crate) fn resolve_for(&self, rpc: &'static str, path: &Path) -> Result<PathBuf, Error> {
        self.resolve(path).map_err(|source| Error::HostPath {
            rpc,
            path: path.to_owned(),
            root: self.path().to_owned(),
            source,
        })
    }

    fn is_host(&self) -> bool {
        self.0.as_ref() == Path::new("/")
    }
}

/// The names and `..`s of a path, without `/` and `.`.
fn parts(path: &Path) -> impl DoubleEndedIterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_owned()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// The current root of a runtime, or none yet when it was deferred.
#[derive(Debug)]
pub(crate) struct HostRoot {
    current: watch::Sender<Option<Root>>,
    /// The `/proc/PID` directories of roots given as processes. A root is
    /// `/proc/self/fd/N/root` through one of them: unlike `/proc/PID/root`,
    /// it fails once that process has exited and never reaches a later
    /// process given the same id. Kept for the runtime's life, since paths
    /// resolved under them name the descriptor.
    processes: Mutex<Vec<File>>,
}

impl HostRoot {
    /// A root set at start (`Some`), or one to be set later (`None`).
    pub(crate) fn new(root: Option<PathBuf>) -> Self {
        Self {
            current: watch::channel(root.map(Root::new)).0,
            processes: Mutex::default(),
        }
    }

    /// Takes host paths from `root` from now on.
    pub(crate) fn set(&self, root: PathBuf) {
        tracing::debug!(root = %root.display(), "host root set");
        self.current.send_replace(Some(Root::new(root)));
    }

    /// Takes host paths from the root of process `pid` from now on, for as
    /// long as that process lives. Returns the root's path.
    pub(crate) fn set_process(&self, pid: u32) -> std::io::Result<PathBuf> {
        let dir = File::open(format!("/proc/{pid}"))?;
        let root = PathBuf::from(format!("/proc/self/fd/{}/root", dir.as_raw_fd()));
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir);
        self.set(root.clone());
        Ok(root)
    }

    /// The root, waiting at most [`WAIT`] for one that was deferred.
    pub(crate) async fn get(&self, rpc: &'static str) -> Result<Root, Error> {
        let mut current = self.current.subscribe();
        match tokio::time::timeout(WAIT, current.wait_for(Option::is_some)).await {
            Ok(Ok(root)) => Ok(root.clone().unwrap_or_else(Root::host)),
            // The sender lives as long as the runtime: only the timeout is left.
            Ok(Err(_)) | Err(_) => Err(Error::NoHostRoot {
                rpc,
                waited: WAIT.as_secs(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn links_resolve_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().to_owned());
        std::fs::create_dir_all(dir.path().join("real/sub")).unwrap();
        symlink("/real", dir.path().join("abs")).unwrap();
        symlink("../../real", dir.path().join("real/sub/up")).unwrap();
        symlink("loop", dir.path().join("loop")).unwrap();
        let under = |p: &str| dir.path().join(p);
        assert_eq!(
            root.resolve(Path::new("/abs/sub")).unwrap(),
            under("real/sub")
        );
        // `..` stops at the root, as in a chroot.
        assert_eq!(
            root.resolve(Path::new("/real/sub/up/x")).unwrap(),
            under("real/x")
        );
        assert_eq!(root.resolve(Path::new("/../../etc")).unwrap(), under("etc"));
        assert_eq!(
            root.resolve(Path::new("/missing/../a/b")).unwrap(),
            under("a/b")
        );
        assert_eq!(
            root.resolve(Path::new("/loop")).unwrap_err().raw_os_error(),
            Some(libc::ELOOP)
        );
    }

    #[test]
    fn the_host_root_keeps_absolute_paths() {
        assert_eq!(
            Root::host().resolve(Path::new("/no/such/dir")).unwrap(),
            Path::new("/no/such/dir")
        );
    }
}

//! Resolving a container path through the CRI mounts: the innermost mount
//! holding it and the host path it stands for. Symbolic links are followed
//! the way the container would see them (a relative target from the link's
//! directory, an absolute one from the container's root), which is what the
//! kubelet's atomic-writer layout needs (`key -> ..data/key`,
//! `..data -> ..2026_…`); a link whose target leaves the mount it is in is
//! refused, and every opened file is checked to be inside the mount's host
//! path (by its real path, so a link swapped in after the walk is caught too).
//!
//! Real paths are what the kernel names an open file ([`real_path`]), not
//! `std::fs::canonicalize`'s: a mount's host path may lie under a host root
//! such as `/proc/PID/root` (a client in another mount namespace), which
//! canonicalizing reads as `/` before looking the rest up in fake-cri's own
//! namespace. The kernel's name of a file and of the mount's directory, both
//! opened through that root, are in the same namespace and compare alike.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::FsError;

/// Linux's limit on symbolic links followed while resolving one path.
const MAX_LINKS: usize = 40;

/// A CRI mount as the interpreter uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where the container sees it, normalized (`/etc/podinfo`).
    pub container_path: String,
    /// What it shows of the host.
    pub host_path: PathBuf,
    /// Writes through it fail with `Read-only file system`.
    pub readonly: bool,
}

impl Mount {
    /// A mount from the CRI request's fields.
    /// A relative `host_path` is taken from fake-cri's working directory (the
    /// agent's, when both run in one process), once, here.
    pub fn new(container_path: &str, host_path: impl Into<PathBuf>, readonly: bool) -> Self {
        let host_path = host_path.into();
        Self {
            container_path: normalize(container_path),
            host_path: std::path::absolute(&host_path).unwrap_or(host_path),
            readonly,
        }
    }
}

/// Where a container path leads.
#[derive(Debug)]
pub(super) enum Location {
    /// The in-memory set, at this normalized path.
    Memory(String),
    /// A host path inside the mount with this index; no component of it was
    /// a symbolic link when it was resolved (except a last one not followed).
    Host {
        /// The mount's index.
        mount: usize,
        /// The host path.
        path: PathBuf,
    },
}

/// A container's mounts. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub(super) struct Mounts(Arc<[Mount]>);

impl Mounts {
    pub(super) fn new(mounts: Vec<Mount>) -> Self {
        Self(mounts.into())
    }

    /// The mount with this index.
    pub(super) fn get(&self, index: usize) -> &Mount {
        &self.0[index]
    }

    /// Every mount.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.0.iter()
    }

    /// The innermost mount holding `path` (normalized) and the rest of the path.
    fn mount_for<'p>(&self, path: &'p str) -> Option<(usize, &'p str)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, m)| rest_under(path, &m.container_path).map(|rest| (i, rest)))
            .max_by_key(|(i, _)| self.0[*i].container_path.len())
    }

    /// Resolves `path` to the in-memory set or a host path, following
    /// symbolic links inside mounts (the last component only when `follow`).
    pub(super) fn locate(&self, path: &str, follow: bool) -> Result<Location, FsError> {
        let mut path = normalize(path);
        let mut links = 0;
        'walk: loop {
            let Some((index, rest)) = self.mount_for(&path) else {
                return Ok(Location::Memory(path));
            };
            let mount = &self.0[index];
            let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
            let mut host = mount.host_path.clone();
            for (i, part) in parts.iter().enumerate() {
                host.push(part);
                let last = i + 1 == parts.len();
                let meta = match std::fs::symlink_metadata(&host) {
                    Ok(meta) => meta,
                    // A missing component: the operation reports it (or creates it).
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        parts[i + 1..].iter().for_each(|p| host.push(p));
                        break;
                    }
                    Err(e) => return Err(e.into()),
                };
                if !meta.file_type().is_symlink() || (last && !follow) {
                    continue;
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(FsError::Loop);
                }
                let target = std::fs::read_link(&host)?;
                let target = target.to_string_lossy();
                // The container sees the link in its own directory.
                let dir = join(&mount.container_path, &parts[..i]);
                let mut next = if target.starts_with('/') {
                    normalize(&target)
                } else {
                    normalize(&format!("{dir}/{target}"))
                };
                for part in &parts[i + 1..] {
                    next = join(&next, &[part]);
                }
                if rest_under(&next, &mount.container_path).is_none() {
                    return Err(FsError::Escapes {
                        mount: mount.container_path.clone(),
                    });
                }
                path = next;
                continue 'walk;
            }
            return Ok(Location::Host {
                mount: index,
                path: host,
            });
        }
    }

    /// Checks that `real` (a canonical host path) is inside mount `index`.
    pub(super) fn confine(&self, index: usize, real: &Path) -> Result<(), FsError> {
        let mount = &self.0[index];
        let root = real_path(&mount.host_path)?;
        if real.starts_with(&root) {
            Ok(())
        } else {
            Err(FsError::Escapes {
                mount: mount.container_path.clone(),
            })
        }
    }

    /// Checks an opened file: its real path (so a link swapped in after the
    /// walk is caught) must be inside the mount.
    pub(super) fn confine_open(&self, index: usize, file: &File) -> Result<(), FsError> {
        self.confine(index, &fd_path(file)?)
    }

    pub(super) fn writable(&self, index: usize) -> Result<(), FsError> {
        if self.0[index].readonly {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }
}

/// The real path of `path` as the kernel names it once opened: symbolic
/// links followed, in the mount namespace `path` leads into. (Opened with
/// `O_PATH`: nothing is read, and a FIFO does not block.)
pub(super) fn real_path(path: &Path) -> Result<PathBuf, FsError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)?;
    fd_path(&file)
}

/// The kernel's name of an open file (`/proc/self/fd/N`).
fn fd_path(file: &File) -> Result<PathBuf, FsError> {
    Ok(std::fs::read_link(format!(
        "/proc/self/fd/{}",
        file.as_raw_fd()
    ))?)
}

/// `path` with a trailing `/` (`/` stays `/`).
pub(super) fn dir_prefix(path: &str) -> String {
    if path.ends_with('/') {
        path.to_owned()
    } else {
        format!("{path}/")
    }
}

/// The rest of `path` below `dir` (`""` for `dir` itself), or `None` when
/// `path` is not `dir` or under it. Both normalized.
pub(super) fn rest_under<'p>(path: &'p str, dir: &str) -> Option<&'p str> {
    if dir == "/" {
        return Some(path.trim_start_matches('/'));
    }
    match path.strip_prefix(dir)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

/// `dir` joined with `parts`.
pub(super) fn join(dir: &str, parts: &[&str]) -> String {
    let mut out = dir.trim_end_matches('/').to_owned();
    for part in parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() { "/".to_owned() } else { out }
}

/// An absolute path without `.`, `..`, empty components or a trailing `/`.
/// A relative path is taken from `/`, the containers' working directory.
pub(crate) fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    join("/", &parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normalize("/a//b/./c/../d/"), "/a/b/d");
        assert_eq!(normalize("/.."), "/");
        assert_eq!(normalize("x"), "/x");
        assert_eq!(
            rest_under("/etc/podinfo/labels", "/etc/podinfo"),
            Some("labels")
        );
        assert_eq!(rest_under("/etc/podinfo", "/etc/podinfo"), Some(""));
        assert_eq!(rest_under("/etc/podinfox", "/etc/podinfo"), None);
        assert_eq!(rest_under("/a", "/"), Some("a"));
    }
}

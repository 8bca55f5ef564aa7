//! What a container's processes see of files: the CRI mounts, which show
//! host paths at container paths, and an in-memory set for every other path.
//!
//! A path under a mount's `container_path` is the same path under its
//! `host_path`. Symbolic links there are followed the way the container
//! would see them (a relative target from the link's directory, an absolute
//! one from the container's root), which is what the kubelet's atomic-writer
//! layout needs (`key -> ..data/key`, `..data -> ..2024_…`), but a link whose
//! target leaves the mount it is in is refused, and every opened file is
//! checked to be inside the mount's host path: nothing else on the host is
//! ever read or written.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The in-memory files of a container (path → content), for paths under no
/// mount. Shared by the main process and every exec in the container, so an
/// exec probe sees the files the main process created.
pub type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// Linux's limit on symbolic links followed while resolving one path.
const MAX_LINKS: usize = 40;

/// Directories every container has, though no file was written in them.
const ROOT_DIRS: &[&str] = &[
    "/", "/tmp", "/dev", "/etc", "/proc", "/root", "/var", "/run",
];

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
    pub fn new(container_path: &str, host_path: impl Into<PathBuf>, readonly: bool) -> Self {
        Self {
            container_path: normalize(container_path),
            host_path: host_path.into(),
            readonly,
        }
    }
}

/// Why a file operation failed, worded as the C library's `strerror` (the
/// command prefixes the path, as busybox does).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path does not exist.
    #[error("No such file or directory")]
    NotFound,
    /// A path component is not a directory.
    #[error("Not a directory")]
    NotADirectory,
    /// The file exists already.
    #[error("File exists")]
    Exists,
    /// A directory where a file was expected.
    #[error("Is a directory")]
    IsADirectory,
    /// A write through a read-only mount.
    #[error("Read-only file system")]
    ReadOnly,
    /// The host refused the access.
    #[error("Permission denied")]
    PermissionDenied,
    /// A symbolic link (or the opened file) lies outside the mount at `mount`.
    #[error(
        "Permission denied (fake-cri: a symbolic link leads out of the volume mounted at {mount})"
    )]
    Escapes {
        /// The mount's container path.
        mount: String,
    },
    /// The mount point itself cannot be removed.
    #[error("Resource busy")]
    Busy,
    /// More than [`MAX_LINKS`] symbolic links.
    #[error("Too many levels of symbolic links")]
    Loop,
    /// Any other host error.
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for FsError {
    fn from(error: std::io::Error) -> Self {
        use std::io::ErrorKind;
        match error.kind() {
            ErrorKind::NotFound => Self::NotFound,
            ErrorKind::NotADirectory => Self::NotADirectory,
            ErrorKind::IsADirectory => Self::IsADirectory,
            ErrorKind::ReadOnlyFilesystem => Self::ReadOnly,
            ErrorKind::PermissionDenied => Self::PermissionDenied,
            ErrorKind::AlreadyExists => Self::Exists,
            _ => Self::Io(error),
        }
    }
}

/// The kind of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only when asked not to follow it).
    Symlink,
}

/// What `stat` and `test` learn about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Its kind.
    pub kind: Kind,
    /// The permission bits (`0o644`).
    pub mode: u32,
    /// The size in bytes.
    pub len: u64,
}

/// Where a container path leads.
#[derive(Debug)]
enum Location {
    /// The in-memory set, at this normalized path.
    Memory(String),
    /// A host path inside the mount with this index; no component of it was
    /// a symbolic link when it was resolved (except a last one not followed).
    Host { mount: usize, path: PathBuf },
}

/// A container's files: the in-memory set and the mounts. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct FileSystem {
    memory: Files,
    mounts: Arc<[Mount]>,
}

impl FileSystem {
    /// A file system with these mounts and an empty in-memory set.
    pub fn new(mounts: Vec<Mount>) -> Self {
        Self {
            memory: Files::default(),
            mounts: mounts.into(),
        }
    }

    /// The in-memory files (the container's writable layer).
    pub fn memory(&self) -> &Files {
        &self.memory
    }

    fn memory_files(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The innermost mount holding `path` (normalized) and the rest of the path.
    fn mount_for<'p>(&self, path: &'p str) -> Option<(usize, &'p str)> {
        self.mounts
            .iter()
            .enumerate()
            .filter_map(|(i, m)| rest_under(path, &m.container_path).map(|rest| (i, rest)))
            .max_by_key(|(i, _)| self.mounts[*i].container_path.len())
    }

    /// Resolves `path` to the in-memory set or a host path, following
    /// symbolic links inside mounts (the last component only when `follow`).
    fn locate(&self, path: &str, follow: bool) -> Result<Location, FsError> {
        let mut path = normalize(path);
        let mut links = 0;
        'walk: loop {
            let Some((index, rest)) = self.mount_for(&path) else {
                return Ok(Location::Memory(path));
            };
            let mount = &self.mounts[index];
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
    fn confine(&self, index: usize, real: &Path) -> Result<(), FsError> {
        let mount = &self.mounts[index];
        let root = std::fs::canonicalize(&mount.host_path)?;
        if real.starts_with(&root) {
            Ok(())
        } else {
            Err(FsError::Escapes {
                mount: mount.container_path.clone(),
            })
        }
    }

    /// Checks an opened file: its real path (from `/proc/self/fd`, so a link
    /// swapped in after the walk is caught) must be inside the mount.
    fn confine_open(&self, index: usize, file: &std::fs::File, path: &Path) -> Result<(), FsError> {
        use std::os::fd::AsRawFd;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| std::fs::canonicalize(path))?;
        self.confine(index, &real)
    }

    fn writable(&self, index: usize) -> Result<(), FsError> {
        if self.mounts[index].readonly {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// The content of a file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, FsError> {
        match self.locate(path, true)? {
            Location::Memory(path) => {
                let content = self.memory_files().get(&path).cloned();
                match content {
                    Some(content) => Ok(content),
                    None if self.memory_dir(&path) => Err(FsError::IsADirectory),
                    None => Err(FsError::NotFound),
                }
            }
            Location::Host { mount, path } => {
                let mut file = std::fs::File::open(&path)?;
                self.confine_open(mount, &file, &path)?;
                if file.metadata()?.is_dir() {
                    return Err(FsError::IsADirectory);
                }
                let mut content = Vec::new();
                std::io::Read::read_to_end(&mut file, &mut content)?;
                Ok(content)
            }
        }
    }

    /// Writes `data` to a file, creating it; `append` keeps what it held.
    pub fn write(&self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        match self.locate(path, true)? {
            Location::Memory(path) => {
                if self.memory_dir(&path) && !self.memory_files().contains_key(&path) {
                    return Err(FsError::IsADirectory);
                }
                let mut files = self.memory_files();
                let content = files.entry(path).or_default();
                if !append {
                    content.clear();
                }
                content.extend_from_slice(data);
                Ok(())
            }
            Location::Host { mount, path } => {
                self.writable(mount)?;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(append)
                    .write(true)
                    .truncate(!append)
                    .open(&path)?;
                self.confine_open(mount, &file, &path)?;
                file.write_all(data)?;
                Ok(())
            }
        }
    }

    /// Creates a file if it does not exist (`touch`).
    pub fn touch(&self, path: &str) -> Result<(), FsError> {
        self.write(path, &[], true)
    }

    /// Removes a file (a link itself, not its target); a directory only
    /// when `recursive`.
    pub fn remove(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        match self.locate(path, false)? {
            Location::Memory(path) => {
                let mut files = self.memory_files();
                let prefix = format!("{}/", path.trim_end_matches('/'));
                let before = files.len();
                files.retain(|name, _| *name != path && !(recursive && name.starts_with(&prefix)));
                if files.len() != before {
                    Ok(())
                } else if files.keys().any(|name| name.starts_with(&prefix)) {
                    Err(FsError::IsADirectory)
                } else {
                    Err(FsError::NotFound)
                }
            }
            Location::Host { mount, path } => {
                self.writable(mount)?;
                if path == self.mounts[mount].host_path {
                    // The mount point itself is busy, as on Linux.
                    return Err(FsError::Busy);
                }
                let parent = path.parent().unwrap_or(&path);
                self.confine(mount, &std::fs::canonicalize(parent)?)?;
                let meta = std::fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    if !recursive {
                        return Err(FsError::IsADirectory);
                    }
                    // std's remove_dir_all does not follow symbolic links.
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
                Ok(())
            }
        }
    }

    /// Creates a directory (with its parents when `parents`); in memory,
    /// directories exist implicitly.
    pub fn mkdir(&self, path: &str, parents: bool) -> Result<(), FsError> {
        match self.locate(path, true)? {
            Location::Memory(_) => Ok(()),
            Location::Host { mount, path } => {
                self.writable(mount)?;
                let result = if parents {
                    std::fs::create_dir_all(&path)
                } else {
                    std::fs::create_dir(&path)
                };
                result?;
                self.confine(mount, &std::fs::canonicalize(&path)?)
            }
        }
    }

    /// What a path is, following a last symbolic link when `follow`.
    pub fn metadata(&self, path: &str, follow: bool) -> Result<Meta, FsError> {
        match self.locate(path, follow)? {
            Location::Memory(path) => {
                let len = self.memory_files().get(&path).map(Vec::len);
                if let Some(len) = len {
                    return Ok(Meta {
                        kind: Kind::File,
                        mode: 0o644,
                        len: len as u64,
                    });
                }
                if self.memory_dir(&path) {
                    Ok(Meta {
                        kind: Kind::Dir,
                        mode: 0o755,
                        len: 4096,
                    })
                } else {
                    Err(FsError::NotFound)
                }
            }
            Location::Host { mount, path } => {
                let meta = std::fs::symlink_metadata(&path)?;
                let real = match path.parent() {
                    Some(parent) if meta.file_type().is_symlink() => {
                        std::fs::canonicalize(parent)?.join(path.file_name().unwrap_or_default())
                    }
                    _ => std::fs::canonicalize(&path)?,
                };
                self.confine(mount, &real)?;
                let kind = if meta.file_type().is_symlink() {
                    Kind::Symlink
                } else if meta.is_dir() {
                    Kind::Dir
                } else {
                    Kind::File
                };
                Ok(Meta {
                    kind,
                    mode: meta.permissions().mode() & 0o7777,
                    len: meta.len(),
                })
            }
        }
    }

    /// The names in a directory, sorted bytewise, with the mount points
    /// under it; `None` when `path` is not a directory.
    pub fn list(&self, path: &str) -> Result<Option<Vec<String>>, FsError> {
        let mut names = BTreeSet::new();
        let (container_path, location) = {
            let location = self.locate(path, true)?;
            let at = match &location {
                Location::Memory(path) => path.clone(),
                Location::Host { mount, path } => {
                    let rest = path
                        .strip_prefix(&self.mounts[*mount].host_path)
                        .unwrap_or(Path::new(""));
                    let rest: Vec<String> = rest
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                    join(&self.mounts[*mount].container_path, &rest)
                }
            };
            (at, location)
        };
        match location {
            Location::Memory(path) => {
                if self.memory_files().contains_key(&path) {
                    return Ok(None);
                }
                if !self.memory_dir(&path) {
                    return Err(FsError::NotFound);
                }
                let prefix = dir_prefix(&path);
                for name in self.memory_files().keys() {
                    if let Some(rest) = name.strip_prefix(&prefix) {
                        names.insert(rest.split('/').next().unwrap_or(rest).to_owned());
                    }
                }
            }
            Location::Host { mount, path } => {
                self.confine(mount, &std::fs::canonicalize(&path)?)?;
                if !std::fs::metadata(&path)?.is_dir() {
                    return Ok(None);
                }
                for entry in std::fs::read_dir(&path)? {
                    names.insert(entry?.file_name().to_string_lossy().into_owned());
                }
            }
        }
        // Mount points show in their parent directory.
        let prefix = dir_prefix(&container_path);
        for mount in self.mounts.iter() {
            if let Some(rest) = mount.container_path.strip_prefix(&prefix)
                && !rest.is_empty()
            {
                names.insert(rest.split('/').next().unwrap_or(rest).to_owned());
            }
        }
        Ok(Some(names.into_iter().collect()))
    }

    /// Whether an in-memory path is a directory: a well-known one, the parent
    /// of a file, or of a mount point.
    fn memory_dir(&self, path: &str) -> bool {
        let prefix = dir_prefix(path);
        ROOT_DIRS.contains(&path)
            || self.memory_files().keys().any(|k| k.starts_with(&prefix))
            || self
                .mounts
                .iter()
                .any(|m| m.container_path.starts_with(&prefix))
    }
}

/// `path` with a trailing `/` (`/` stays `/`).
fn dir_prefix(path: &str) -> String {
    if path.ends_with('/') {
        path.to_owned()
    } else {
        format!("{path}/")
    }
}

/// The rest of `path` below `dir` (`""` for `dir` itself), or `None` when
/// `path` is not `dir` or under it. Both normalized.
fn rest_under<'p>(path: &'p str, dir: &str) -> Option<&'p str> {
    if dir == "/" {
        return Some(path.trim_start_matches('/'));
    }
    match path.strip_prefix(dir)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

/// `dir` joined with `parts`.
fn join(dir: &str, parts: &[&str]) -> String {
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

    #[test]
    fn memory_files_and_dirs() {
        let fs = FileSystem::default();
        fs.write("/tmp/a/b", b"x", false).unwrap();
        fs.write("/tmp/a/b", b"y", true).unwrap();
        assert_eq!(fs.read("/tmp/a/b").unwrap(), b"xy");
        assert!(matches!(fs.read("/tmp/a"), Err(FsError::IsADirectory)));
        assert_eq!(fs.metadata("/tmp/a", true).unwrap().kind, Kind::Dir);
        assert_eq!(fs.list("/tmp").unwrap(), Some(vec!["a".to_owned()]));
        assert!(matches!(
            fs.remove("/tmp/a", false),
            Err(FsError::IsADirectory)
        ));
        fs.remove("/tmp/a", true).unwrap();
        assert!(matches!(fs.read("/tmp/a/b"), Err(FsError::NotFound)));
    }

    #[test]
    fn mounts_map_to_host_paths_and_stay_confined() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("vol");
        std::fs::create_dir_all(vol.join("..2024_01_01")).unwrap();
        std::fs::write(vol.join("..2024_01_01/key"), "value").unwrap();
        std::os::unix::fs::symlink("..2024_01_01", vol.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/key", vol.join("key")).unwrap();
        std::fs::write(dir.path().join("secret"), "host").unwrap();
        std::os::unix::fs::symlink("../secret", vol.join("up")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", vol.join("abs")).unwrap();
        std::os::unix::fs::symlink("loop", vol.join("loop")).unwrap();
        let fs = FileSystem::new(vec![Mount::new("/etc/cfg", &vol, true)]);
        assert_eq!(fs.read("/etc/cfg/key").unwrap(), b"value");
        assert_eq!(fs.read("/etc/cfg/..data/key").unwrap(), b"value");
        assert!(matches!(
            fs.read("/etc/cfg/up"),
            Err(FsError::Escapes { .. })
        ));
        assert!(matches!(
            fs.read("/etc/cfg/abs"),
            Err(FsError::Escapes { .. })
        ));
        assert!(matches!(fs.read("/etc/cfg/loop"), Err(FsError::Loop)));
        assert!(matches!(
            fs.read("/etc/cfg/../cfg/nope"),
            Err(FsError::NotFound)
        ));
        assert!(matches!(
            fs.write("/etc/cfg/new", b"x", false),
            Err(FsError::ReadOnly)
        ));
        assert_eq!(
            fs.list("/etc/cfg").unwrap().unwrap(),
            ["..2024_01_01", "..data", "abs", "key", "loop", "up"]
        );
        assert_eq!(fs.list("/etc").unwrap().unwrap(), ["cfg"]);
        assert_eq!(
            fs.metadata("/etc/cfg/key", false).unwrap().kind,
            Kind::Symlink
        );
        assert_eq!(fs.metadata("/etc/cfg/key", true).unwrap().kind, Kind::File);
        assert_eq!(fs.metadata("/etc/cfg", true).unwrap().kind, Kind::Dir);
    }

    #[test]
    fn writes_through_a_writable_mount() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystem::new(vec![Mount::new("/data", dir.path(), false)]);
        fs.write("/data/f", b"one\n", false).unwrap();
        fs.write("/data/f", b"two\n", true).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"one\ntwo\n");
        fs.mkdir("/data/a/b", true).unwrap();
        fs.touch("/data/a/b/t").unwrap();
        assert!(dir.path().join("a/b/t").is_file());
        fs.remove("/data/a", true).unwrap();
        assert!(!dir.path().join("a").exists());
        assert!(fs.remove("/data", true).is_err(), "the mount point is busy");
    }
}

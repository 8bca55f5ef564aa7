//! What a container's processes see of files: the CRI mounts, which show
//! host paths at container paths (resolved and confined by `mounts`), and an
//! in-memory set for every other path. Nothing outside a mount's host path
//! is ever read, and nothing outside a writable mount's host path written.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::fs_types::{OVERLAY_TYPE, busybox_fs_name, statfs_magic};
use super::mounts::{Location, Mount, Mounts, dir_prefix, join, normalize, real_path};

/// The in-memory files of a container (path → content), for paths under no
/// mount. Shared by the main process and every exec in the container, so an
/// exec probe sees the files the main process created.
pub type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// Directories every container has, though no file was written in them.
const ROOT_DIRS: &[&str] = &[
    "/",
    "/tmp",
    "/dev",
    "/etc",
    "/proc",
    "/root",
    "/var",
    "/run",
    "/bin",
    "/sbin",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/home",
    "/sys",
    "/lib",
];

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

/// A container's files: the in-memory set and the mounts. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct FileSystem {
    memory: Files,
    /// In-memory directories made by `mkdir` (others exist as the parents of
    /// files): a file is created only in a directory that exists, as on Linux.
    dirs: Arc<Mutex<BTreeSet<String>>>,
    /// Permissions `chmod` (or a umask) gave in-memory files and directories.
    modes: Arc<Mutex<HashMap<String, u32>>>,
    mounts: Mounts,
    /// `readonly_rootfs`: in-memory paths refuse writes, except under `/dev`
    /// (a tmpfs in a real container).
    readonly_root: bool,
}

impl FileSystem {
    /// A file system with these mounts and an empty in-memory set;
    /// `readonly_root` as the security context's `readonly_rootfs`.
    pub fn new(mounts: Vec<Mount>, readonly_root: bool) -> Self {
        Self {
            memory: Files::default(),
            dirs: Arc::default(),
            modes: Arc::default(),
            mounts: Mounts::new(mounts),
            readonly_root,
        }
    }

    /// Places a file the runtime provides (containerd bind-mounts the sandbox's
    /// `/etc/resolv.conf` into every container), whatever `readonly_root` says.
    pub fn provide(&self, path: &str, content: Vec<u8>) {
        self.memory_files().insert(path.to_owned(), content);
    }

    /// Refuses a write to an in-memory path of a read-only root.
    fn writable_memory(&self, path: &str) -> Result<(), FsError> {
        if self.readonly_root && !path.starts_with("/dev/") {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// The mount at exactly `path` (a container path), if one is there.
    pub fn mount_at(&self, path: &str) -> Option<&Mount> {
        let path = normalize(path);
        self.mounts.iter().find(|m| m.container_path == path)
    }

    /// The in-memory files (the container's writable layer).
    pub fn memory(&self) -> &Files {
        &self.memory
    }

    fn memory_files(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn memory_modes(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.modes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets a file's permission bits (`chmod`).
    pub fn chmod(&self, path: &str, mode: u32) -> Result<(), FsError> {
        match self.mounts.locate(path, true)? {
            Location::Memory(path) => {
                self.metadata(&path, true)?;
                self.writable_memory(&path)?;
                self.memory_modes().insert(path, mode & 0o7777);
                Ok(())
            }
            Location::Host { mount, path } => {
                self.mounts.writable(mount)?;
                self.mounts.confine(mount, &real_path(&path)?)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))?;
                Ok(())
            }
        }
    }

    /// The type of the file system a path is on, as busybox's `stat -f -c %T`
    /// names it: a mount's is the host's (statfs(2) of its host path); the
    /// container's own files are on an overlay, `/dev` on a tmpfs.
    pub fn fs_type(&self, path: &str) -> Result<String, FsError> {
        self.metadata(path, true)?;
        match self.mounts.locate(path, true)? {
            Location::Memory(path) => Ok(if path == "/dev" || path.starts_with("/dev/") {
                "tmpfs"
            } else if path == "/proc" || path.starts_with("/proc/") {
                "proc"
            } else if path == "/sys" || path.starts_with("/sys/") {
                "sysfs"
            } else {
                OVERLAY_TYPE
            }
            .to_owned()),
            Location::Host { mount, path } => {
                self.mounts.confine(mount, &real_path(&path)?)?;
                let magic = statfs_magic(&path)?;
                Ok(busybox_fs_name(magic).to_owned())
            }
        }
    }

    fn memory_dirs(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the directory an in-memory path would be created in exists.
    fn parent_exists(&self, path: &str) -> bool {
        match path.trim_end_matches('/').rsplit_once('/') {
            Some(("", _)) | None => true,
            Some((parent, _)) => self.memory_dir(parent),
        }
    }

    /// The content of a file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, FsError> {
        match self.mounts.locate(path, true)? {
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
                self.mounts.confine_open(mount, &file)?;
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
        match self.mounts.locate(path, true)? {
            Location::Memory(path) => {
                self.writable_memory(&path)?;
                let exists = self.memory_files().contains_key(&path);
                if self.memory_dir(&path) && !exists {
                    return Err(FsError::IsADirectory);
                }
                if !exists && !self.parent_exists(&path) {
                    return Err(FsError::NotFound);
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
                self.mounts.writable(mount)?;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(append)
                    .write(true)
                    .truncate(!append)
                    .open(&path)?;
                self.mounts.confine_open(mount, &file)?;
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
        match self.mounts.locate(path, false)? {
            Location::Memory(path) => {
                self.writable_memory(&path)?;
                let mut files = self.memory_files();
                let prefix = format!("{}/", path.trim_end_matches('/'));
                let before = files.len();
                files.retain(|name, _| *name != path && !(recursive && name.starts_with(&prefix)));
                let mut dirs = self.memory_dirs();
                let dirs_before = dirs.len();
                if recursive {
                    dirs.retain(|name| *name != path && !name.starts_with(&prefix));
                }
                self.memory_modes()
                    .retain(|name, _| *name != path && !name.starts_with(&prefix));
                if files.len() != before || dirs.len() != dirs_before {
                    Ok(())
                } else if files.keys().any(|name| name.starts_with(&prefix)) {
                    Err(FsError::IsADirectory)
                } else {
                    Err(FsError::NotFound)
                }
            }
            Location::Host { mount, path } => {
                self.mounts.writable(mount)?;
                if path == self.mounts.get(mount).host_path {
                    // The mount point itself is busy, as on Linux.
                    return Err(FsError::Busy);
                }
                let parent = path.parent().unwrap_or(&path);
                self.mounts.confine(mount, &real_path(parent)?)?;
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

    /// The target of a symbolic link, as written in it (only mounts hold
    /// links; an in-memory path is never one).
    pub fn read_link(&self, path: &str) -> Result<String, FsError> {
        match self.mounts.locate(path, false)? {
            Location::Memory(path) => Err(match self.metadata(&path, false) {
                Ok(_) => FsError::Io(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
                Err(error) => error,
            }),
            Location::Host { mount, path } => {
                let parent = path.parent().unwrap_or(&path);
                self.mounts.confine(mount, &real_path(parent)?)?;
                Ok(std::fs::read_link(&path)?.to_string_lossy().into_owned())
            }
        }
    }

    /// Creates a directory (with its parents when `parents`); in memory,
    /// directories exist implicitly.
    pub fn mkdir(&self, path: &str, parents: bool) -> Result<(), FsError> {
        match self.mounts.locate(path, true)? {
            Location::Memory(path) => {
                self.writable_memory(&path)?;
                let path = path.trim_end_matches('/').to_owned();
                if self.memory_dir(&path) || self.memory_files().contains_key(&path) {
                    return if parents {
                        Ok(())
                    } else {
                        Err(FsError::Exists)
                    };
                }
                if !parents && !self.parent_exists(&path) {
                    return Err(FsError::NotFound);
                }
                let mut dirs = self.memory_dirs();
                let mut dir = path.as_str();
                while !dir.is_empty() {
                    dirs.insert(dir.to_owned());
                    dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
                }
                Ok(())
            }
            Location::Host { mount, path } => {
                self.mounts.writable(mount)?;
                let result = if parents {
                    std::fs::create_dir_all(&path)
                } else {
                    std::fs::create_dir(&path)
                };
                result?;
                self.mounts.confine(mount, &real_path(&path)?)
            }
        }
    }

    /// What a path is, following a last symbolic link when `follow`.
    pub fn metadata(&self, path: &str, follow: bool) -> Result<Meta, FsError> {
        match self.mounts.locate(path, follow)? {
            Location::Memory(path) => {
                let len = self.memory_files().get(&path).map(Vec::len);
                let mode = self.memory_modes().get(&path).copied();
                if let Some(len) = len {
                    return Ok(Meta {
                        kind: Kind::File,
                        mode: mode.unwrap_or(0o644),
                        len: len as u64,
                    });
                }
                if self.memory_dir(&path) {
                    // busybox's image: /tmp is world-writable and sticky.
                    let default = if path == "/tmp" { 0o1777 } else { 0o755 };
                    Ok(Meta {
                        kind: Kind::Dir,
                        mode: mode.unwrap_or(default),
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
                        real_path(parent)?.join(path.file_name().unwrap_or_default())
                    }
                    _ => real_path(&path)?,
                };
                self.mounts.confine(mount, &real)?;
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
            let location = self.mounts.locate(path, true)?;
            let at = match &location {
                Location::Memory(path) => path.clone(),
                Location::Host { mount, path } => {
                    let rest = path
                        .strip_prefix(&self.mounts.get(*mount).host_path)
                        .unwrap_or(Path::new(""));
                    let rest: Vec<String> = rest
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                    join(&self.mounts.get(*mount).container_path, &rest)
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
                self.mounts.confine(mount, &real_path(&path)?)?;
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
            || self
                .memory_dirs()
                .iter()
                .any(|d| d == path || d.starts_with(&prefix))
            || self.memory_files().keys().any(|k| k.starts_with(&prefix))
            || self
                .mounts
                .iter()
                .any(|m| m.container_path.starts_with(&prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_and_dirs() {
        let fs = FileSystem::default();
        assert!(matches!(
            fs.write("/tmp/a/b", b"x", false),
            Err(FsError::NotFound)
        ));
        fs.mkdir("/tmp/a", false).unwrap();
        assert!(matches!(fs.mkdir("/tmp/a", false), Err(FsError::Exists)));
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
        let fs = FileSystem::new(vec![Mount::new("/etc/cfg", &vol, true)], false);
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
        let fs = FileSystem::new(vec![Mount::new("/data", dir.path(), false)], true);
        // A read-only root: only mounts (and /dev) take writes.
        assert!(matches!(fs.touch("/tmp/x"), Err(FsError::ReadOnly)));
        fs.write("/dev/termination-log", b"m", false).unwrap();
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

//! Where a volume's files live: the node's disk or memory (the kubelet's emptyDir
//! plugin and the memory-backed emptyDirs that the secret, downward-API and projected
//! plugins wrap).
//!
//! A memory-backed volume is a tmpfs mounted at the volume's directory, sized as
//! `calculateEmptyDirMemorySize` sizes it (`SizeMemoryBackedVolumes`, on by default
//! since 1.22): the node's allocatable memory, or the pod's memory limit when every
//! container declares one and it is smaller, or the emptyDir's `sizeLimit` when that is
//! smaller still. A container sees the mount because its runtime bind-mounts the
//! directory from the agent's mount namespace, so the agent and the runtime must share
//! one — a node's, as a kubelet's. An agent inside a process that shares its host's
//! mounts (the reference agent in a test binary) keeps them as plain directories
//! instead ([`MemoryMedium::Disk`]) and says so.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::resource::{self, List};

/// What the agent does with volumes whose medium is memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryMedium {
    /// A tmpfs at the volume's directory, as the kubelet mounts it (needs
    /// `CAP_SYS_ADMIN` and a mount namespace the runtime shares).
    Tmpfs,
    /// A plain directory on the node's disk: no size limit, and the files reach the
    /// disk. For an agent that must not mount on its host.
    #[default]
    Disk,
}

/// Where one volume's files live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Medium {
    /// A directory on the node's disk.
    Disk,
    /// A tmpfs of at most `size` bytes (the kernel's default, half the memory, when
    /// nothing bounds it).
    Memory { size: Option<u64> },
}

/// The medium of `volume` (one of `pod`'s, on a node whose allocatable is `allocatable`)
/// when memory-backed volumes are `memory`.
pub(super) fn of(
    volume: &Volume,
    pod: &Pod,
    allocatable: Option<&List>,
    memory: MemoryMedium,
) -> Medium {
    let size_limit = match &volume.empty_dir {
        Some(dir) if dir.medium.as_deref() == Some("Memory") => dir.size_limit.as_ref(),
        Some(_) => return Medium::Disk,
        None if volume.secret.is_some()
            || volume.downward_api.is_some()
            || volume.projected.is_some() =>
        {
            None
        }
        None => return Medium::Disk,
    };
    if memory == MemoryMedium::Disk {
        return Medium::Disk;
    }
    let bytes = |q| u64::try_from(resource::amount_of("memory", q)).unwrap_or(0);
    // `calculateEmptyDirMemorySize`: each bound replaces the size when it is positive
    // and not larger.
    let mut size = allocatable.and_then(|a| a.get("memory")).map(bytes);
    let mut bound = |value: u64| {
        if value > 0 && size.is_none_or(|s| value <= s) {
            size = Some(value);
        }
    };
    let limits = nodeconform_resource::pod::limits(pod);
    if limits.memory_declared
        && let Some(limit) = limits.list.get("memory")
    {
        bound(bytes(limit));
    }
    if let Some(limit) = size_limit {
        bound(bytes(limit));
    }
    Medium::Memory { size }
}

/// Mounts a tmpfs of `size` bytes at `dir` unless one is mounted there already (the
/// volume is being refreshed: `SetUp` is idempotent).
pub(super) fn mount_tmpfs(dir: &Path, size: Option<u64>) -> std::io::Result<()> {
    if is_mount_point(dir)? {
        return Ok(());
    }
    let target = c_path(dir)?;
    let options = CString::new(match size {
        Some(bytes) => format!("size={bytes}"),
        None => String::new(),
    })
    .map_err(std::io::Error::other)?;
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            // No flags and no mode, as the kubelet mounts it: the root is 1777.
            0,
            options.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Unmounts every volume directory under `pod_dir/volumes` that is a mount point, so
/// that removing the pod's directory removes only what is on disk.
pub(super) fn unmount_volumes(pod_dir: &Path) -> std::io::Result<()> {
    let plugins = match std::fs::read_dir(pod_dir.join("volumes")) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for plugin in plugins {
        for volume in std::fs::read_dir(plugin?.path())? {
            let dir = volume?.path();
            if dir.is_dir() && is_mount_point(&dir)? {
                let target = c_path(&dir)?;
                // SAFETY: umount2(2) with a NUL-terminated path. Detached: a container
                // that is still being torn down may hold a file open in it.
                if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
    }
    Ok(())
}

/// Whether `dir` is on another filesystem than its parent.
fn is_mount_point(dir: &Path) -> std::io::Result<bool> {
    let own = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let parent = std::fs::metadata(dir.join(".."))?;
    Ok(own.dev() != parent.dev())
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, EmptyDirVolumeSource, PodSpec, ResourceRequirements, SecretVolumeSource,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const MI: u64 = 1 << 20;

    fn pod(memory_limits: &[Option<&str>]) -> Pod {
        let containers = memory_limits
            .iter()
            .enumerate()
            .map(|(i, limit)| Container {
                name: format!("c{i}"),
                resources: limit.map(|l| ResourceRequirements {
                    limits: Some([("memory".to_owned(), Quantity(l.to_owned()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        Pod {
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn empty_dir(medium: Option<&str>, size_limit: Option<&str>) -> Volume {
        Volume {
            name: "v".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: medium.map(str::to_owned),
                size_limit: size_limit.map(|s| Quantity(s.to_owned())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn memory_volumes_are_sized_by_the_smallest_positive_bound() {
        let node: List = [("memory".to_owned(), Quantity("1Gi".into()))].into();
        let at = |v: &Volume, p: &Pod| of(v, p, Some(&node), MemoryMedium::Tmpfs);
        let memory = |size| Medium::Memory { size: Some(size) };
        // The upstream test's volume: 10Mi.
        let sized = empty_dir(Some("Memory"), Some("10Mi"));
        assert_eq!(at(&sized, &pod(&[None])), memory(10 * MI));
        // A pod limit below the sizeLimit wins; one above it does not.
        assert_eq!(at(&sized, &pod(&[Some("5Mi")])), memory(5 * MI));
        assert_eq!(at(&sized, &pod(&[Some("64Mi")])), memory(10 * MI));
        // Unbounded: the pod's limit only when every container declares one.
        let unbounded = empty_dir(Some("Memory"), None);
        assert_eq!(at(&unbounded, &pod(&[Some("64Mi")])), memory(64 * MI));
        assert_eq!(
            at(&unbounded, &pod(&[Some("64Mi"), None])),
            memory(1024 * MI)
        );
        // A sizeLimit above the node's memory does not raise it.
        assert_eq!(
            at(&empty_dir(Some("Memory"), Some("2Gi")), &pod(&[None])),
            memory(1024 * MI)
        );
        // Secrets are memory-backed; a default emptyDir is not.
        let secret = Volume {
            name: "s".into(),
            secret: Some(SecretVolumeSource::default()),
            ..Default::default()
        };
        assert_eq!(at(&secret, &pod(&[None])), memory(1024 * MI));
        assert_eq!(at(&empty_dir(None, None), &pod(&[None])), Medium::Disk);
        // Without a node yet, the kernel's default bounds an unbounded tmpfs.
        assert_eq!(
            of(&unbounded, &pod(&[None]), None, MemoryMedium::Tmpfs),
            Medium::Memory { size: None }
        );
        assert_eq!(
            of(&sized, &pod(&[None]), Some(&node), MemoryMedium::Disk),
            Medium::Disk
        );
    }
}

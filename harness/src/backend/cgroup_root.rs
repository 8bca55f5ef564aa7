//! A node's own cgroup root, made before its agent starts and removed after it stops.
//!
//! The kubelet keeps a cgroup per QoS class and per pod (`cgroupsPerQOS`) and actuates an
//! in-place resize through the pod's cgroup: without them a 1.36 kubelet cannot resize a
//! pod (it dereferences the missing pod cgroup's memory limit). Kubelets side by side
//! must not share the hierarchy — each removes the pod cgroups of pods it does not know —
//! so each gets `cgroupRoot: /nodeconform-<node>`. The kubelet only writes limits there:
//! fake-cri runs no processes, so no task ever joins these cgroups and they can be
//! removed, deepest first, once the kubelet has exited.
//!
//! The root is made in every cgroup v1 hierarchy, or in the cgroup v2 hierarchy when that
//! is the only one (a hybrid host's `unified` mount is left to the kubelet). Removal walks
//! every cgroup mount.

use std::path::{Path, PathBuf};

/// One node's cgroup root in every hierarchy; removed when dropped.
#[derive(Debug)]
pub struct CgroupRoot {
    /// The root as the kubelet's `cgroupRoot` names it (`/nodeconform-<node>`).
    name: String,
    /// The cgroup mount points it was looked for in.
    mounts: Vec<PathBuf>,
}

/// A cgroup filesystem mount: its mount point and whether it is cgroup v2.
fn cgroup_mounts() -> std::io::Result<Vec<(PathBuf, bool)>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mountinfo.lines().filter_map(parse_mount).collect())
}

/// A `/proc/self/mountinfo` line's mount point if it is a cgroup filesystem: the fifth
/// field, and after the ` - ` separator the filesystem type.
fn parse_mount(line: &str) -> Option<(PathBuf, bool)> {
    let (fields, after) = line.split_once(" - ")?;
    let point = fields.split(' ').nth(4)?;
    let v2 = match after.split(' ').next()? {
        "cgroup" => false,
        "cgroup2" => true,
        _ => return None,
    };
    // Octal escapes (`\040` for a space) are left as they are: such a mount is not
    // one a kubelet uses.
    Some((PathBuf::from(point), v2))
}

impl CgroupRoot {
    /// Makes `/nodeconform-<node>` in the hierarchies the kubelet will use.
    pub fn create(node: &str) -> std::io::Result<Self> {
        let mounts = cgroup_mounts()?;
        let name = format!("/nodeconform-{node}");
        let v1 = mounts.iter().any(|(_, v2)| !v2);
        let mut made = CgroupRoot {
            name,
            mounts: mounts.iter().map(|(p, _)| p.clone()).collect(),
        };
        let targets = mounts.iter().filter(|(_, v2)| !v1 || !v2);
        let mut any = false;
        for (point, _) in targets {
            std::fs::create_dir_all(made.path_in(point))?;
            any = true;
        }
        if !any {
            made.mounts.clear();
            return Err(std::io::Error::other("no cgroup filesystem is mounted"));
        }
        Ok(made)
    }

    /// The kubelet's `cgroupRoot`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SIGKILLs every process left in the root's cgroups (a node's containers, when its
    /// runtime ended without stopping them), a few rounds while processes fork.
    pub fn kill_all(&self) {
        fn pids(dir: &Path, out: &mut Vec<i32>) {
            if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
            if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        pids(&entry.path(), out);
                    }
                }
            }
        }
        for _ in 0..5 {
            let mut found = Vec::new();
            for mount in &self.mounts {
                pids(&self.path_in(mount), &mut found);
            }
            if found.is_empty() {
                return;
            }
            for pid in found {
                // SAFETY: kill(2) of a process in this node's own cgroups.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn path_in(&self, mount: &Path) -> PathBuf {
        mount.join(self.name.trim_start_matches('/'))
    }
}

/// Removes `dir` and the cgroups below it, deepest first (a cgroup directory is removed
/// with rmdir; its control files go with it).
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    if let Err(error) = std::fs::remove_dir(dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(cgroup = %dir.display(), %error, "could not remove a node's cgroup");
    }
}

impl Drop for CgroupRoot {
    fn drop(&mut self) {
        for mount in &self.mounts {
            remove_tree(&self.path_in(mount));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let v1 = "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory";
        assert_eq!(
            parse_mount(v1),
            Some((PathBuf::from("/sys/fs/cgroup/memory"), false))
        );
        let v2 = "30 25 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(
            parse_mount(v2),
            Some((PathBuf::from("/sys/fs/cgroup"), true))
        );
        let other = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw";
        assert_eq!(parse_mount(other), None);
    }
}

//! The cgroup hierarchies this process sees (`/proc/self/mountinfo`) and how a cgroup's
//! directory is made in each.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::Error;

/// The controllers a pod's cgroup is made in on cgroup v1: the ones its values are
/// written to, and `pids`, which the kubelet limits too. runc makes the rest below them.
const V1_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone)]
pub(super) struct Hierarchy {
    /// Its mount point.
    mount: PathBuf,
    /// cgroup v1: the controllers it has (`cpu`, `cpuacct`); empty for a named one.
    /// cgroup v2: `None`.
    controllers: Option<Vec<String>>,
    /// Whether pods' cgroups are made and sized here (else only removed from it).
    pub(super) writes: bool,
}

/// A mountinfo line's cgroup mount: its point, and for cgroup v1 its controllers (from
/// the super options after the ` - ` separator).
fn parse(line: &str) -> Option<(PathBuf, Option<Vec<String>>)> {
    let (fields, after) = line.split_once(" - ")?;
    let point = fields.split(' ').nth(4)?;
    let mut after = after.split(' ');
    let controllers = match after.next()? {
        "cgroup" => Some(
            after
                .nth(1)?
                .split(',')
                .filter(|o| !o.contains('=') && !matches!(*o, "rw" | "ro"))
                .map(str::to_owned)
                .collect(),
        ),
        "cgroup2" => None,
        _ => return None,
    };
    Some((PathBuf::from(point), controllers))
}

/// Every cgroup hierarchy mounted. The v1 ones with a controller the pods' cgroups need
/// are written; a v2 one only when it is the only kind (not a hybrid host's `unified`).
pub(super) fn hierarchies() -> std::io::Result<Vec<Hierarchy>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mounts: Vec<(PathBuf, Option<Vec<String>>)> = mountinfo.lines().filter_map(parse).collect();
    let v1 = mounts.iter().any(|(_, c)| c.is_some());
    Ok(mounts
        .into_iter()
        .map(|(mount, controllers)| {
            let writes = match &controllers {
                Some(list) => list.iter().any(|c| V1_CONTROLLERS.contains(&c.as_str())),
                None => !v1,
            };
            Hierarchy {
                mount,
                controllers,
                writes,
            }
        })
        .collect())
}

impl Hierarchy {
    /// The directory of cgroup `name` (`/a/b`) here.
    pub(super) fn path_of(&self, name: &str) -> PathBuf {
        self.mount.join(name.trim_start_matches('/'))
    }

    /// Whether this is the v1 hierarchy of `controller`.
    pub(super) fn has(&self, controller: &str) -> bool {
        self.controllers
            .as_ref()
            .is_some_and(|c| c.iter().any(|c| c == controller))
    }

    /// Whether this is the cgroup v2 hierarchy.
    pub(super) fn is_v2(&self) -> bool {
        self.controllers.is_none()
    }

    /// Makes cgroup `name` (and its parents) here if pods' cgroups are written here. On
    /// cgroup v2 each level first lets its children use the controllers the values need.
    pub(super) fn ensure(&self, name: &str) -> Result<(), Error> {
        if !self.writes {
            return Ok(());
        }
        let io = |what, path: &Path| {
            let path = path.to_owned();
            move |source| Error::Io {
                cgroup: name.to_owned(),
                what,
                path,
                source,
            }
        };
        if !self.is_v2() {
            let path = self.path_of(name);
            return std::fs::create_dir_all(&path).map_err(io("making", &path));
        }
        let mut path = self.mount.clone();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            let control = path.join("cgroup.subtree_control");
            for controller in ["+cpu", "+memory", "+pids"] {
                // A controller the kernel lacks, or one already enabled, is not an error
                // here; a value written to a missing controller's file is, below.
                let _ = std::fs::write(&control, controller);
            }
            path.push(part);
            match std::fs::create_dir(&path) {
                Err(e) if e.kind() != ErrorKind::AlreadyExists => {
                    return Err(io("making", &path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The names of the subdirectories of cgroup `name` in any of `hierarchies`.
pub(super) fn children(hierarchies: &[Hierarchy], name: &str) -> Vec<String> {
    hierarchies
        .iter()
        .filter(|h| h.writes)
        .filter_map(|h| std::fs::read_dir(h.path_of(name)).ok())
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            entry
                .file_type()
                .ok()?
                .is_dir()
                .then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_cgroup_mounts() {
        let v1 = "35 26 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct";
        assert_eq!(
            parse(v1),
            Some((
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
                Some(vec!["cpu".to_owned(), "cpuacct".to_owned()])
            ))
        );
        let named = "30 26 0:26 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd";
        assert_eq!(
            parse(named).and_then(|(_, c)| c),
            Some(vec!["xattr".to_owned()])
        );
        let v2 = "25 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(parse(v2), Some((PathBuf::from("/sys/fs/cgroup"), None)));
        assert_eq!(parse("22 1 0:21 / /proc rw - proc proc rw"), None);
    }
}

//! A kubelet's own view of the host paths it cannot be told to leave alone.
//!
//! Kubelets before 1.31 write pod logs to `/var/log/pods` with links in
//! `/var/log/containers`, and remove there the log directories of pods they do
//! not know — other kubelets' pods, when several run side by side. Their device
//! manager empties `/var/lib/kubelet/device-plugins` at start. So each kubelet
//! the harness starts gets a mount namespace of its own ([`HostPaths::apply`]):
//! `/` is made recursively private (nothing it mounts reaches the host, and
//! nothing it leaves mounted outlives it), the node's `var-log` directory is
//! bind-mounted over `/var/log`, and `/var/lib` is an overlay of itself with
//! the upper and work directories in the node's `var-lib` directory, so
//! `/var/lib/kubelet` is the node's own without being created on the host.
//! The mounts go away with the namespace when the kubelet exits.
//!
//! fake-cri, in the harness's namespace, reaches the kubelet's paths through
//! the kubelet's root (`FakeCri::set_host_root_to_process`).

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The node directories the kubelet's host paths are made of, below its directory.
const VAR_LOG: &str = "var-log";
const VAR_LIB_UPPER: &str = "var-lib/upper";
const VAR_LIB_WORK: &str = "var-lib/work";

/// Why a kubelet's host paths cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A directory of the node could not be created.
    #[error("creating {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The path cannot be passed to `mount(2)`: a NUL byte, or for the
    /// overlay's options a `,`, `:` or `\`.
    #[error("{} cannot be passed to mount(2) (NUL, ',', ':' or '\\' in it)", path.display())]
    Unmountable {
        /// The path.
        path: PathBuf,
    },
}

/// The mounts that give one kubelet its own `/var/log` and `/var/lib`, prepared
/// before the kubelet is forked: its `pre_exec` may only make system calls.
#[derive(Debug)]
pub struct HostPaths {
    steps: Vec<Step>,
}

/// One system call of the set-up and what to print if it fails.
#[derive(Debug)]
enum Step {
    Unshare {
        what: CString,
    },
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
        what: CString,
    },
}

impl HostPaths {
    /// Creates the node's directories under `dir` (the kubelet's directory)
    /// and prepares the mounts.
    pub fn prepare(dir: &Path) -> Result<Self, Error> {
        let var_log = dir.join(VAR_LOG);
        let upper = dir.join(VAR_LIB_UPPER);
        let work = dir.join(VAR_LIB_WORK);
        for path in [&var_log, &upper, &work] {
            std::fs::create_dir_all(path).map_err(|source| Error::CreateDir {
                path: path.clone(),
                source,
            })?;
        }
        let options = format!(
            "lowerdir=/var/lib,upperdir={},workdir={}",
            overlay_option(&upper)?,
            overlay_option(&work)?
        );
        let c = |s: &str| CString::new(s).unwrap_or_default();
        Ok(Self {
            steps: vec![
                Step::Unshare {
                    what: c("unshare(CLONE_NEWNS)"),
                },
                Step::Mount {
                    source: None,
                    target: c("/"),
                    fstype: None,
                    flags: libc::MS_REC | libc::MS_PRIVATE,
                    data: None,
                    what: c("making / recursively private"),
                },
                Step::Mount {
                    source: Some(c_path(&var_log)?),
                    target: c("/var/log"),
                    fstype: None,
                    flags: libc::MS_BIND,
                    data: None,
                    what: c(&format!("bind-mounting {} on /var/log", var_log.display())),
                },
                Step::Mount {
                    source: Some(c("overlay")),
                    target: c("/var/lib"),
                    fstype: Some(c("overlay")),
                    flags: 0,
                    data: Some(c(&options)),
                    what: c(&format!("mounting an overlay on /var/lib ({options})")),
                },
            ],
        })
    }

    /// Also gives the namespace a `/run` of its own (an empty tmpfs): a runtime's pod
    /// network namespaces (`/run/netns`) and runc's state then end with it.
    #[must_use]
    pub fn with_private_run(mut self) -> Self {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        self.steps.push(Step::Mount {
            source: Some(c("tmpfs")),
            target: c("/run"),
            fstype: Some(c("tmpfs")),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            data: Some(c("mode=755")),
            what: c("mounting a tmpfs on /run"),
        });
        self
    }

    /// Makes `command` start in a mount namespace of its own with these mounts.
    /// When one fails the child prints which and why on its stderr and exits
    /// 127 without running the program, so the harness reports it as the
    /// agent's output.
    pub fn apply(self, command: &mut tokio::process::Command) {
        let steps = self.steps;
        // SAFETY: the closure runs in the forked child, where only
        // async-signal-safe calls are allowed: it makes system calls on
        // strings prepared above, writes to fd 2 and calls _exit.
        unsafe {
            command.pre_exec(move || {
                for step in &steps {
                    if let Err(errno) = step.run() {
                        step.report(errno);
                        libc::_exit(127);
                    }
                }
                Ok(())
            });
        }
    }
}

impl Step {
    /// Makes the system call; the errno when it fails.
    fn run(&self) -> Result<(), i32> {
        let opt = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        // SAFETY: every pointer is NULL or a NUL-terminated string that lives
        // as long as `self`.
        let rc = unsafe {
            match self {
                Step::Unshare { .. } => libc::unshare(libc::CLONE_NEWNS),
                Step::Mount {
                    source,
                    target,
                    fstype,
                    flags,
                    data,
                    ..
                } => libc::mount(
                    opt(source),
                    target.as_ptr(),
                    opt(fstype),
                    *flags,
                    opt(data).cast(),
                ),
            }
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
    }

    /// Writes `nodeconform: <what> failed: errno <n>` to fd 2, allocating nothing.
    fn report(&self, errno: i32) {
        let (Step::Unshare { what } | Step::Mount { what, .. }) = self;
        let mut digits = [0u8; 12];
        let mut at = digits.len();
        let mut n = errno.unsigned_abs();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 || at == 0 {
                break;
            }
        }
        for part in [
            &b"nodeconform: giving a node its own mount namespace: "[..],
            what.as_bytes(),
            b" failed: errno ",
            &digits[at..],
            b"\n",
        ] {
            // SAFETY: write(2) of a valid buffer; a short or failed write
            // loses only the message.
            unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
        }
    }
}

/// Makes `command` start in the mount namespace of process `pid` (a node's runtime,
/// whose mounts its agent must see).
pub fn join(pid: u32, command: &mut tokio::process::Command) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, OwnedFd};
    let fd = OwnedFd::from(std::fs::File::open(format!("/proc/{pid}/ns/mnt"))?);
    // SAFETY: runs in the forked child before exec: setns(2) is async-signal-safe, and
    // the descriptor, moved into the closure, is open there.
    unsafe {
        command.pre_exec(move || {
            if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

fn c_path(path: &Path) -> Result<CString, Error> {
    CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Unmountable {
        path: path.to_owned(),
    })
}

/// A path as an overlay option value, which `,` ends and `:` separates.
fn overlay_option(path: &Path) -> Result<String, Error> {
    let text = path.to_str().filter(|t| !t.contains([',', ':', '\\']));
    text.map(str::to_owned).ok_or_else(|| Error::Unmountable {
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_made_and_odd_paths_refused() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::prepare(dir.path()).unwrap();
        assert_eq!(paths.steps.len(), 4);
        for sub in [VAR_LOG, VAR_LIB_UPPER, VAR_LIB_WORK] {
            assert!(dir.path().join(sub).is_dir(), "{sub}");
        }
        let odd = dir.path().join("a,b");
        assert!(matches!(
            HostPaths::prepare(&odd),
            Err(Error::Unmountable { .. })
        ));
    }
}

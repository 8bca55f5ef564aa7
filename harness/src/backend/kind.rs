//! The `kind` backend: `kind create cluster --name nodeconform-<random>`, its kubeconfig, and
//! `kind delete cluster` at the end — also after a failure, a panic (on drop) or Ctrl-C.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rand::RngExt;
use tokio::process::Command;

use super::{Error, Result, which};

/// A kind cluster this run created; deleted by [`KindCluster::delete`] or, failing that, on drop.
pub struct KindCluster {
    name: String,
    kind: PathBuf,
    kubeconfig: PathBuf,
    deleted: bool,
    _dir: tempfile::TempDir,
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl KindCluster {
    /// Creates the cluster and reads its kubeconfig; on any failure the cluster is deleted again.
    pub async fn create(progress: bool) -> Result<KindCluster> {
        let kind = which("kind").ok_or(Error::Missing {
            program: "kind",
            hint: "install it from https://kind.sigs.k8s.io/docs/user/quick-start/#installation",
        })?;
        if std::env::var_os("KIND_EXPERIMENTAL_PROVIDER").is_none()
            && which("docker").is_none()
            && which("podman").is_none()
        {
            return Err(Error::Missing {
                program: "docker",
                hint: "kind runs its nodes as Docker containers: install and start Docker (or use the embedded backend)",
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("nodeconform-kind")
            .tempdir()
            .map_err(|source| Error::Io {
                what: "creating a temporary directory for the kind kubeconfig".into(),
                source,
            })?;
        let name = format!("nodeconform-{}", random_suffix());
        let mut cluster = KindCluster {
            kubeconfig: dir.path().join("kubeconfig"),
            name,
            kind,
            deleted: false,
            _dir: dir,
        };
        match cluster.create_inner(progress).await {
            Ok(()) => Ok(cluster),
            Err(e) => {
                cluster.delete_inner().await;
                Err(e)
            }
        }
    }

    async fn create_inner(&mut self, progress: bool) -> Result<()> {
        let create_kubeconfig = self._dir.path().join("create.kubeconfig");
        let args = [
            "create",
            "cluster",
            "--name",
            &self.name,
            "--wait",
            "180s",
            "--kubeconfig",
            create_kubeconfig.to_str().unwrap_or_default(),
        ];
        let child = Command::new(&self.kind)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Io {
                what: format!("starting {}", self.kind.display()),
                source,
            })?;
        let output = child.wait_with_output();
        let output = if progress {
            with_progress(&format!("creating kind cluster {}", self.name), output).await
        } else {
            output.await
        }
        .map_err(|source| Error::Io {
            what: "running kind create cluster".into(),
            source,
        })?;
        if !output.status.success() {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return Err(Error::Command {
                command: format!("kind {}", args[..4].join(" ")),
                status: output.status.to_string(),
                output: tail(&text, 20),
            });
        }
        let out = Command::new(&self.kind)
            .args(["get", "kubeconfig", "--name", &self.name])
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| Error::Io {
                what: "running kind get kubeconfig".into(),
                source,
            })?;
        if !out.status.success() || out.stdout.is_empty() {
            return Err(Error::Command {
                command: format!("kind get kubeconfig --name {}", self.name),
                status: out.status.to_string(),
                output: tail(&String::from_utf8_lossy(&out.stderr), 20),
            });
        }
        write_private(&self.kubeconfig, &out.stdout).map_err(|source| Error::Io {
            what: format!("writing {}", self.kubeconfig.display()),
            source,
        })
    }

    /// The cluster name (`nodeconform-xxxxxx`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kubeconfig file for the cluster.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Deletes the cluster (`kind delete cluster --name …`).
    pub async fn delete(mut self) {
        self.delete_inner().await;
    }

    async fn delete_inner(&mut self) {
        if self.deleted {
            return;
        }
        self.deleted = true;
        let status = Command::new(&self.kind)
            .args(["delete", "cluster", "--name", &self.name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: `kind delete cluster --name {}` failed; delete it by hand",
                self.name
            );
        }
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if !self.deleted {
            self.deleted = true;
            let _ = std::process::Command::new(&self.kind)
                .args(["delete", "cluster", "--name", &self.name])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// Awaits `fut` while showing a spinner (terminal) or a line every 15 s (otherwise) on stderr.
async fn with_progress<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    let tty = std::io::stderr().is_terminal();
    let start = std::time::Instant::now();
    let mut fut = std::pin::pin!(fut);
    let mut tick = tokio::time::interval(Duration::from_millis(if tty { 120 } else { 15_000 }));
    const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    let mut frame = 0usize;
    loop {
        tokio::select! {
            out = &mut fut => {
                if tty {
                    eprint!("\r\x1b[2K");
                }
                eprintln!("{what}: done in {:.0}s", start.elapsed().as_secs_f64());
                return out;
            }
            _ = tick.tick() => {
                let secs = start.elapsed().as_secs();
                if tty {
                    eprint!("\r{} {what} … {secs}s", FRAMES[frame % FRAMES.len()]);
                    frame += 1;
                } else {
                    eprintln!("{what} … {secs}s");
                }
            }
        }
    }
}

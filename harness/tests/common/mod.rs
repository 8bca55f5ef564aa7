//! What the harness's tests share: running the `nodeconform` binary, and a running
//! `nodeconform up`.
#![allow(dead_code)] // Each test file uses its own share.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The bound on every wait.
pub const WAIT: Duration = Duration::from_secs(60);

/// Runs `nodeconform ARGS` in the crate's directory: exit code, stdout, stderr.
pub fn nodeconform(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("nodeconform runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `examples/stuck_agent` (registers a node, never runs a pod), built by `cargo test`
/// unless it was asked for one test target only; when it is missing, why (the caller's
/// test is then ignored with that reason).
pub fn stuck_agent() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().ok();
    exe.as_deref()
        .and_then(|e| e.parent()?.parent())
        .map(|dir| dir.join("examples/stuck_agent"))
        .filter(|p| p.exists())
        .ok_or_else(|| {
            "examples/stuck_agent is not built (`cargo test` without --test builds it)".into()
        })
}

/// A running `nodeconform up` and the lines it printed up to `export KUBECONFIG=…`.
pub struct Up {
    pub child: Child,
    pub lines: Vec<String>,
    pub kubeconfig: PathBuf,
}

/// Starts `nodeconform up ARGS` and reads its stdout until the kubeconfig line.
pub async fn up(args: &[&str]) -> Up {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .arg("up")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("nodeconform up starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let kubeconfig = tokio::time::timeout(WAIT, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            lines.push(line.clone());
            if let Some(path) = line.strip_prefix("export KUBECONFIG=") {
                return PathBuf::from(path);
            }
        }
        panic!("stdout ended before the kubeconfig line: {lines:?}");
    })
    .await
    .expect("kubeconfig line in time");
    // The rest of the summary.
    for _ in 0..2 {
        if let Ok(Ok(Some(line))) = tokio::time::timeout(WAIT, stdout.next_line()).await {
            lines.push(line);
        }
    }
    Up {
        child,
        lines,
        kubeconfig,
    }
}

impl Up {
    /// A client of the cluster.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Sends `signal` and waits for the exit code.
    pub async fn stop(mut self, signal: i32) -> i32 {
        let pid = self.child.id().expect("still running") as i32;
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits in time after the signal")
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

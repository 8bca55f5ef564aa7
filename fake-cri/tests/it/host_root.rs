//! A host root: the host paths of CRI requests (log directory and path,
//! mounts) taken from a directory as if the client were chrooted there, as
//! for a kubelet in a mount namespace of its own; the confinement of mounts
//! still holds; a root deferred until the client runs, or bound to a process.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Env, LIMIT, expect_code, read_log, script_config, stdout_lines};
use nodeconform_cri::v1;

/// A client's file system in a temporary directory: a volume laid out as the
/// kubelet's atomic writer does, reached through an absolute link that only
/// makes sense inside the root; and a secret next to the root.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("root");
        let data = root.join("pods/uid-1/volumes/cfg/..2026_11_26");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("key"), "value").unwrap();
        let vol = root.join("pods/uid-1/volumes/cfg");
        symlink("..2026_11_26", vol.join("..data")).unwrap();
        symlink("..data/key", vol.join("key")).unwrap();
        // Absolute and `..`-heavy links resolve inside the root, as in a chroot.
        symlink("/pods", root.join("pods-link")).unwrap();
        symlink("../../../../..", root.join("up")).unwrap();
        // Outside the root: never to be read.
        std::fs::write(dir.path().join("secret"), "HOST SECRET").unwrap();
        symlink("../../../../../secret", vol.join("escape")).unwrap();
        symlink("/secret", vol.join("absolute")).unwrap();
        Self { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// A path the client names, as it is in the root.
    fn under_root(&self, path: &str) -> PathBuf {
        self.root().join(path.trim_start_matches('/'))
    }
}

fn sandbox_config(name: &str) -> v1::PodSandboxConfig {
    // Under /var/log as a kubelet names it; a name no host has there.
    let logs = format!("/var/log/pods/nodeconform-host-root-test_{name}");
    common::sandbox_config(name, &logs)
}

fn with_mount(name: &str, script: &str, host_path: &str) -> v1::ContainerConfig {
    let mut config = script_config(name, script);
    config.mounts = vec![v1::Mount {
        container_path: "/etc/cfg".to_owned(),
        host_path: host_path.to_owned(),
        readonly: true,
        ..Default::default()
    }];
    config
}

/// Runs a container to its end: its status, with the log read from the root.
async fn run(env: &mut Env, sandbox: &str, config: v1::ContainerConfig) -> v1::ContainerStatus {
    let id = env.run_with(sandbox, config).await;
    env.wait_exit(&id, LIMIT).await
}

#[tokio::test]
async fn log_paths_and_mounts_are_taken_from_the_root() {
    let layout = Layout::new();
    let mut env = Env::start_with(|b| b.host_root(layout.root())).await;
    let sandbox = env
        .run_sandbox(sandbox_config("mapped"))
        .await
        .expect("RunPodSandbox");
    let log_dir = "/var/log/pods/nodeconform-host-root-test_mapped";
    assert!(layout.under_root(log_dir).is_dir());
    assert!(
        !Path::new(log_dir).exists(),
        "nothing on the host's /var/log"
    );

    let script = "cat /etc/cfg/key; cat /etc/cfg/..data/key";
    let status = run(
        &mut env,
        &sandbox,
        with_mount("c", script, "/pods-link/uid-1/volumes/cfg"),
    )
    .await;
    // The client sees its own paths in the status ...
    assert_eq!(status.log_path, format!("{log_dir}/c/0.log"));
    assert_eq!(status.mounts[0].host_path, "/pods-link/uid-1/volumes/cfg");
    // ... and the log is where it looks for it, under the root.
    let log = layout.under_root(&status.log_path);
    let log = log.to_str().unwrap();
    assert_eq!(status.exit_code, 0, "{:?}", read_log(log));
    // Partial lines: the file has no final newline.
    assert_eq!(stdout_lines(log), ["value", "value"]);

    // `..` in a host path stops at the root.
    let status = run(
        &mut env,
        &sandbox,
        with_mount("d", "cat /etc/cfg/key", "/up/pods/uid-1/volumes/cfg"),
    )
    .await;
    let log = layout.under_root(&status.log_path);
    assert_eq!(stdout_lines(log.to_str().unwrap()), ["value"]);
}

#[tokio::test]
async fn links_leaving_a_mount_are_refused_under_a_root() {
    let layout = Layout::new();
    let mut env = Env::start_with(|b| b.host_root(layout.root())).await;
    let sandbox = env
        .run_sandbox(sandbox_config("confined"))
        .await
        .expect("RunPodSandbox");
    for (name, path) in [
        ("relative", "/etc/cfg/escape"),
        ("absolute", "/etc/cfg/absolute"),
    ] {
        let config = with_mount(name, &format!("cat {path}"), "/pods/uid-1/volumes/cfg");
        let status = run(&mut env, &sandbox, config).await;
        let log = layout.under_root(&status.log_path);
        let entries = read_log(log.to_str().unwrap());
        assert_eq!(status.exit_code, 1, "{name}: {entries:?}");
        assert_eq!(entries.len(), 1, "{name}: {entries:?}");
        assert_eq!(entries[0].stream, "stderr");
        assert!(
            entries[0]
                .text
                .starts_with(&format!("cat: can't open '{path}': Permission denied")),
            "{name}: {entries:?}"
        );
    }
}

#[tokio::test]
async fn a_deferred_root_holds_requests_until_it_is_set() {
    let layout = Layout::new();
    let mut env = Env::start_with(|b| b.defer_host_root()).await;
    let mut runtime = env.runtime.clone();
    let pending = tokio::spawn(async move {
        runtime
            .run_pod_sandbox(v1::RunPodSandboxRequest {
                config: Some(sandbox_config("deferred")),
                runtime_handler: String::new(),
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!pending.is_finished(), "RunPodSandbox waits for the root");
    env.cri.set_host_root(layout.root());
    let sandbox = tokio::time::timeout(LIMIT, pending)
        .await
        .expect("RunPodSandbox answers once the root is set")
        .expect("the task")
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id;
    assert!(
        layout
            .under_root("/var/log/pods/nodeconform-host-root-test_deferred")
            .is_dir()
    );
    let status = run(
        &mut env,
        &sandbox,
        with_mount("c", "cat /etc/cfg/key", "/pods/uid-1/volumes/cfg"),
    )
    .await;
    let log = layout.under_root(&status.log_path);
    assert_eq!(stdout_lines(log.to_str().unwrap()), ["value"]);
}

#[tokio::test]
async fn a_process_root_ends_with_the_process() {
    let layout = Layout::new();
    let mut env = Env::start_with(|b| b.defer_host_root()).await;
    // A process in this mount namespace: its root is the host's `/`.
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    let root = env
        .cri
        .set_host_root_to_process(child.id())
        .expect("the process's root");
    assert!(root.join("proc").is_dir(), "{}", root.display());
    let mut config = sandbox_config("process");
    config.log_directory = env.log_dir().join("process").display().to_string();
    let sandbox = env.run_sandbox(config).await.expect("RunPodSandbox");
    let host_path = layout.root().join("pods/uid-1/volumes/cfg");
    let host_path = host_path.to_str().unwrap();
    let status = run(
        &mut env,
        &sandbox,
        with_mount("c", "cat /etc/cfg/key", host_path),
    )
    .await;
    assert_eq!(stdout_lines(&status.log_path), ["value"]);

    child.kill().expect("kill sleep");
    child.wait().expect("reap sleep");
    let message = expect_code(
        env.create_with(&sandbox, with_mount("d", "cat /etc/cfg/key", host_path))
            .await,
        tonic::Code::FailedPrecondition,
    );
    assert!(message.contains("No such process"), "{message}");
}

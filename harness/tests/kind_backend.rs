//! The kind backend with a stand-in `kind` on PATH that records its arguments: create, get kubeconfig,
//! delete — and delete also when a case failed or cluster creation failed; clear errors when kind or
//! Docker is missing.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CASE: &str = r#"name: quick
description: "a case that cannot pass: the stand-in cluster has no kubelet"
timeout: 5s
pod:
  metadata:
    name: p
  spec:
    containers:
      - name: c
        image: busybox:1.36
steps:
  - create
  - expect:
      within: 1s
      states:
        - phase: Running
"#;

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn nodeconform(path_env: &Path, cases: &Path) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .args(["run", "--backend", "kind", "--format", "json", "--cases"])
        .arg(cases)
        .env("PATH", path_env)
        .env_remove("KIND_EXPERIMENTAL_PROVIDER")
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_is_created_used_and_always_deleted() {
    let api = nodeconform_apiserver::ApiServer::builder()
        .start()
        .await
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let log = tmp.path().join("kind.log");
    let cases = tmp.path().join("cases");
    std::fs::create_dir_all(cases.join("smoke")).unwrap();
    std::fs::write(cases.join("smoke/quick.yaml"), CASE).unwrap();

    // 1. No kind on PATH.
    let (code, _, stderr) = nodeconform(&bin, &cases).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("`kind` was not found on PATH"), "{stderr}");

    // 2. kind but no Docker.
    let kind = format!(
        "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$1 $2\" in\n  \"create cluster\") [ -n \"$FAIL_CREATE\" ] && {{ echo 'ERROR: failed to create cluster: boom' >&2; exit 1; }}; exit 0;;\n  \"get kubeconfig\") /bin/cat {kc};;\n  \"delete cluster\") exit 0;;\nesac\n",
        log = log.display(),
        kc = kubeconfig.display()
    );
    script(&bin, "kind", &kind);
    let (code, _, stderr) = nodeconform(&bin, &cases).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`docker` was not found on PATH"),
        "{stderr}"
    );
    assert!(!log.exists(), "kind must not run without docker");

    // 3. A full run whose case fails: create, get kubeconfig, delete.
    script(&bin, "docker", "#!/bin/sh\nexit 0\n");
    let (code, stdout, stderr) = nodeconform(&bin, &cases).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json report");
    assert_eq!(report["cases"][0]["outcome"], "failed");
    assert_eq!(report["backend"], "kind");
    let calls = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 3, "{calls}");
    assert!(
        lines[0].starts_with("create cluster --name nodeconform-"),
        "{calls}"
    );
    let name = lines[0].split_whitespace().nth(3).unwrap();
    assert_eq!(lines[1], format!("get kubeconfig --name {name}"));
    assert_eq!(lines[2], format!("delete cluster --name {name}"));
    assert!(
        report["agent"]
            .as_str()
            .unwrap()
            .contains(&format!("{name}-control-plane"))
    );

    // 4. Creation fails: the error is shown and the cluster is deleted anyway.
    std::fs::remove_file(&log).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodeconform"))
        .args(["run", "--backend", "kind", "--cases"])
        .arg(&cases)
        .env("PATH", &bin)
        .env("FAIL_CREATE", "1")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("failed to create cluster: boom"),
        "{stderr}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 2, "{calls}");
    assert!(lines[0].starts_with("create cluster"));
    assert!(lines[1].starts_with("delete cluster --name nodeconform-"));
    api.shutdown().await;
}

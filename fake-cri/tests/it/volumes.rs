//! The interpreter reading and writing the CRI mounts a client passes, seen
//! through the CRI: the kubelet's atomic-writer layout (`..data` links),
//! links that leave a mount (refused), read-only mounts, an emptyDir shared
//! by two containers, `ExecSync` seeing the same files, and `hostname -f`
//! reading the mounted `/etc/hosts`.

use crate::common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use common::{Env, LIMIT, read_log, script_config, stdout_lines};
use nodeconform_cri::v1;

/// Volume directories on the "host", laid out as the kubelet writes them.
struct Volumes {
    _dir: tempfile::TempDir,
    podinfo: PathBuf,
    configmap: PathBuf,
    scratch: PathBuf,
    secret: PathBuf,
}

fn volumes() -> Volumes {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    // downwardAPI: the atomic writer's timestamped directory, `..data`
    // pointing at it, and each file a link through `..data`.
    let podinfo = root.join("podinfo");
    let data = podinfo.join("..2026_11_25_10_00_00.123456789");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("labels"), "app=\"web\"\ntier=\"front\"").unwrap();
    symlink("..2026_11_25_10_00_00.123456789", podinfo.join("..data")).unwrap();
    symlink("..data/labels", podinfo.join("labels")).unwrap();
    // Outside every mount: must never be read.
    let secret = root.join("host-secret");
    std::fs::write(&secret, "HOST SECRET").unwrap();
    symlink("../host-secret", podinfo.join("escape")).unwrap();
    symlink(&secret, podinfo.join("absolute")).unwrap();
    let configmap = root.join("configmap");
    std::fs::create_dir_all(&configmap).unwrap();
    std::fs::write(configmap.join("data-1"), "value-1").unwrap();
    std::fs::set_permissions(
        configmap.join("data-1"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    Volumes {
        _dir: dir,
        podinfo,
        configmap,
        scratch,
        secret,
    }
}

fn mount(container_path: &str, host_path: &Path, readonly: bool) -> v1::Mount {
    v1::Mount {
        container_path: container_path.to_owned(),
        host_path: host_path.display().to_string(),
        readonly,
        ..Default::default()
    }
}

/// `sh -c SCRIPT` with the three volumes mounted as a pod would have them.
fn with_volumes(name: &str, script: &str, volumes: &Volumes) -> v1::ContainerConfig {
    let mut config = script_config(name, script);
    config.mounts = vec![
        mount("/etc/podinfo", &volumes.podinfo, true),
        mount("/etc/configmap-volume", &volumes.configmap, true),
        mount("/scratch", &volumes.scratch, false),
    ];
    config
}

/// Runs a script to its end: (exit code, stdout lines, stderr lines).
async fn run(
    env: &mut Env,
    sandbox: &str,
    config: v1::ContainerConfig,
) -> (i32, Vec<String>, Vec<String>) {
    let id = env.run_with(sandbox, config).await;
    let status = env.wait_exit(&id, LIMIT).await;
    let stderr = read_log(&status.log_path)
        .into_iter()
        .filter(|e| e.stream == "stderr")
        .map(|e| e.text)
        .collect();
    (status.exit_code, stdout_lines(&status.log_path), stderr)
}

#[tokio::test]
async fn classic_upstream_reads_of_mounted_volumes() {
    let volumes = volumes();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let script = "cat /etc/podinfo/labels; echo; cat /etc/configmap-volume/data-1; echo; \
                  ls /etc/podinfo; ls -A /etc/podinfo/..data; \
                  stat -c %a /etc/configmap-volume/data-1; stat -c '%a %F' /etc/podinfo/labels; \
                  stat -L -c %n:%s /etc/podinfo/labels; \
                  test -f /etc/podinfo/labels && test -d /etc/podinfo && test -e /etc/podinfo/..data \
                  && test ! -e /etc/podinfo/missing && echo tests-pass; ls /etc";
    let (exit, stdout, stderr) = run(&mut env, &sandbox, with_volumes("c", script, &volumes)).await;
    assert_eq!((exit, stderr.as_slice()), (0, &[] as &[String]));
    assert_eq!(
        stdout,
        [
            "app=\"web\"",
            // The file has no final newline: a partial entry, then `echo`'s.
            "tier=\"front\"",
            "",
            "value-1",
            "",
            // `ls` hides dot names, lists one per line, sorted bytewise.
            "absolute",
            "escape",
            "labels",
            "labels",
            "600",
            // Without -L, stat reports the link itself, as busybox does.
            "777 symbolic link",
            "/etc/podinfo/labels:22",
            "tests-pass",
            "configmap-volume",
            // containerd's host name file.
            "hostname",
            "podinfo",
        ]
    );
}

#[tokio::test]
async fn links_leaving_a_mount_are_refused() {
    let volumes = volumes();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    for (name, path) in [
        ("relative", "/etc/podinfo/escape"),
        ("absolute", "/etc/podinfo/absolute"),
    ] {
        let script = format!("cat {path}");
        let (exit, stdout, stderr) =
            run(&mut env, &sandbox, with_volumes(name, &script, &volumes)).await;
        assert_eq!(exit, 1, "{name}");
        assert!(stdout.is_empty(), "{name}: {stdout:?}");
        assert_eq!(stderr.len(), 1, "{name}: {stderr:?}");
        assert!(
            stderr[0].starts_with(&format!("cat: can't open '{path}': Permission denied")),
            "{name}: {stderr:?}"
        );
        assert!(!stderr[0].contains("HOST SECRET"));
    }
    // `..` in the container's own path stays in the container's view.
    let script = "cat /etc/podinfo/../../host-secret";
    let (exit, _, stderr) = run(&mut env, &sandbox, with_volumes("dots", script, &volumes)).await;
    assert_eq!(exit, 1);
    assert!(
        stderr[0].ends_with("No such file or directory"),
        "{stderr:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&volumes.secret).unwrap(),
        "HOST SECRET"
    );
}

#[tokio::test]
async fn read_only_mounts_refuse_writes_and_writable_ones_reach_the_host() {
    let volumes = volumes();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let script = "echo x > /etc/configmap-volume/new; echo status $?; touch /etc/podinfo/t; \
                  echo status $?; rm /etc/configmap-volume/data-1; echo status $?";
    let (exit, stdout, stderr) =
        run(&mut env, &sandbox, with_volumes("ro", script, &volumes)).await;
    assert_eq!(exit, 0);
    assert_eq!(stdout, ["status 1", "status 1", "status 1"]);
    assert_eq!(
        stderr,
        [
            "sh: can't create /etc/configmap-volume/new: Read-only file system",
            "touch: /etc/podinfo/t: Read-only file system",
            "rm: can't remove '/etc/configmap-volume/data-1': Read-only file system",
        ]
    );
    assert!(!volumes.configmap.join("new").exists());
    assert!(volumes.configmap.join("data-1").exists());

    let script = "echo one > /scratch/f; echo two >> /scratch/f; mkdir -p /scratch/d/e; \
                  touch /scratch/d/e/t; cat /scratch/f";
    let (exit, stdout, _) = run(&mut env, &sandbox, with_volumes("rw", script, &volumes)).await;
    assert_eq!(
        (exit, stdout.as_slice()),
        (0, &["one".to_owned(), "two".to_owned()][..])
    );
    assert_eq!(
        std::fs::read_to_string(volumes.scratch.join("f")).unwrap(),
        "one\ntwo\n"
    );
    assert!(volumes.scratch.join("d/e/t").is_file());
}

#[tokio::test]
async fn an_empty_dir_is_shared_by_two_containers_and_their_execs() {
    let volumes = volumes();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let writer = env
        .run_with(
            &sandbox,
            with_volumes(
                "writer",
                "echo from-writer > /scratch/shared; sleep 600",
                &volumes,
            ),
        )
        .await;
    let reader = env
        .run_with(
            &sandbox,
            with_volumes(
                "reader",
                "until test -f /scratch/shared; do sleep 0.05; done; cat /scratch/shared",
                &volumes,
            ),
        )
        .await;
    let status = env.wait_exit(&reader, LIMIT).await;
    assert_eq!(status.exit_code, 0);
    assert_eq!(stdout_lines(&status.log_path), ["from-writer"]);
    // An exec (a probe) goes through the same mounts.
    let response = env
        .exec(&writer, &["cat", "/etc/configmap-volume/data-1"], 5)
        .await
        .unwrap();
    assert_eq!(
        (response.exit_code, response.stdout.as_slice()),
        (0, &b"value-1"[..])
    );
    let response = env
        .exec(
            &writer,
            &["sh", "-c", "echo probe > /scratch/p && ls /scratch"],
            5,
        )
        .await
        .unwrap();
    assert_eq!(response.stdout, b"p\nshared\n");
    assert_eq!(
        std::fs::read_to_string(volumes.scratch.join("p")).unwrap(),
        "probe\n"
    );
    let response = env
        .exec(&writer, &["cat", "/etc/podinfo/escape"], 5)
        .await
        .unwrap();
    assert_eq!(response.exit_code, 1);
    assert!(String::from_utf8_lossy(&response.stderr).contains("Permission denied"));
    env.stop(&writer, 0).await.unwrap();
}

#[tokio::test]
async fn a_read_only_root_takes_writes_only_through_mounts() {
    let volumes = volumes();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let mut config = with_volumes(
        "c",
        "touch /tmp/x; echo status $?; echo ok > /scratch/y; cat /scratch/y",
        &volumes,
    );
    if let Some(security) = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
    {
        security.readonly_rootfs = true;
    }
    let (exit, stdout, stderr) = run(&mut env, &sandbox, config).await;
    assert_eq!(exit, 0);
    assert_eq!(stdout, ["status 1", "ok"]);
    assert_eq!(stderr, ["touch: /tmp/x: Read-only file system"]);
}

/// The kubelet's `/etc/hosts` for a pod with hostname `mypod` and subdomain `t`.
const KUBELET_HOSTS: &str = "# Kubernetes-managed hosts file.\n\
    127.0.0.1\tlocalhost\n\
    ::1\tlocalhost ip6-localhost ip6-loopback\n\
    fe00::0\tip6-localnet\n\
    fe00::0\tip6-mcastprefix\n\
    fe00::1\tip6-allnodes\n\
    fe00::2\tip6-allrouters\n\
    10.88.0.5\tmypod.t.default.svc.cluster.local\tmypod\n";

#[tokio::test]
async fn upstream_hostname_fqdn_line_reads_the_mounted_hosts_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, KUBELET_HOSTS).unwrap();
    let mut env = Env::start().await;
    let sandbox = env.sandbox("mypod").await;
    // test/e2e_node/pod_hostnamefqdn_test.go's command.
    let script = "echo $(hostname)';'$(hostname -f)';'";
    let mut config = script_config("fqdn", script);
    config.mounts = vec![mount("/etc/hosts", &hosts, false)];
    let (exit, stdout, stderr) = run(&mut env, &sandbox, config).await;
    assert_eq!((exit, stderr.as_slice()), (0, &[] as &[String]));
    assert_eq!(stdout, ["mypod;mypod.t.default.svc.cluster.local;"]);
    // Without the mount there is no /etc/hosts, and no DNS to ask.
    let (exit, stdout, stderr) = run(&mut env, &sandbox, script_config("bare", script)).await;
    assert_eq!(exit, 0);
    assert_eq!(stdout, ["mypod;;"]);
    assert_eq!(stderr, ["hostname: mypod: Unknown host"]);
}

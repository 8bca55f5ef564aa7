//! fake-cri's command interpreter held to a real shell: every script of the shell corpus
//! (`fake-cri/tests/shell/corpus.txt`) and every `sh -c` script of a busybox container in
//! `cases/` runs as `ExecSync ["sh", "-c", SCRIPT]` in a busybox container on a containerd
//! and in one on fake-cri; each is its own test, which passes when both give the same
//! stdout, stderr and exit code, or both are still running at the timeout.
//!
//! `cargo test -p nodeconform-harness --test shell_corpus` (as root, with containerd, runc,
//! the CNI plugins and busybox-static installed; otherwise every test is ignored and the
//! reason is printed). `-- case::` runs only the cases' scripts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use libtest_mimic::{Arguments, Failed, Trial};
use nodeconform_cri::RuntimeServiceClient;
use nodeconform_cri::v1;
use nodeconform_fake_cri::FakeCri;
use nodeconform_harness::backend::containerd::{Containerd, Options, Programs};
use tonic::transport::Channel;

/// How long one script may run (seconds): scripts that outlive it must on both runtimes.
/// The cases' scripts sleep 0–3 s before they end, or 5 s and more: 4 s keeps a second
/// between a script that ends and one that does not.
const TIMEOUT: i64 = 4;

/// The busybox image the scripts run in (its tag as the image archives name it).
const IMAGE: &str = "docker.io/library/busybox:1.36";

/// One script to compare.
struct Script {
    name: String,
    text: String,
}

/// The corpus file: `### NAME` starts a script, which runs to the next `### ` line (its
/// trailing newlines dropped); lines before the first are comments.
fn corpus(path: &Path) -> Vec<Script> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut scripts: Vec<Script> = Vec::new();
    for line in text.split_inclusive('\n') {
        if let Some(name) = line.strip_prefix("### ") {
            scripts.push(Script {
                name: name.trim().to_owned(),
                text: String::new(),
            });
        } else if let Some(script) = scripts.last_mut() {
            script.text.push_str(line);
        }
    }
    for script in &mut scripts {
        script
            .text
            .truncate(script.text.trim_end_matches('\n').len());
    }
    scripts
}

/// Why a case's script is not compared, if it is not.
///
/// Rule: a script that needs what only the case's pod has (a volume, the downward API,
/// a service account, another container, the network) reads a path or an address that the
/// corpus containers do not have; it still runs, and fails on both runtimes with
/// busybox's messages, so nothing needs skipping for that. Skipped are only the scripts
/// whose output cannot be the same on two runtimes: they print the time, a process id,
/// an address or a random value, or resolve a name (the answer is the node's DNS's: the
/// containerd sandbox's copy of the host's resolv.conf names a server its network
/// namespace cannot reach).
fn skip_reason(script: &str) -> Option<&'static str> {
    const VARYING: &[(&str, &str)] = &[
        ("$$", "prints a process id"),
        ("date", "prints the time"),
        ("$RANDOM", "prints a random value"),
        ("/proc/", "reads the kernel's process information"),
        ("hostname -i", "prints an address"),
        (
            "hostname -f",
            "resolves the host name through the node's DNS",
        ),
        ("nslookup", "resolves a name through the node's DNS"),
        ("/sys/", "reads the kernel's sysfs"),
    ];
    // A needle that is a word must be one in the script (`date`, not `update`).
    let found = |needle: &str| {
        script.match_indices(needle).any(|(at, _)| {
            let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            !needle.starts_with(|c: char| c.is_ascii_alphabetic())
                || (!word(script[..at].chars().next_back())
                    && !word(script[at + needle.len()..].chars().next()))
        })
    };
    VARYING
        .iter()
        .find(|(needle, _)| found(needle))
        .map(|(_, why)| *why)
}

/// The `sh -c` scripts of busybox containers in the cases: (file, container, script, args).
fn case_scripts(dir: &Path) -> Vec<(String, String, String, Vec<String>)> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file
            .strip_prefix(dir)
            .unwrap_or(&file)
            .with_extension("")
            .display()
            .to_string();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(value) = <serde_yaml::Value as serde::Deserialize>::deserialize(doc) else {
                continue;
            };
            collect(&value, &rel, &mut found);
        }
    }
    found
}

fn strings(value: Option<&serde_yaml::Value>) -> Vec<String> {
    value
        .and_then(serde_yaml::Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| match v {
                    serde_yaml::Value::String(s) => Some(s.clone()),
                    serde_yaml::Value::Number(n) => Some(n.to_string()),
                    serde_yaml::Value::Bool(b) => Some(b.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn collect(
    value: &serde_yaml::Value,
    file: &str,
    found: &mut Vec<(String, String, String, Vec<String>)>,
) {
    match value {
        serde_yaml::Value::Mapping(map) => {
            let image = map.get("image").and_then(serde_yaml::Value::as_str);
            if image.is_some_and(|i| i.contains("busybox")) {
                let mut argv = strings(map.get("command"));
                argv.extend(strings(map.get("args")));
                if argv.len() >= 3
                    && matches!(argv[0].as_str(), "sh" | "/bin/sh")
                    && argv[1] == "-c"
                {
                    let name = map
                        .get("name")
                        .and_then(serde_yaml::Value::as_str)
                        .unwrap_or("container")
                        .to_owned();
                    found.push((file.to_owned(), name, argv[2].clone(), argv[3..].to_vec()));
                }
            }
            for (_, v) in map {
                collect(v, file, found);
            }
        }
        serde_yaml::Value::Sequence(items) => {
            for v in items {
                collect(v, file, found);
            }
        }
        _ => {}
    }
}

/// A runtime with a running busybox container.
#[derive(Clone)]
struct Target {
    client: RuntimeServiceClient<Channel>,
    container: String,
}

/// What one exec gave: (stdout, stderr, exit code), or that it was still running.
#[derive(Debug, PartialEq)]
enum Result3 {
    Done {
        stdout: String,
        stderr: String,
        code: i32,
    },
    Running,
    Failed(String),
}

/// A second chance for a script one runtime finished and the other did not within
/// [`TIMEOUT`] (seconds): a loaded containerd can take seconds to start an exec.
const RETRY_TIMEOUT: i64 = 15;

impl Target {
    async fn exec(&self, argv: Vec<String>, timeout: i64) -> Result3 {
        let mut client = self.client.clone();
        let request = client.exec_sync(v1::ExecSyncRequest {
            container_id: self.container.clone(),
            cmd: argv,
            timeout,
        });
        // containerd answers a timed-out exec only once its output pipes close: a
        // process the script left in the background keeps them open.
        let limit = std::time::Duration::from_secs(timeout.unsigned_abs() + 3);
        let Ok(reply) = tokio::time::timeout(limit, request).await else {
            return Result3::Running;
        };
        match reply {
            Ok(reply) => {
                let reply = reply.into_inner();
                Result3::Done {
                    stdout: String::from_utf8_lossy(&reply.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&reply.stderr).into_owned(),
                    code: reply.exit_code,
                }
            }
            Err(status)
                if status.code() == tonic::Code::DeadlineExceeded
                    || status.message().contains("timeout")
                    || status.message().contains("timed out") =>
            {
                Result3::Running
            }
            Err(status) => Result3::Failed(format!("{:?}: {}", status.code(), status.message())),
        }
    }
}

fn sandbox_config(dir: &Path) -> v1::PodSandboxConfig {
    v1::PodSandboxConfig {
        metadata: Some(v1::PodSandboxMetadata {
            name: "shell-corpus".to_owned(),
            uid: "uid-shell-corpus".to_owned(),
            namespace: "default".to_owned(),
            attempt: 0,
        }),
        hostname: "shell-corpus".to_owned(),
        log_directory: dir.display().to_string(),
        linux: Some(v1::LinuxPodSandboxConfig::default()),
        ..Default::default()
    }
}

fn container_config() -> v1::ContainerConfig {
    v1::ContainerConfig {
        metadata: Some(v1::ContainerMetadata {
            name: "sh".to_owned(),
            attempt: 0,
        }),
        image: Some(v1::ImageSpec {
            image: IMAGE.to_owned(),
            ..Default::default()
        }),
        command: vec!["sleep".to_owned(), "3600".to_owned()],
        log_path: "sh/0.log".to_owned(),
        linux: Some(v1::LinuxContainerConfig::default()),
        ..Default::default()
    }
}

/// Pulls the image, runs a sandbox and the container in it on the runtime at `endpoint`.
async fn target(endpoint: &str, dir: &Path, pull: bool) -> Result<Target, String> {
    let channel = nodeconform_cri::connect(endpoint)
        .await
        .map_err(|e| format!("connecting to {endpoint}: {e}"))?;
    let mut images = nodeconform_cri::ImageServiceClient::new(channel.clone());
    let mut client = RuntimeServiceClient::new(channel);
    let status = |what: &'static str| move |e: tonic::Status| format!("{what}: {}", e.message());
    // containerd has the image archives imported; fake-cri pulls from its catalogue.
    if pull {
        images
            .pull_image(v1::PullImageRequest {
                image: container_config().image,
                ..Default::default()
            })
            .await
            .map_err(status("PullImage"))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let sandbox = client
        .run_pod_sandbox(v1::RunPodSandboxRequest {
            config: Some(sandbox_config(dir)),
            runtime_handler: String::new(),
        })
        .await
        .map_err(status("RunPodSandbox"))?
        .into_inner()
        .pod_sandbox_id;
    let container = client
        .create_container(v1::CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(container_config()),
            sandbox_config: Some(sandbox_config(dir)),
        })
        .await
        .map_err(status("CreateContainer"))?
        .into_inner()
        .container_id;
    client
        .start_container(v1::StartContainerRequest {
            container_id: container.clone(),
        })
        .await
        .map_err(status("StartContainer"))?;
    Ok(Target { client, container })
}

/// The two runtimes and what keeps them running.
struct Env {
    busybox: Target,
    fake: Target,
    containerd: Containerd,
    _fake_cri: FakeCri,
    _dir: tempfile::TempDir,
}

/// Why the comparison cannot run here, or the runtimes to compare.
async fn start(runtime: &tokio::runtime::Handle) -> Result<Env, String> {
    let _ = runtime;
    nodeconform_testkit::root("a containerd runs in namespaces of its own")?;
    let programs = Programs::find().map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let images = dir.path().join("images");
    nodeconform_harness::images::build(&images, &Default::default())
        .map_err(|e| format!("the test images: {}", nodeconform_harness::error_chain(&e)))?;
    let archives = nodeconform_harness::images::Archives::read(&images)
        .map_err(|e| format!("reading the test images: {e}"))?;
    let containerd = Containerd::start(Options {
        programs: &programs,
        dir: dir.path(),
        images: &archives.to_import,
        registry: None,
    })
    .await
    .map_err(|e| format!("containerd: {}", nodeconform_harness::error_chain(&e)))?;
    let busybox = match target(
        &containerd.endpoint(),
        &dir.path().join("logs-containerd"),
        false,
    )
    .await
    {
        Ok(target) => target,
        Err(error) => {
            containerd.stop().await;
            return Err(format!("the busybox container on containerd: {error}"));
        }
    };
    let fake_cri = FakeCri::builder()
        .socket(dir.path().join("fake-cri.sock"))
        .control_socket(dir.path().join("fake-cri-control.sock"))
        .start()
        .await;
    let fake_cri = match fake_cri {
        Ok(fake_cri) => fake_cri,
        Err(error) => {
            containerd.stop().await;
            return Err(format!("fake-cri: {error}"));
        }
    };
    let fake = match target(
        &fake_cri.endpoint(),
        &dir.path().join("logs-fake-cri"),
        true,
    )
    .await
    {
        Ok(target) => target,
        Err(error) => {
            containerd.stop().await;
            return Err(format!("the busybox container on fake-cri: {error}"));
        }
    };
    Ok(Env {
        busybox,
        fake,
        containerd,
        _fake_cri: fake_cri,
        _dir: dir,
    })
}

fn describe(result: &Result3) -> String {
    match result {
        Result3::Done {
            stdout,
            stderr,
            code,
        } => format!("exit {code}\n    stdout: {stdout:?}\n    stderr: {stderr:?}"),
        Result3::Running => "still running at the timeout".to_owned(),
        Result3::Failed(error) => format!("ExecSync failed: {error}"),
    }
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // The scripts mostly wait on containerd's exec: run many at once.
    if args.test_threads.is_none() {
        args.test_threads = Some(16);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut scripts: Vec<(String, String, Vec<String>)> =
        corpus(&root.join("fake-cri/tests/shell/corpus.txt"))
            .into_iter()
            .map(|s| (s.name, s.text, Vec::new()))
            .collect();
    let own = scripts.len();
    let mut seen = std::collections::HashSet::new();
    let mut skipped = Vec::new();
    for (file, container, text, extra) in case_scripts(&root.join("cases")) {
        if !seen.insert((text.clone(), extra.clone())) {
            continue;
        }
        let name = format!("case::{file}::{container}");
        match skip_reason(&text) {
            Some(why) => skipped.push((name, why)),
            None => scripts.push((name, text, extra)),
        }
    }
    if !args.list {
        eprintln!(
            "note: {own} corpus scripts, {} case scripts compared, {} case scripts ignored",
            scripts.len() - own,
            skipped.len()
        );
        for (name, why) in &skipped {
            eprintln!("note: {name} is ignored: {why}");
        }
    }
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let started = Instant::now();
    let env = if args.list {
        Err("listing".to_owned())
    } else {
        runtime.block_on(start(runtime.handle()))
    };
    if let Err(reason) = &env
        && !args.list
    {
        eprintln!("note: every shell corpus test is ignored: {reason}");
    }
    let targets = env
        .as_ref()
        .ok()
        .map(|env| (env.busybox.clone(), env.fake.clone()));
    let trials = scripts
        .into_iter()
        .map(|(name, text, extra)| {
            let targets = targets.clone();
            let ignored = targets.is_none();
            let runtime = Arc::clone(&runtime);
            Trial::test(name, move || {
                let (busybox, fake) = targets.ok_or_else(|| Failed::from("no runtimes"))?;
                let mut argv = vec!["sh".to_owned(), "-c".to_owned(), text.clone()];
                argv.extend(extra);
                let (real, ours) = runtime.block_on(async {
                    let (mut real, mut ours) = tokio::join!(
                        busybox.exec(argv.clone(), TIMEOUT),
                        fake.exec(argv.clone(), TIMEOUT)
                    );
                    // One finished, the other not: the slow one gets longer.
                    match (&real, &ours) {
                        (Result3::Running, Result3::Done { .. }) => {
                            real = busybox.exec(argv, RETRY_TIMEOUT).await;
                        }
                        (Result3::Done { .. }, Result3::Running) => {
                            ours = fake.exec(argv, RETRY_TIMEOUT).await;
                        }
                        _ => {}
                    }
                    (real, ours)
                });
                if matches!(real, Result3::Failed(_)) || real != ours {
                    return Err(Failed::from(format!(
                        "script:\n{text}\n  busybox sh on containerd: {}\n  fake-cri: {}",
                        describe(&real),
                        describe(&ours)
                    )));
                }
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .chain(skipped.into_iter().map(|(name, why)| {
            // Ignored with its reason; run anyway (`--include-ignored`), it says why it
            // cannot be compared rather than pass.
            let why = why.to_string();
            Trial::test(name, move || Err(Failed::from(why))).with_ignored_flag(true)
        }))
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Ok(env) = env {
        runtime.block_on(env.containerd.stop());
        eprintln!(
            "note: the shell corpus took {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    conclusion.exit_code()
}

//! Every case in `cases/` as its own test, run against the embedded backend (API server double +
//! fake-cri + reference agent): `cargo test -p nodeconform-harness -- deletion`, `-- --list`.
//!
//! The cases tagged `slow` (minutes long: the back-off cap) are listed as ignored, as
//! `nodeconform run` leaves them out unless asked; `-- --include-ignored` runs them.
//!
//! With `NODECONFORM_KUBELET=/path/to/kubelet` every case also runs as `kubelet::<area>::<name>`
//! on that upstream kubelet (on the same embedded backend, fake-cri per case); without it those
//! tests are listed as ignored and the reason is printed.
//!
//! As root with containerd, runc and the CNI plugins installed (Debian's packages), every case
//! whose images `nodeconform images` builds also runs as `containerd::<area>::<name>`: the
//! reference agent on a containerd of each case's node (`--runtime containerd`), with the images
//! built from Debian's busybox-static at the start (and agnhost from `NODECONFORM_AGNHOST`).
//! Where that cannot be, those tests are ignored and the reason is printed;
//! `NODECONFORM_CONTAINERD=0` leaves them out on purpose. After them the host must show
//! what it showed before (processes, mounts, cgroups, links, `/var/log`, `/var/lib`), or
//! the test binary fails and says what was left.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock, Weak};

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use nodeconform_harness::backend::runtime::Runtime;
use nodeconform_harness::backend::{
    AgentSpec, BackendKind, Cluster, ClusterOptions, Nodes, kubelet,
};
use nodeconform_harness::case::{self, LoadedCase};
use nodeconform_harness::report::{self, Outcome, RunReport};
use nodeconform_harness::runner::{
    Janitor, case_run, default_jobs, ignore_reason, is_slow, start_order,
};

struct Env {
    cluster: Cluster,
    nodes: Arc<Nodes>,
    janitor: Janitor,
    /// The API server's `gitVersion`, read once.
    server: String,
}

/// Why the cases cannot run in this build, if they cannot.
fn not_built() -> Option<&'static str> {
    if !cfg!(feature = "embedded") {
        return Some("the embedded backend is not built (cargo feature `embedded`)");
    }
    if !cfg!(feature = "reference-agent") {
        return Some("the reference agent is not built (cargo feature `reference-agent`)");
    }
    None
}

/// The runtime of the `containerd::*` cases, or why there is none. The image archives
/// are written to `images`.
fn containerd(images: &std::path::Path) -> Result<Runtime, String> {
    if std::env::var_os("NODECONFORM_CONTAINERD").is_some_and(|v| v == "0") {
        return Err("NODECONFORM_CONTAINERD=0".into());
    }
    nodeconform_testkit::root("a node's containerd runs in namespaces of its own")?;
    let sources = nodeconform_harness::images::Sources {
        agnhost: std::env::var_os("NODECONFORM_AGNHOST").map(PathBuf::from),
        ..Default::default()
    };
    nodeconform_harness::images::build(images, &sources)
        .map_err(|e| format!("the test images: {}", nodeconform_harness::error_chain(&e)))?;
    let agent = vec![
        env!("CARGO_BIN_EXE_nodeconform").to_owned(),
        "agent".to_owned(),
    ];
    Runtime::containerd(Some(images.to_owned()), agent)
        .map_err(|e| nodeconform_harness::error_chain(&e))
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // As many at once as `nodeconform run` runs them (cases mostly wait on the agent;
    // the longest hold states for minutes, as upstream's tests do).
    let default_threads = args.test_threads.is_none();
    if default_threads {
        args.test_threads = Some(default_jobs(&AgentSpec::Reference));
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases");
    let loaded = case::load_dir(&dir);
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("a tokio runtime for the cases"),
    );
    let skip_reason = not_built();
    let kubelet = std::env::var_os(kubelet::ENV).map(PathBuf::from);
    if kubelet.is_none() && !args.list {
        eprintln!(
            "note: the kubelet::* cases are ignored: {} is not set (the path of a kubelet binary to run them on)",
            kubelet::ENV
        );
    }
    let images = tempfile::tempdir().expect("a directory for the test images");
    let containerd = if args.list {
        Err("listing".to_owned())
    } else {
        containerd(images.path())
    };
    if let Err(reason) = &containerd
        && !args.list
    {
        eprintln!("note: the containerd::* cases are ignored: {reason}");
    }
    let host_before = containerd.is_ok().then(host_view);
    // The containerd::* cases add eight per core: they wait on real containers and upstream
    // timings and use little CPU meanwhile (on 2 cores, 24 at once took ~1.1 core).
    if default_threads && containerd.is_ok() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        args.test_threads = args.test_threads.map(|n| n + 8 * cores);
    }
    let suites = [
        ("", Some((AgentSpec::Reference, Runtime::FakeCri))),
        (
            "kubelet::",
            kubelet.map(|k| (AgentSpec::Kubelet(k), Runtime::FakeCri)),
        ),
        (
            "containerd::",
            containerd.ok().map(|r| (AgentSpec::Reference, r)),
        ),
    ];
    if let Some(reason) = skip_reason
        && !args.list
    {
        eprintln!("note: every case is ignored: {reason}");
    }

    let mut trials = Vec::new();
    for error in loaded.errors {
        let message = error.to_string();
        trials.push(Trial::test(
            format!("check::{}", short_path(&message)),
            move || Err(Failed::from(message)),
        ));
    }
    // One lazily started environment per suite; the suites' cases interleave, longest
    // first, so that each suite's minutes-long cases start at the beginning.
    let suites: Vec<_> = suites
        .into_iter()
        .map(|(prefix, spec)| {
            (
                prefix,
                spec,
                Arc::new(OnceLock::<Result<Env, String>>::new()),
            )
        })
        .collect();
    for case in start_order(&loaded.cases) {
        for (prefix, spec, env) in &suites {
            let name = format!("{prefix}{}", case.id);
            // The slow cases take many minutes: run them with `-- --include-ignored`.
            let ignored = skip_reason.is_some()
                || is_slow(case)
                || spec.as_ref().is_none_or(|(spec, runtime)| {
                    ignore_reason(case, spec)
                        .or_else(|| runtime.ignore_reason(case))
                        .is_some()
                });
            let (runtime, env, spec, case) = (
                Arc::clone(&runtime),
                Arc::clone(env),
                spec.clone(),
                case.clone(),
            );
            trials.push(
                // Ignorable: a case that turns out not to apply (the agent's version, a
                // requirement the node lacks) is reported ignored with its reason, not ok.
                Trial::ignorable_test(name, move || {
                    let spec = spec.ok_or_else(|| Failed::from("no agent to run on"))?;
                    run_case(&runtime, &env, spec, &case)
                })
                .with_ignored_flag(ignored),
            );
        }
    }
    let envs: Vec<_> = suites.into_iter().map(|(_, _, env)| env).collect();
    on_signal(&runtime, envs.iter().map(Arc::downgrade).collect());
    let conclusion = libtest_mimic::run(&args, trials);
    for env in envs {
        if let Some(Ok(env)) = Arc::try_unwrap(env).ok().and_then(|cell| cell.into_inner()) {
            runtime.block_on(async move {
                env.nodes.release_all().await;
                env.cluster.teardown().await;
            });
        }
    }
    drop(images);
    // Nodes on containerd leave nothing on the host: no process, mount, cgroup, link or
    // file under /var/log and /var/lib.
    if let Some(before) = host_before {
        let left: Vec<String> = host_view().difference(&before).cloned().collect();
        if !left.is_empty() {
            eprintln!("error: the containerd::* cases left on the host: {left:?}");
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

/// What a user sees of the host that a node on containerd could leave: the entries of the
/// directories its runtime would write to, the cgroup hierarchies' top level, network
/// links, named network namespaces, mount points, and runtime processes.
fn host_view() -> BTreeSet<String> {
    let mut view = BTreeSet::new();
    let mut entries = |dir: &Path| {
        if let Ok(read) = std::fs::read_dir(dir) {
            for entry in read.flatten() {
                view.insert(entry.path().display().to_string());
            }
        }
    };
    for dir in [
        "/var/log",
        "/var/lib",
        "/run/netns",
        "/sys/class/net",
        "/run/containerd",
    ] {
        entries(Path::new(dir));
    }
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for hierarchy in hierarchies.flatten() {
            entries(&hierarchy.path());
        }
    }
    for line in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
    {
        if let Some(point) = line.split(' ').nth(4) {
            view.insert(format!("mount {point}"));
        }
    }
    for proc in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(proc.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if [
            "containerd",
            "containerd-shim",
            "containerd-shim-runc-v2",
            "runc",
            "pause",
        ]
        .contains(&comm)
        {
            view.insert(format!(
                "process {comm} {}",
                proc.file_name().to_string_lossy()
            ));
        }
    }
    view
}

/// Ctrl-C, or SIGTERM (`.ci/run` stopping this test in the background), ends the run as it
/// ends `nodeconform run`: nothing the cases made stays on the host. The process exits at
/// once, so the nodes' directories are removed here rather than by the teardown. (Weak: the
/// teardown after a whole run takes the environments back.)
fn on_signal(runtime: &tokio::runtime::Runtime, envs: Vec<Weak<OnceLock<Result<Env, String>>>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let _runtime = runtime.enter();
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    runtime.spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("\ninterrupted: removing the nodes' directories");
        for env in envs.iter().filter_map(Weak::upgrade) {
            if let Some(Ok(env)) = env.get()
                && let Err(e) = env.nodes.remove_files()
            {
                eprintln!("could not remove the nodes' directory: {e}");
            }
        }
        std::process::exit(130);
    });
}

fn short_path(message: &str) -> String {
    let path = message.split(':').next().unwrap_or("case");
    path.rsplit('/')
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("/")
}

fn start_env(
    runtime: &tokio::runtime::Runtime,
    (spec, node_runtime): (AgentSpec, Runtime),
) -> Result<Env, String> {
    nodeconform_harness::logs::capture_tracing();
    runtime.block_on(async {
        let cluster = Cluster::start(BackendKind::Embedded, &ClusterOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let nodes = Nodes::new(cluster.client.clone(), cluster.kubeconfig.clone(), spec)
            .map_err(|e| e.to_string())?
            .with_runtime(node_runtime);
        let server = case_run::api_server_version(&cluster.client).await;
        Ok(Env {
            cluster,
            nodes: Arc::new(nodes),
            janitor: Janitor::default(),
            server,
        })
    })
}

fn run_case(
    runtime: &tokio::runtime::Runtime,
    env: &OnceLock<Result<Env, String>>,
    spec: (AgentSpec, Runtime),
    case: &LoadedCase,
) -> Result<Completion, Failed> {
    let env = env
        .get_or_init(|| start_env(runtime, spec))
        .as_ref()
        .map_err(|e| Failed::from(format!("embedded backend: {e}")))?;
    let result = runtime.handle().block_on(case_run::run(
        &env.cluster.client,
        &env.nodes,
        &env.janitor,
        case,
        &env.server,
    ));
    match result.outcome {
        Outcome::Passed => Ok(Completion::Completed),
        Outcome::Ignored | Outcome::Unsupported => Ok(Completion::ignored_with(
            result.reason.as_deref().unwrap_or("does not apply"),
        )),
        Outcome::Failed => {
            let report = RunReport {
                backend: "embedded".into(),
                agent: env.nodes.describe(),
                cases: vec![result],
                duration: std::time::Duration::ZERO,
                interrupted: false,
                profile_notes: Vec::new(),
            };
            let text = report::human::footer(&report);
            let details = text.split("\nfailures:\n").nth(1).unwrap_or(&text).trim();
            // libtest-mimic prints its own `---- name ----` header.
            let details = details
                .strip_prefix(&format!("---- {} ----", report.cases[0].name))
                .unwrap_or(details);
            Err(Failed::from(details.trim().to_string()))
        }
    }
}

//! The pods' cgroups as a node shows them (`cgroupsPerQOS`, cgroupfs driver): with a cgroup
//! root, the agent makes each pod's cgroup under its QoS class's, sized by the pod's
//! resources, gives the Burstable cgroup its pods' CPU shares and the BestEffort one the
//! minimum, and removes a pod's cgroup once the pod is gone. Read from the host's cgroup
//! filesystem, with the API server double and fake-cri over real sockets.
//!
//! Needs root and a writable cgroup filesystem (cgroup v1's `cpu` and `memory`
//! hierarchies, or cgroup v2); without them the test is ignored and says why.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use common::{NODE, NS};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use libtest_mimic::{Arguments, Failed, Trial};
use nodeconform_agent::{Agent, Timings};
use serde_json::json;

const NAME: &str = "agent-cgroups::pods-in-the-qos-hierarchy";

/// Where one controller's files are: the cgroup v1 hierarchy of `controller`, else the
/// cgroup v2 mount.
fn hierarchy(controller: &str) -> Option<(PathBuf, bool)> {
    let v1 = PathBuf::from("/sys/fs/cgroup").join(controller);
    if v1.join("cgroup.procs").is_file() {
        return Some((v1, false));
    }
    let v2 = PathBuf::from("/sys/fs/cgroup");
    v2.join("cgroup.controllers")
        .is_file()
        .then_some((v2, true))
}

/// Why the test cannot run here, if it cannot.
fn unable() -> Option<String> {
    if let Err(why) = nodeconform_testkit::root("writing the host's cgroups") {
        return Some(why);
    }
    let Some((cpu, _)) = hierarchy("cpu") else {
        return Some("no cgroup v1 cpu hierarchy or cgroup v2 mount at /sys/fs/cgroup".into());
    };
    let probe = cpu.join(format!("nodeconform-probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            None
        }
        Err(e) => Some(format!("cannot make a cgroup in {}: {e}", cpu.display())),
    }
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let reason = unable();
    if let Some(reason) = &reason
        && !args.list
    {
        eprintln!("note: {NAME} is ignored: {reason}");
    }
    let trial = Trial::test(NAME, || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Failed::from(e.to_string()))?
            .block_on(pods_in_the_qos_hierarchy())
            .map_err(Failed::from)
    })
    .with_ignored_flag(reason.is_some());
    libtest_mimic::run(&args, vec![trial]).exit_code()
}

/// The value of `file` of cgroup `name` for `controller` (v1 name, v2 name), trimmed.
fn read(controller: &str, name: &str, v1_file: &str, v2_file: &str) -> Result<String, String> {
    let (mount, v2) = hierarchy(controller).ok_or("no hierarchy")?;
    let path = mount
        .join(name.trim_start_matches('/'))
        .join(if v2 { v2_file } else { v1_file });
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// `(cpu shares or weight, quota, memory limit)` of cgroup `name`, as the files spell them.
fn sized(name: &str) -> Result<(String, String, String), String> {
    Ok((
        read("cpu", name, "cpu.shares", "cpu.weight")?,
        read("cpu", name, "cpu.cfs_quota_us", "cpu.max")?,
        read("memory", name, "memory.limit_in_bytes", "memory.max")?,
    ))
}

/// Whether cgroup `name` is gone from the cpu and memory hierarchies.
fn gone(name: &str) -> bool {
    ["cpu", "memory"].iter().all(|c| {
        hierarchy(c).is_none_or(|(mount, _)| !mount.join(name.trim_start_matches('/')).exists())
    })
}

/// Removes what the agent leaves of its root (the QoS cgroups), deepest first, in every
/// cgroup mount.
fn remove_root(root: &str) {
    fn remove(dir: &Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&entry.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        for entry in entries.flatten() {
            remove(&entry.path().join(root.trim_start_matches('/')));
        }
    }
    remove(&Path::new("/sys/fs/cgroup").join(root.trim_start_matches('/')));
}

async fn pods_in_the_qos_hierarchy() -> Result<(), String> {
    let root = format!("/nodeconform-agent-test-{}", std::process::id());
    let result = run(&root).await;
    remove_root(&root);
    result
}

async fn run(root: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (api, cri) = common::start_parts(&dir).await;
    let agent = Agent::builder(api.client(), NODE, cri.endpoint())
        .root_dir(dir.path().join("agent"))
        .timings(Timings::fast())
        .cgroup_root(root)
        .spawn()
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(20), agent.ready())
        .await
        .map_err(|_| "the agent is not ready in 20 s")?;
    let container = |resources: serde_json::Value| {
        json!({"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
            "resources": resources}], "terminationGracePeriodSeconds": 0})
    };
    let pods = [
        (
            "guaranteed",
            container(json!({"limits": {"cpu": "250m", "memory": "64Mi"}})),
        ),
        (
            "burstable",
            container(json!({"requests": {"cpu": "100m", "memory": "32Mi"}})),
        ),
        ("besteffort", container(json!({}))),
    ];
    let mut uids = Vec::new();
    for (name, spec) in pods {
        let pod = common::create_pod(&api, name, spec).await;
        uids.push(pod.metadata.uid.unwrap_or_default());
    }
    let cgroup = |qos: &str, uid: &str| format!("{root}/kubepods{qos}/pod{uid}");
    let (guaranteed, burstable, besteffort) = (
        cgroup("", &uids[0]),
        cgroup("/burstable", &uids[1]),
        cgroup("/besteffort", &uids[2]),
    );
    let v2 = hierarchy("cpu").is_some_and(|(_, v2)| v2);
    // cgroup v2 spells shares as weights (runc's conversion) and no bound as `max`.
    let shares = |s: u64| {
        if v2 {
            (1 + (s - 2) * 9999 / 262_142).to_string()
        } else {
            s.to_string()
        }
    };
    let (no_quota, no_memory) = if v2 {
        ("max 100000", "max")
    } else {
        ("-1", "9223372036854771712")
    };
    let want = [
        (
            &guaranteed,
            (
                shares(256),
                if v2 {
                    "25000 100000".into()
                } else {
                    "25000".to_owned()
                },
                "67108864".to_owned(),
            ),
        ),
        (&burstable, (shares(102), no_quota.into(), no_memory.into())),
        (&besteffort, (shares(2), no_quota.into(), no_memory.into())),
    ];
    // The pods' cgroups are made before their sandboxes run: once all three are Running.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let pods: Api<Pod> = Api::namespaced(api.client(), NS);
    loop {
        let listed = pods
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if listed.items.iter().all(|p| common::phase(p) == "Running") {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the pods are not Running in 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (name, want) in &want {
        let got = sized(name)?;
        if &got != want {
            return Err(format!("cgroup {name}: {got:?}, expected {want:?}"));
        }
    }
    for (qos, want) in [("/burstable", shares(102)), ("/besteffort", shares(2))] {
        let got = read(
            "cpu",
            &format!("{root}/kubepods{qos}"),
            "cpu.shares",
            "cpu.weight",
        )?;
        if got != want {
            return Err(format!(
                "the QoS cgroup kubepods{qos}'s CPU shares: {got}, expected {want}"
            ));
        }
    }
    // Gone from the API and the runtime: their cgroups go at the next housekeeping, and the
    // Burstable cgroup's shares drop back to the minimum.
    for name in ["guaranteed", "burstable", "besteffort"] {
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .map_err(|e| e.to_string())?;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !want.iter().all(|(name, _)| gone(name)) {
        if tokio::time::Instant::now() > deadline {
            let left: Vec<&String> = want.iter().map(|(n, _)| *n).filter(|n| !gone(n)).collect();
            return Err(format!(
                "the cgroups of the deleted pods are still there after 20 s: {left:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = read(
        "cpu",
        &format!("{root}/kubepods/burstable"),
        "cpu.shares",
        "cpu.weight",
    )?;
    if got != shares(2) {
        return Err(format!(
            "kubepods/burstable's CPU shares after its pods went: {got}"
        ));
    }
    agent.shutdown().await;
    Ok(())
}

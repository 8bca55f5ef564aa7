//! Kubelets side by side leave the host's `/var/log/pods`, `/var/log/containers` and
//! `/var/lib/kubelet` alone, and nothing mounted: two kubelet cases at once — one reading
//! its log through the kubelet (`kubectl logs`), one `cat`ing a secret volume the kubelet
//! mounted — pass, and afterwards the host shows what it showed before.
//!
//! Needs root and `NODECONFORM_KUBELET=/path/to/kubelet`; otherwise the test is ignored and
//! says why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};
use nodeconform_harness::backend::{
    AgentSpec, BackendKind, Cluster, ClusterOptions, Nodes, kubelet,
};
use nodeconform_harness::case::{self, LoadedCase};
use nodeconform_harness::report::Outcome;
use nodeconform_harness::runner::{Janitor, case_run};

/// The host paths kubelets before 1.31 write whatever their configuration says.
const HOST_PATHS: [&str; 3] = ["/var/log/pods", "/var/log/containers", "/var/lib/kubelet"];

/// The cases run at once: logs read through the kubelet, a volume it mounts.
const CASES: [&str; 2] = ["logs::print-output", "volumes::secret-volume"];

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let kubelet = std::env::var_os(kubelet::ENV).map(PathBuf::from);
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let reason = match (&kubelet, root) {
        (None, _) => Some(format!(
            "{} is not set (the path of a kubelet binary)",
            kubelet::ENV
        )),
        (Some(_), false) => Some("a kubelet needs root".to_owned()),
        (Some(_), true) => None,
    };
    if let Some(reason) = &reason
        && !args.list
    {
        eprintln!("note: kubelet::host-paths-left-alone is ignored: {reason}");
    }
    let trial = Trial::test("kubelet::host-paths-left-alone", move || {
        let kubelet = kubelet.ok_or_else(|| Failed::from("no kubelet"))?;
        host_paths_left_alone(kubelet).map_err(Failed::from)
    })
    .with_ignored_flag(reason.is_some());
    libtest_mimic::run(&args, vec![trial]).exit_code()
}

/// What a user sees of the host paths: each one's entries, or `None` when it does not exist.
fn host_view() -> Vec<(&'static str, Option<BTreeSet<String>>)> {
    HOST_PATHS
        .iter()
        .map(|path| {
            let entries = std::fs::read_dir(path).ok().map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            });
            (*path, entries)
        })
        .collect()
}

/// The mount points of this mount namespace.
fn mount_points() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
        .collect()
}

fn host_paths_left_alone(kubelet: PathBuf) -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases");
    let loaded = case::load_dir(&dir);
    let cases: Vec<LoadedCase> = CASES
        .iter()
        .map(|id| {
            loaded
                .cases
                .iter()
                .find(|c| c.id.to_string() == *id)
                .cloned()
                .ok_or_else(|| format!("no case {id} in {}", dir.display()))
        })
        .collect::<Result<_, _>>()?;
    let before = (host_view(), mount_points());
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let reports = runtime.block_on(async {
        let cluster = Cluster::start(BackendKind::Embedded, &ClusterOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let nodes = Nodes::new(
            cluster.client.clone(),
            cluster.kubeconfig.clone(),
            AgentSpec::Kubelet(kubelet),
        )
        .map_err(|e| e.to_string())?;
        let janitor = Janitor::default();
        let server = case_run::api_server_version(&cluster.client).await;
        let reports = futures::future::join_all(
            cases
                .iter()
                .map(|case| case_run::run(&cluster.client, &nodes, &janitor, case, &server)),
        )
        .await;
        nodes.release_all().await;
        drop(nodes);
        cluster.teardown().await;
        Ok::<_, String>(reports)
    })?;
    for report in &reports {
        if report.outcome != Outcome::Passed {
            return Err(format!(
                "{} did not pass: {:?}\nagent log:\n{}",
                report.name,
                report.failures,
                report.agent_log.join("\n")
            ));
        }
    }
    let after = (host_view(), mount_points());
    if after.0 != before.0 {
        return Err(format!(
            "the host paths changed:\nbefore: {:?}\nafter:  {:?}",
            before.0, after.0
        ));
    }
    let left: Vec<&String> = after.1.difference(&before.1).collect();
    if !left.is_empty() {
        return Err(format!("mounts left behind: {left:?}"));
    }
    Ok(())
}

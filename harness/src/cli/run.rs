//! `nodeconform run`: selects the cases, starts (or reaches) the cluster, runs the
//! cases on the agent's nodes and reports.
//!
//! A run has one group of nodes — the agent the harness starts per case, or an
//! existing node — or, with `--all-nodes` / `--node-selector`, every group of an
//! existing cluster's nodes ([`node_groups`]): the groups run side by side, each
//! its own [`Runner`] with its cases spread over its nodes, and each writes its
//! own report (`--out DIR/<group>`).

use crate::backend::runtime::{Runtime, RuntimeKind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Error, ExitCode, RunArgs, load};
use crate::backend::{AgentSpec, BackendKind, Cluster, ClusterOptions, Nodes, node_groups};
use crate::case::LoadedCase;
use crate::case::features::Taxonomy;
use crate::out;
use crate::report::{self, Format, RunReport};
use crate::runner::{Janitor, Runner, Selection};

/// Who runs one share of the cases, and what its report is called when a run has several.
struct Group {
    label: Option<String>,
    spec: AgentSpec,
}

/// The selected cases and the feature taxonomy; `None`: `--rerun-failed` found nothing
/// to run again.
fn select(args: &RunArgs) -> Result<Option<(Vec<LoadedCase>, Taxonomy)>, Error> {
    let loaded = load(&args.cases)?;
    let cases = loaded.cases;
    let mut selection = Selection {
        filters: args.filter.clone(),
        tags: args.tags.clone(),
        skip: args.skip.clone(),
        exact: false,
    };
    if let Some(dir) = &args.rerun_failed {
        let bundle = report::bundle::read(dir)?;
        let failed: Vec<String> = bundle
            .report
            .cases
            .iter()
            .filter(|c| c.outcome == report::Outcome::Failed)
            .map(|c| c.name.clone())
            .collect();
        if failed.is_empty() {
            eprintln!("no case failed in {}: nothing to run again", dir.display());
            return Ok(None);
        }
        selection.filters = failed;
        selection.exact = true;
    }
    let selected: Vec<LoadedCase> = cases.into_iter().filter(|c| selection.matches(c)).collect();
    if selected.is_empty() {
        return Err(Error::NothingSelected);
    }
    Ok(Some((selected, loaded.taxonomy.unwrap_or_default())))
}

/// The groups of nodes the cases run on.
async fn groups(args: &RunArgs, cluster: &Cluster) -> Result<Vec<Group>, Error> {
    if args.on_all_nodes() {
        let selector = args.node_selector.as_deref();
        let found = node_groups::discover(&cluster.client, selector).await?;
        for (node, why) in &found.left_out {
            eprintln!("node {node} left out: {why}");
        }
        if found.groups.is_empty() {
            return Err(Error::NoNodes {
                selector: selector.map(str::to_owned),
            });
        }
        return Ok(found
            .groups
            .into_iter()
            .map(|g| Group {
                label: Some(g.label()),
                spec: AgentSpec::Existing(g.nodes),
            })
            .collect());
    }
    let spec = if let Some(node) = &args.node {
        AgentSpec::Existing(vec![node.clone()])
    } else if let Some(t) = &args.agent_cmd {
        AgentSpec::Command(t.clone())
    } else if let Some(kubelet) = &args.kubelet {
        AgentSpec::Kubelet(kubelet.clone())
    } else if args.reference_agent {
        AgentSpec::Reference
    } else if let Some(node) = &cluster.default_node {
        AgentSpec::Existing(vec![node.clone()])
    } else {
        AgentSpec::Reference
    };
    Ok(vec![Group { label: None, spec }])
}

/// How many cases run at once for `spec`: `per_node` on each existing node, else
/// `per_node` in all (each case has a node of its own).
fn jobs(spec: &AgentSpec, per_node: usize) -> usize {
    match spec {
        AgentSpec::Existing(nodes) => per_node * nodes.len().max(1),
        _ => per_node,
    }
}

/// A runner for each group of nodes, with what the group is called when there are several.
async fn runners(
    args: &RunArgs,
    cluster: &Cluster,
    profile: Option<&crate::profile::Profile>,
) -> Result<Vec<(Option<String>, Runner)>, Error> {
    let groups = groups(args, cluster).await?;
    if groups.iter().any(|g| g.spec == AgentSpec::Reference) {
        crate::logs::capture_tracing();
    }
    // A run's groups are of one kind: the agent the harness starts, or existing nodes.
    let per_node = args.jobs.unwrap_or_else(|| {
        groups
            .first()
            .map_or(1, |g| crate::runner::default_jobs(&g.spec))
    });
    let runtime = match args.runtime {
        RuntimeKind::FakeCri => Runtime::FakeCri,
        RuntimeKind::Containerd => {
            let exe = std::env::current_exe().map_err(|source| Error::Runtime {
                source: crate::backend::containerd::Error::Io {
                    what: "finding this executable (it runs the reference agent)".into(),
                    source,
                },
            })?;
            let agent = vec![exe.to_string_lossy().into_owned(), "agent".into()];
            Runtime::containerd(args.images.clone(), agent)
                .map_err(|source| Error::Runtime { source })?
        }
    };
    let mut runners = Vec::new();
    for group in groups {
        let nodes = Nodes::new(
            cluster.client.clone(),
            cluster.kubeconfig.clone(),
            group.spec,
        )?
        .with_runtime(runtime.clone());
        let runner = Runner {
            client: cluster.client.clone(),
            jobs: jobs(nodes.spec(), per_node),
            nodes: Arc::new(nodes),
            janitor: Arc::new(Janitor::default()),
            gate: !args.no_gate,
            profile: profile.cloned(),
        };
        runners.push((group.label, runner));
    }
    Ok(runners)
}

pub(super) async fn run_cases(args: RunArgs) -> Result<ExitCode, Error> {
    let Some((selected, taxonomy)) = select(&args)? else {
        return Ok(0);
    };
    #[cfg(feature = "mutants")]
    if let Some(mutant) = args.mutant {
        nodeconform_agent::mutants::select(mutant);
    }
    let profile = match &args.profile {
        Some(path) => Some(crate::profile::Profile::load(path, &taxonomy)?),
        None => None,
    };
    if let Some(kubelet) = &args.kubelet {
        crate::backend::kubelet::check_binary(kubelet).map_err(|reason| Error::Kubelet {
            path: kubelet.clone(),
            reason,
        })?;
    }
    let human = args.format == Format::Human;
    if args.emulate_version.is_some() && args.backend != BackendKind::Embedded {
        return Err(Error::EmulateVersion {
            backend: args.backend.as_str(),
        });
    }
    if args.on_all_nodes() && args.backend == BackendKind::Embedded {
        return Err(Error::AllNodesEmbedded);
    }
    let options = ClusterOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        progress: true,
        emulate_version: args.emulate_version.clone(),
    };
    // Ctrl-C or SIGTERM (a CI job's timeout, a service manager) from here on stops the run
    // and cleans up: a kind cluster being created is deleted, and the nodes the harness
    // started (their containerd, shims and containers among them) are stopped.
    let (interrupt_tx, interrupt_rx) = tokio::sync::watch::channel(false);
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::spawn(async move {
        let term = async {
            match terminate.as_mut() {
                Some(term) => term.recv().await,
                None => futures::future::pending().await,
            }
        };
        let stopped = tokio::select! {
            c = tokio::signal::ctrl_c() => c.is_ok(),
            t = term => t.is_some(),
        };
        if stopped {
            eprintln!("\ninterrupted: stopping cases and deleting what they created …");
            let _ = interrupt_tx.send(true);
        }
    });
    let interrupted = move || {
        let mut rx = interrupt_rx.clone();
        async move {
            if rx.wait_for(|v| *v).await.is_err() {
                futures::future::pending::<()>().await;
            }
        }
    };
    let cluster = tokio::select! {
        c = Cluster::start(args.backend, &options) => c?,
        _ = interrupted() => return Ok(130),
    };
    let runners = match runners(&args, &cluster, profile.as_ref()).await {
        Ok(r) if r.len() > 1 && !human => Err(Error::SeveralGroupsOneFormat { groups: r.len() }),
        other => other,
    };
    let runners = match runners {
        Ok(r) => r,
        Err(e) => {
            cluster.teardown().await;
            return Err(e);
        }
    };
    let agents = match runners.as_slice() {
        [(None, runner)] => runner.nodes.describe(),
        _ => format!(
            "{} node group{}:{}",
            runners.len(),
            if runners.len() == 1 { "" } else { "s" },
            runners
                .iter()
                .map(|(label, r)| {
                    format!(
                        "\n  [{}] {}",
                        label.as_deref().unwrap_or_default(),
                        r.nodes.describe()
                    )
                })
                .collect::<String>()
        ),
    };
    let header = report::human::header(selected.len(), &cluster.description, &agents);
    if human {
        out(&format!("{header}\n"));
    } else {
        eprint!("{header}");
    }
    let progress = Mutex::new(report::human::Progress::new(selected.len() * runners.len()));
    let runs = runners.iter().map(|(label, runner)| {
        let progress = &progress;
        let on_done = move |r: &report::CaseReport| {
            let mut progress = progress.lock().unwrap_or_else(PoisonError::into_inner);
            progress.clear();
            let line = report::human::line(r);
            let line = match label {
                Some(label) => format!("[{label}] {line}"),
                None => line,
            };
            if human {
                out(&format!("{line}\n"));
            } else {
                eprintln!("{line}");
            }
            progress.done(r);
        };
        runner.run(&selected, args.backend.as_str(), on_done, interrupted())
    });
    let reports = futures::future::join_all(runs).await;
    progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    for (_, runner) in &runners {
        runner.nodes.release_all().await;
    }
    cluster.teardown().await;
    for ((label, runner), report) in runners.iter().zip(&reports) {
        if let Some(out) = &args.out {
            let dir = bundle_dir(out, label.as_deref());
            let agent = report::bundle::AgentInfo::of_run(
                report,
                &runner.nodes,
                runner.profile.as_ref(),
                (args.agent_name.clone(), args.agent_version.clone()),
            );
            report::bundle::write(&dir, report, &agent)?;
            eprintln!("results written to {}", dir.display());
        }
        match args.format {
            Format::Human => {
                if let Some(label) = label {
                    out(&format!("\n[{label}] {}\n", runner.nodes.describe()));
                }
                out(&report::human::footer(report));
            }
            Format::Junit => out(&format!("{}\n", report::junit::render(report))),
            Format::Json => out(&format!("{}\n", report::json::render(report))),
        }
    }
    Ok(exit_code(&reports))
}

/// Where a group's bundle goes: `out` itself for a run of one group, `out/<label>` else.
fn bundle_dir(out: &Path, label: Option<&str>) -> PathBuf {
    label.map_or_else(|| out.to_path_buf(), |l| out.join(l))
}

/// 130 when interrupted, 0 when every group's cases passed, 1 else.
fn exit_code(reports: &[RunReport]) -> ExitCode {
    if reports.iter().any(|r| r.interrupted) {
        130
    } else if reports.iter().all(RunReport::success) {
        0
    } else {
        1
    }
}

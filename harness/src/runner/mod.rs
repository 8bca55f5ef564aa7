//! The case runner: selection, `requires` → ignored, parallel execution, cleanup on Ctrl-C.

pub mod case_run;
pub mod janitor;
mod node_steps;
mod objects;
mod observe;
mod pods;
pub mod recorder;
mod runtime_state;
mod streams;

use std::sync::Arc;

use futures::StreamExt;
use tokio::time::Instant;

use crate::backend::{AgentSpec, Nodes};
use crate::case::{LoadedCase, Requirement};
use crate::report::{CaseReport, Outcome, RunReport};

pub use janitor::Janitor;

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Substrings of `area::name`; a case runs when it contains any (all cases when empty).
    pub filters: Vec<String>,
    /// Only cases with every one of these tags.
    pub tags: Vec<String>,
    /// Cases whose name contains any of these are left out.
    pub skip: Vec<String>,
    /// `filters` must equal the name.
    pub exact: bool,
}

impl Selection {
    /// Whether `case` is selected.
    pub fn matches(&self, case: &LoadedCase) -> bool {
        let name = case.id.to_string();
        let by_name = self.filters.is_empty()
            || self.filters.iter().any(|f| {
                if self.exact {
                    &name == f
                } else {
                    name.contains(f.as_str())
                }
            });
        let by_tag = self.tags.iter().all(|t| case.case.tags.contains(t));
        let skipped = self.skip.iter().any(|s| name.contains(s.as_str()));
        by_name && by_tag && !skipped && (!is_slow(case) || self.wants_slow(&name))
    }

    /// Whether the slow cases are asked for: by their tag, or this one by its full name.
    fn wants_slow(&self, name: &str) -> bool {
        self.tags.iter().any(|t| t == SLOW) || self.filters.iter().any(|f| f == name)
    }
}

/// The tag of the cases that take many minutes (a back-off run up to its 300 s cap): a run
/// leaves them out unless `--tag slow` asks for them or a filter names one in full.
pub const SLOW: &str = "slow";

/// Whether `case` carries the [`SLOW`] tag.
pub fn is_slow(case: &LoadedCase) -> bool {
    case.case.tags.iter().any(|t| t == SLOW)
}

/// Why `case` cannot run with `agent`, if it cannot.
pub fn ignore_reason(case: &LoadedCase, agent: &AgentSpec) -> Option<String> {
    let has_control = agent.has_runtime_control();
    for req in &case.case.requires {
        let why = match req {
            Requirement::RuntimeControl | Requirement::DedicatedNode if !has_control => {
                "an existing node (--node, --all-nodes) has no runtime control and is shared"
            }
            Requirement::RuntimeState if !has_control => {
                "the harness does not reach an existing node's (--node, --all-nodes) runtime"
            }
            Requirement::AgentRestart if !has_control => {
                "the harness does not run an existing node's (--node, --all-nodes) agent"
            }
            Requirement::ApiFaults if !has_control => {
                "the harness does not sit between an existing node's (--node, --all-nodes) agent and its API server"
            }
            Requirement::HarnessImages if !has_control => {
                "an existing node (--node, --all-nodes) pulls from the real registries, not the harness's images"
            }
            Requirement::StaticPods if !agent.has_static_pods() => {
                "the harness cannot place manifests on this node (an existing node, or an agent command without {manifests})"
            }
            Requirement::HostWithoutApparmor => match host_apparmor(has_control) {
                Some(false) => continue,
                Some(true) => "this host enforces AppArmor",
                None if !has_control => "an existing node's host is not this one",
                None => "built without the reference agent, whose check it is",
            },
            _ => continue,
        };
        return Some(format!("requires {}: {why}", req.as_str()));
    }
    None
}

/// Whether the host of the nodes the harness starts (this one) enforces AppArmor, as the
/// kubelet decides it; `None` when it cannot tell.
fn host_apparmor(harness_node: bool) -> Option<bool> {
    if !harness_node {
        return None;
    }
    #[cfg(feature = "reference-agent")]
    return Some(nodeconform_agent::apparmor::host_enabled());
    #[cfg(not(feature = "reference-agent"))]
    None
}

fn ignored(case: &LoadedCase, reason: String) -> CaseReport {
    CaseReport {
        outcome: Outcome::Ignored,
        reason: Some(reason),
        ..CaseReport::of(case)
    }
}

/// Runs the selected cases: what a run needs.
pub struct Runner {
    /// A client of the cluster.
    pub client: kube::Client,
    /// Where cases get their node.
    pub nodes: Arc<Nodes>,
    /// How many cases run at once.
    pub jobs: usize,
    /// Tracks what cases made, for cleanup.
    pub janitor: Arc<Janitor>,
    /// Run the start gate first (see [`GATE_TAG`]).
    pub gate: bool,
    /// The features the agent declares unsupported (`--profile`).
    pub profile: Option<crate::profile::Profile>,
}

/// The tag of the start gate: the case that shows whether the agent can run a
/// pod at all. When a run selects it beside other cases it runs first, alone,
/// and if it fails the others are not run: each would only wait out its
/// timeout, and the gate's failure is the diagnosis.
pub const GATE_TAG: &str = "gate";

impl Runner {
    /// Runs `cases` (already selected), calling `on_done` as each finishes; stops early (and cleans up)
    /// when `interrupt` resolves.
    pub async fn run(
        &self,
        cases: &[LoadedCase],
        backend: &str,
        mut on_done: impl FnMut(&CaseReport),
        interrupt: impl std::future::Future<Output = ()>,
    ) -> RunReport {
        let start = Instant::now();
        let mut reports = Vec::new();
        let mut runnable = Vec::new();
        for case in cases {
            match self.nodes.ignore_reason(case) {
                Some(reason) => {
                    let r = ignored(case, reason);
                    on_done(&r);
                    reports.push(r);
                }
                None => runnable.push(case),
            }
        }
        // The API server's release, read once: cases that apply from a newer one are ignored.
        let server = case_run::api_server_version(&self.client).await;
        let server = server.as_str();
        let gate = runnable
            .iter()
            .position(|c| c.case.tags.contains(GATE_TAG))
            .filter(|_| self.gate && runnable.len() > 1);
        if let Some(at) = gate {
            let gate = runnable.remove(at);
            let mut report =
                case_run::run(&self.client, &self.nodes, &self.janitor, gate, server).await;
            // Whatever a profile declares, an agent that cannot run a pod fails the gate.
            let failed = report.outcome == Outcome::Failed;
            self.settle(&mut report);
            on_done(&report);
            reports.push(report);
            if failed {
                let reason = format!(
                    "not run: the start gate {} failed, so the agent cannot run a pod and every case depends on that (--no-gate runs them anyway)",
                    gate.id
                );
                for case in runnable.drain(..) {
                    let r = ignored(case, reason.clone());
                    on_done(&r);
                    reports.push(r);
                }
            }
        }
        let mut stream = futures::stream::iter(start_order(runnable).into_iter().map(|case| {
            let client = self.client.clone();
            let nodes = Arc::clone(&self.nodes);
            let janitor = Arc::clone(&self.janitor);
            async move { case_run::run(&client, &nodes, &janitor, case, server).await }
        }))
        .buffer_unordered(self.jobs.max(1));
        let mut interrupt = std::pin::pin!(interrupt);
        let mut interrupted = false;
        loop {
            tokio::select! {
                next = stream.next() => match next {
                    Some(mut r) => {
                        self.settle(&mut r);
                        on_done(&r);
                        reports.push(r);
                    }
                    None => break,
                },
                _ = &mut interrupt => {
                    interrupted = true;
                    break;
                }
            }
        }
        drop(stream);
        if interrupted {
            self.janitor.clean_all(&self.client).await;
        }
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        let mut report = RunReport {
            backend: backend.to_string(),
            agent: self.nodes.describe(),
            cases: reports,
            duration: start.elapsed(),
            interrupted,
            profile_notes: Vec::new(),
        };
        if let Some(profile) = &self.profile {
            report.profile_notes = profile.contradicted(&report);
        }
        report
    }

    /// A failed case on a feature the profile declares unsupported is unsupported.
    fn settle(&self, report: &mut CaseReport) {
        if let Some(profile) = &self.profile {
            profile.settle(report);
        }
    }
}

/// How many cases run at once by default: twelve per core with the in-process
/// reference agent, four per core when every case starts an agent process (a
/// kubelet) or shares a running node. Cases mostly wait on the agent (probe
/// periods, grace periods, holds of minutes), so several per core keep the suite
/// short without loading the machine; an agent process per case costs more than an
/// in-process agent. (With existing nodes, per node.)
pub fn default_jobs(spec: &AgentSpec) -> usize {
    let per_core = if *spec == AgentSpec::Reference { 12 } else { 4 };
    per_core
        * std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
}

/// The order cases start in: the longest (by `timeout`) first, so the few that hold a state
/// for minutes, as their upstream tests do, run beside the many short ones instead of after
/// them. Cases of one length keep their order.
pub fn start_order<'a>(cases: impl IntoIterator<Item = &'a LoadedCase>) -> Vec<&'a LoadedCase> {
    let mut cases: Vec<&LoadedCase> = cases.into_iter().collect();
    cases.sort_by_key(|c| std::cmp::Reverse(c.case.timeout));
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{CaseId, load};
    use std::path::Path;

    fn case(area: &str, name: &str, tags: &str, requires: &str) -> LoadedCase {
        let text = format!(
            "name: {name}\ndescription: d\ntags: [{tags}]\nrequires: [{requires}]\npod:\n  metadata: {{name: p}}\n  spec:\n    containers: [{{name: c, image: busybox:1.36}}]\nsteps:\n  - create\n"
        );
        LoadedCase {
            id: CaseId {
                area: area.into(),
                name: name.into(),
            },
            path: "x".into(),
            case: load::parse_str(Path::new("x.yaml"), &text, name).expect("valid"),
        }
    }

    #[test]
    fn selection_by_substring_tag_and_skip() {
        let a = case("deletion", "graceful", "conformance", "");
        let b = case("node", "runtime-down", "node", "runtime-control");
        let all = Selection::default();
        assert!(all.matches(&a) && all.matches(&b));
        let by_name = Selection {
            filters: vec!["deletion".into()],
            ..Default::default()
        };
        assert!(by_name.matches(&a) && !by_name.matches(&b));
        let by_tag = Selection {
            tags: vec!["conformance".into()],
            ..Default::default()
        };
        assert!(by_tag.matches(&a) && !by_tag.matches(&b));
        let skip = Selection {
            skip: vec!["runtime".into()],
            ..Default::default()
        };
        assert!(skip.matches(&a) && !skip.matches(&b));
        let exact = Selection {
            filters: vec!["deletion::grace".into()],
            exact: true,
            ..Default::default()
        };
        assert!(!exact.matches(&a));
    }

    #[test]
    fn slow_cases_run_only_when_asked_for() {
        let slow = case("crashloop", "backoff-cap", "crashloop, slow", "");
        for unasked in [
            Selection::default(),
            Selection {
                filters: vec!["crashloop".into()],
                ..Default::default()
            },
            Selection {
                tags: vec!["crashloop".into()],
                ..Default::default()
            },
        ] {
            assert!(!unasked.matches(&slow), "{unasked:?}");
        }
        let by_tag = Selection {
            tags: vec!["slow".into()],
            ..Default::default()
        };
        let by_name = Selection {
            filters: vec!["crashloop::backoff-cap".into()],
            ..Default::default()
        };
        assert!(by_tag.matches(&slow) && by_name.matches(&slow));
    }

    #[test]
    fn runtime_control_cases_are_ignored_on_an_existing_node() {
        let b = case("node", "runtime-down", "node", "runtime-control");
        let reason =
            ignore_reason(&b, &AgentSpec::Existing(vec!["kind-control-plane".into()])).unwrap();
        assert!(reason.starts_with("requires runtime-control"), "{reason}");
        assert_eq!(ignore_reason(&b, &AgentSpec::Reference), None);
        assert_eq!(ignore_reason(&b, &AgentSpec::Command("x".into())), None);
    }
}

//! Invariants every watched pod state sequence must keep, whatever the case (DESIGN.md "Harness").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::Serialize;

use super::timeline::State;

/// Which invariant broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The phase left `Succeeded` or `Failed`.
    TerminalPhaseLeft,
    /// The phase went from `Running` back to `Pending`.
    RunningToPending,
    /// A container's `restartCount` decreased.
    RestartCountDecreased,
    /// `status.startTime` changed once set.
    StartTimeChanged,
    /// A container's ID changed without its `restartCount` growing.
    ContainerIdChangedWithoutRestart,
    /// A condition's `lastTransitionTime` changed while its status did not.
    TransitionTimeWithoutTransition,
    /// A gracefully deleted pod was removed while a container still ran.
    FinalizedWithRunningContainer,
}

impl Rule {
    /// A short sentence naming the rule.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::TerminalPhaseLeft => "the phase never leaves Succeeded or Failed",
            Rule::RunningToPending => "the phase never goes back from Running to Pending",
            Rule::RestartCountDecreased => "restartCount never decreases",
            Rule::StartTimeChanged => "startTime never changes once set",
            Rule::ContainerIdChangedWithoutRestart => "a container ID changes only with a restart",
            Rule::TransitionTimeWithoutTransition => {
                "a condition's lastTransitionTime changes only when its status changes (or once, forward, for a transition and its reversal between two writes)"
            }
            Rule::FinalizedWithRunningContainer => {
                "deletion finalization happens only after all containers terminated"
            }
        }
    }
}

/// A broken invariant, naming the two states that break it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// What changed, in words.
    pub detail: String,
    /// Index and summary of the earlier state.
    pub before: (usize, String),
    /// Index and summary of the later state.
    pub after: (usize, String),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant broken: {} ({})\n  state #{}: {}\n  state #{}: {}",
            self.rule.describe(),
            self.detail,
            self.before.0,
            self.before.1,
            self.after.0,
            self.after.1
        )
    }
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

fn statuses(p: &Pod) -> BTreeMap<String, &ContainerStatus> {
    let mut out = BTreeMap::new();
    if let Some(s) = p.status.as_ref() {
        for c in s.container_statuses.iter().flatten() {
            out.insert(c.name.clone(), c);
        }
        for c in s.init_container_statuses.iter().flatten() {
            out.insert(format!("init:{}", c.name), c);
        }
    }
    out
}

fn has_running_container(p: &Pod) -> Option<String> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
        .map(|c| c.name.clone())
}

/// Checks every invariant over consecutive states; returns every violation found.
pub fn check(states: &[State]) -> Vec<Violation> {
    let mut out = Vec::new();
    // A status manager writes its latest status: a condition that turned and turned back
    // between two writes (a sandbox ready, then stopped) shows the same status with a later
    // lastTransitionTime. kubelet 1.36.2 does this now and then, so one such forward move per
    // condition of an object is allowed; a second, or a move back, is a broken rule.
    let mut unseen_round_trips: std::collections::HashSet<(Option<String>, String)> =
        std::collections::HashSet::new();
    for (i, pair) in states.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        // The invariants hold per object: a pod deleted and created again
        // under the same name (a mirror pod) starts afresh.
        if a.pod.metadata.uid != b.pod.metadata.uid {
            continue;
        }
        // The kubelet maps a mirror pod to its static pod by full name (its pod
        // manager's `updatePodsInternal`: "relies on a static pod and its mirror
        // to have the same name"), so the status of a static pod that replaced
        // another can land on the old mirror pod before the kubelet replaces it
        // (kubelet 1.36.2 did, under load): a status of other containers is
        // another pod's, and starts afresh.
        let (ca, cb) = (statuses(&a.pod), statuses(&b.pod));
        if !ca.is_empty() && !cb.is_empty() && ca.keys().all(|name| !cb.contains_key(name)) {
            continue;
        }
        let mut push = |rule: Rule, detail: String| {
            out.push(Violation {
                rule,
                detail,
                before: (i, a.summary()),
                after: (i + 1, b.summary()),
            })
        };
        let (pa, pb) = (phase(&a.pod), phase(&b.pod));
        if let (Some(x @ ("Succeeded" | "Failed")), Some(y)) = (pa, pb)
            && x != y
        {
            push(Rule::TerminalPhaseLeft, format!("{x} → {y}"));
        }
        if pa == Some("Running") && pb == Some("Pending") {
            push(Rule::RunningToPending, "Running → Pending".to_string());
        }
        let sa = a.pod.status.as_ref().and_then(|s| s.start_time.as_ref());
        let sb = b.pod.status.as_ref().and_then(|s| s.start_time.as_ref());
        if let Some(x) = sa
            && sb != Some(x)
        {
            push(
                Rule::StartTimeChanged,
                format!(
                    "{} → {}",
                    x.0,
                    sb.map(|t| t.0.to_string())
                        .unwrap_or_else(|| "<unset>".into())
                ),
            );
        }
        for (name, x) in &ca {
            let Some(y) = cb.get(name) else { continue };
            if y.restart_count < x.restart_count {
                push(
                    Rule::RestartCountDecreased,
                    format!("{name}: {} → {}", x.restart_count, y.restart_count),
                );
            }
            let ida = x.container_id.as_deref().unwrap_or("");
            let idb = y.container_id.as_deref().unwrap_or("");
            if !ida.is_empty()
                && !idb.is_empty()
                && ida != idb
                && y.restart_count <= x.restart_count
            {
                push(
                    Rule::ContainerIdChangedWithoutRestart,
                    format!(
                        "{name}: {ida} → {idb}, restartCount stayed {}",
                        y.restart_count
                    ),
                );
            }
        }
        let conds = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default()
        };
        let (da, db) = (conds(&a.pod), conds(&b.pod));
        for x in &da {
            if let Some(y) = db.iter().find(|c| c.type_ == x.type_)
                && x.status == y.status
                && x.last_transition_time.is_some()
                && y.last_transition_time.is_some()
                && x.last_transition_time != y.last_transition_time
                && !(x.last_transition_time < y.last_transition_time
                    && unseen_round_trips.insert((b.pod.metadata.uid.clone(), x.type_.clone())))
            {
                push(
                    Rule::TransitionTimeWithoutTransition,
                    format!(
                        "{} stayed {} but lastTransitionTime {} → {}",
                        x.type_,
                        x.status,
                        x.last_transition_time
                            .as_ref()
                            .map(|t| t.0.to_string())
                            .unwrap_or_default(),
                        y.last_transition_time
                            .as_ref()
                            .map(|t| t.0.to_string())
                            .unwrap_or_default()
                    ),
                );
            }
        }
        let graceful = b
            .pod
            .metadata
            .deletion_grace_period_seconds
            .is_some_and(|g| g > 0);
        if b.is_gone()
            && graceful
            && let Some(c) = has_running_container(&b.pod)
        {
            push(
                Rule::FinalizedWithRunningContainer,
                format!("removed while container {c} was running"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::testing::state;
    use crate::expect::timeline::EventKind;
    use serde_json::json;

    fn c(name: &str, restarts: i32, id: &str, state: serde_json::Value) -> serde_json::Value {
        json!({"name": name, "ready": false, "restartCount": restarts, "image": "i", "imageID": "",
               "containerID": id, "state": state})
    }

    #[test]
    fn a_clean_sequence_has_no_violation() {
        let states = vec![
            state(0, json!({"phase": "Pending"})),
            state(
                10,
                json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [c("c", 0, "fake://1", json!({"running": {}}))]}),
            ),
            state(
                20,
                json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [c("c", 1, "fake://2", json!({"running": {}}))]}),
            ),
            state(
                30,
                json!({"phase": "Failed", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [c("c", 1, "fake://2", json!({"terminated": {"exitCode": 1}}))]}),
            ),
        ];
        assert_eq!(check(&states), vec![]);
    }

    #[test]
    fn a_status_of_other_containers_starts_afresh() {
        // A replaced static pod's status written onto its old mirror pod.
        let states = vec![
            state(
                0,
                json!({"phase": "Running", "containerStatuses": [c("m-test", 0, "fake://1", json!({"running": {}}))]}),
            ),
            state(
                10,
                json!({"phase": "Pending", "containerStatuses": [c("test", 0, "", json!({"waiting": {}}))]}),
            ),
        ];
        assert_eq!(check(&states), vec![]);
    }

    #[test]
    fn terminal_phase_left_names_both_states() {
        let states = vec![
            state(0, json!({"phase": "Succeeded"})),
            state(1500, json!({"phase": "Running"})),
        ];
        let v = check(&states);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].rule, Rule::TerminalPhaseLeft);
        let text = v[0].to_string();
        assert!(
            text.contains("state #0: +  0.000s") && text.contains("phase=Succeeded"),
            "{text}"
        );
        assert!(
            text.contains("state #1: +  1.500s") && text.contains("phase=Running"),
            "{text}"
        );
    }

    #[test]
    fn running_to_pending_restart_decrease_and_id_change() {
        let states = vec![
            state(
                0,
                json!({"phase": "Running", "containerStatuses": [c("c", 2, "fake://1", json!({"running": {}}))]}),
            ),
            state(
                10,
                json!({"phase": "Pending", "containerStatuses": [c("c", 1, "fake://9", json!({"running": {}}))]}),
            ),
        ];
        let rules: Vec<Rule> = check(&states).into_iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            [
                Rule::RunningToPending,
                Rule::RestartCountDecreased,
                Rule::ContainerIdChangedWithoutRestart
            ]
        );
    }

    #[test]
    fn start_time_and_transition_time() {
        let states = vec![
            state(
                0,
                json!({"startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            ),
            state(
                10,
                json!({"startTime": "2026-01-01T00:00:05Z",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}),
            ),
            // A second move without a transition is one too many.
            state(
                15,
                json!({"startTime": "2026-01-01T00:00:05Z",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:07Z"}]}),
            ),
            state(
                20,
                json!({"startTime": "2026-01-01T00:00:05Z",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"}]}),
            ),
        ];
        let rules: Vec<Rule> = check(&states).into_iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            [
                Rule::StartTimeChanged,
                Rule::TransitionTimeWithoutTransition
            ]
        );
    }

    #[test]
    fn graceful_removal_with_running_container() {
        let mut gone = state(
            10,
            json!({"phase": "Running",
            "containerStatuses": [c("c", 0, "fake://1", json!({"running": {}}))]}),
        );
        gone.kind = EventKind::Deleted;
        gone.pod.metadata.deletion_grace_period_seconds = Some(30);
        let states = vec![state(0, json!({"phase": "Running"})), gone.clone()];
        assert_eq!(check(&states)[0].rule, Rule::FinalizedWithRunningContainer);
        // A force deletion (grace 0) may remove a running pod.
        gone.pod.metadata.deletion_grace_period_seconds = Some(0);
        assert!(check(&[states[0].clone(), gone]).is_empty());
    }
}

//! The states of a pod as the watch delivered them, with times relative to the case start.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod};
use serde::Serialize;

/// How a state arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventKind {
    /// The first state (create or initial list).
    Added,
    /// An update.
    Modified,
    /// The object was removed; the pod is its last state.
    Deleted,
}

impl EventKind {
    /// Upper-case watch event name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One watched state.
#[derive(Debug, Clone)]
pub struct State {
    /// Time since the case started.
    pub at: Duration,
    /// How it arrived.
    pub kind: EventKind,
    /// The object (for `Deleted`: its last state).
    pub pod: Pod,
}

impl State {
    /// Whether this state is the object's removal.
    pub fn is_gone(&self) -> bool {
        self.kind == EventKind::Deleted
    }

    /// `+1.234s MODIFIED phase=Running …` — one line for timelines.
    pub fn summary(&self) -> String {
        format!(
            "+{:>7.3}s {:<8} {}",
            self.at.as_secs_f64(),
            self.kind.as_str(),
            summarize_pod(&self.pod)
        )
    }
}

/// A compact description of a pod's status: phase, deletion, conditions, containers.
pub fn summarize_pod(pod: &Pod) -> String {
    let mut out = String::new();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("<none>");
    let _ = write!(out, "phase={phase}");
    if pod.metadata.deletion_timestamp.is_some() {
        let _ = write!(
            out,
            " deleting(grace={})",
            pod.metadata
                .deletion_grace_period_seconds
                .map(|g| g.to_string())
                .unwrap_or_else(|| "?".into())
        );
    }
    if let Some(reason) = status.and_then(|s| s.reason.as_deref()) {
        let _ = write!(out, " reason={reason}");
    }
    if let Some(conditions) = status.and_then(|s| s.conditions.as_ref())
        && !conditions.is_empty()
    {
        let parts: Vec<String> = conditions
            .iter()
            .map(|c| match &c.reason {
                Some(r) => format!("{}={}/{}", c.type_, c.status, r),
                None => format!("{}={}", c.type_, c.status),
            })
            .collect();
        let _ = write!(out, " [{}]", parts.join(" "));
    }
    for (label, list) in [
        (
            "init ",
            status.and_then(|s| s.init_container_statuses.as_ref()),
        ),
        ("", status.and_then(|s| s.container_statuses.as_ref())),
    ] {
        for c in list.into_iter().flatten() {
            let _ = write!(out, " | {label}{}: {}", c.name, summarize_container(c));
        }
    }
    out
}

fn summarize_state(state: Option<&ContainerState>) -> String {
    match state {
        Some(ContainerState {
            terminated: Some(t),
            ..
        }) => {
            let mut s = format!(
                "terminated/{}({})",
                t.reason.as_deref().unwrap_or("-"),
                t.exit_code
            );
            if let Some(m) = t.message.as_deref().filter(|m| !m.is_empty()) {
                let short: String = m.chars().take(40).collect();
                let _ = write!(s, " msg={short:?}");
            }
            s
        }
        Some(ContainerState {
            running: Some(_), ..
        }) => "running".to_string(),
        Some(ContainerState {
            waiting: Some(w), ..
        }) => format!("waiting/{}", w.reason.as_deref().unwrap_or("-")),
        _ => "<no state>".to_string(),
    }
}

fn summarize_container(c: &ContainerStatus) -> String {
    let mut s = summarize_state(c.state.as_ref());
    let _ = write!(
        s,
        " ready={} started={} restarts={}",
        c.ready,
        c.started
            .map(|b| b.to_string())
            .unwrap_or_else(|| "-".into()),
        c.restart_count
    );
    if let Some(last) = c.last_state.as_ref()
        && last.terminated.is_some()
    {
        let _ = write!(s, " last={}", summarize_state(Some(last)));
    }
    s
}

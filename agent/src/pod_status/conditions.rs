//! The condition generators of `pkg/kubelet/status` (`GeneratePodReadyCondition`,
//! `GenerateContainersReadyCondition`, `GeneratePodInitializedCondition`).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

use super::*;

pub(crate) fn condition(
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..Default::default()
    }
}

pub(crate) fn go_list(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

/// `GenerateContainersReadyCondition`.
pub fn containers_ready_condition(pod: &Pod, all: &[ContainerStatus], phase: &str) -> PodCondition {
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    // Sidecars count first, then the app containers (their order in the message).
    let sidecars = init_containers(pod)
        .iter()
        .filter(|c| is_restartable_init_container(c));
    for c in sidecars.chain(app_containers(pod)) {
        match all.iter().find(|s| s.name == c.name) {
            Some(s) if !s.ready => unready.push(c.name.clone()),
            Some(_) => {}
            None => unknown.push(c.name.clone()),
        }
    }
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition("ContainersReady", false, Some("PodCompleted"), None);
    }
    if phase == FAILED {
        return condition("ContainersReady", false, Some("PodFailed"), None);
    }
    containers_condition(
        "ContainersReady",
        "ContainersNotReady",
        &unknown,
        ("unready", &unready),
    )
}

/// A condition that holds unless some containers have no status or are not
/// yet in the wanted state: `False` with `reason` and the kubelet's message
/// (`containers with unknown status: [a], containers with unready status: [b]`).
pub(crate) fn containers_condition(
    type_: &str,
    reason: &str,
    unknown: &[String],
    (state, not_yet): (&str, &[String]),
) -> PodCondition {
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(unknown)
        ));
    }
    if !not_yet.is_empty() {
        messages.push(format!(
            "containers with {state} status: {}",
            go_list(not_yet)
        ));
    }
    if messages.is_empty() {
        condition(type_, true, None, None)
    } else {
        condition(type_, false, Some(reason), Some(messages.join(", ")))
    }
}

/// `GeneratePodReadyCondition`.
pub fn ready_condition(
    pod: &Pod,
    conditions: &[PodCondition],
    all: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let cr = containers_ready_condition(pod, all, phase);
    if cr.status != "True" {
        return PodCondition {
            type_: "Ready".into(),
            ..cr
        };
    }
    let mut messages = Vec::new();
    for gate in pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .filter(|_| !crate::mutants::active(crate::mutants::Mutant::ReadinessGatesIgnored))
        .unwrap_or_default()
    {
        match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {:?} does not exist.",
                gate.condition_type
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate {:?} is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(messages.join(", ")),
        )
    }
}

/// `GeneratePodInitializedCondition`.
pub fn initialized_condition(
    pod: &Pod,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in init_containers(pod) {
        // `isInitContainerInitialized`: a sidecar once started, any other once it succeeded.
        match init.iter().find(|s| s.name == c.name) {
            None => unknown.push(c.name.clone()),
            Some(s) if is_restartable_init_container(c) && s.started != Some(true) => {
                incomplete.push(c.name.clone());
            }
            Some(s) if !is_restartable_init_container(c) && !s.ready => {
                incomplete.push(c.name.clone());
            }
            Some(_) => {}
        }
    }
    if phase == SUCCEEDED && unknown.is_empty() {
        return condition("Initialized", true, Some("PodCompleted"), None);
    }
    if app.iter().any(container_status::has_started) {
        return condition("Initialized", true, None, None);
    }
    containers_condition(
        "Initialized",
        "ContainersNotInitialized",
        &unknown,
        ("incomplete", &incomplete),
    )
}

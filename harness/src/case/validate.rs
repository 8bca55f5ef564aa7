//! What a parsed case must satisfy beyond its types: names, steps in a
//! sensible order, patterns that name the pod's containers.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::locate::{Anchor, Problem, problem};
use super::model::{AgentStep, Case, Fault, Object, Requirement, Step};
use super::object_steps::{PatchType, Target};
use super::pattern::{ContainerPattern, PodPattern};
use super::version::Versions;

/// Why a `since`/`until` range admits no kubelet, if it admits none.
fn empty_range(versions: Versions) -> Option<String> {
    let (Some(since), Some(until)) = (versions.since, versions.until) else {
        return None;
    };
    (since >= until).then(|| {
        format!("since {since} is not before until {until}: no kubelet version is in the range")
    })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The names of a pod's containers and of its init containers.
fn container_names(spec: Option<&PodSpec>) -> (Vec<&str>, Vec<&str>) {
    fn names(list: &[Container]) -> Vec<&str> {
        list.iter().map(|c| c.name.as_str()).collect()
    }
    (
        spec.map_or_else(Vec::new, |s| names(&s.containers)),
        spec.and_then(|s| s.init_containers.as_deref())
            .map_or_else(Vec::new, names),
    )
}

pub(super) fn validate(case: &Case, stem: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    if case.name != stem {
        out.push(problem(
            Anchor::TopKey("name"),
            format!(
                "name `{}` differs from the file name: expected `{stem}` (cases are named by their file)",
                case.name
            ),
        ));
    }
    if let Some(area) = &case.area
        && !is_dns_label(area)
    {
        out.push(problem(
            Anchor::TopKey("area"),
            format!("area `{area}`: expected a DNS label (lowercase letters, digits, `-`)"),
        ));
    }
    if case.description.trim().is_empty() {
        out.push(problem(
            Anchor::TopKey("description"),
            "description is empty: expected the upstream test or behaviour the case mirrors",
        ));
    }
    let pod_name = case.pod.metadata.name.as_deref().unwrap_or_default();
    if !is_dns_label(pod_name) {
        out.push(problem(
            Anchor::TopKey("pod"),
            format!(
                "pod.metadata.name `{pod_name}`: expected a DNS label (lowercase letters, digits, `-`, at most 63)"
            ),
        ));
    }
    if case.pod.metadata.namespace.is_some() {
        out.push(problem(
            Anchor::TopKey("pod"),
            "pod.metadata.namespace is set: expected none, the harness gives each case its own namespace",
        ));
    }
    let spec = case.pod.spec.as_ref();
    let (containers, init_containers) = container_names(spec);
    match spec {
        None => out.push(problem(
            Anchor::TopKey("pod"),
            "pod.spec is missing: expected a pod spec with at least one container",
        )),
        Some(spec) => {
            if spec.containers.is_empty() {
                out.push(problem(
                    Anchor::TopKey("pod"),
                    "pod.spec.containers is empty: expected at least one container",
                ));
            }
            if spec.node_name.is_some() {
                out.push(problem(
                    Anchor::TopKey("pod"),
                    "pod.spec.nodeName is set: expected none, the harness binds the pod to the node under test",
                ));
            }
            for c in spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
            {
                if c.image.as_deref().unwrap_or_default().is_empty() {
                    out.push(problem(
                        Anchor::TopKey("pod"),
                        format!(
                            "container `{}` has no image: expected e.g. `image: busybox:1.36`",
                            c.name
                        ),
                    ));
                }
            }
        }
    }
    for object in &case.objects {
        check_object(object, || Anchor::TopKey("objects"), &mut out);
    }
    super::peers::check(case, &mut out);
    if let Some(message) = empty_range(case.versions()) {
        out.push(problem(Anchor::TopKey("until"), message));
    }
    if case.static_pod && !case.requires.contains(&Requirement::StaticPods) {
        out.push(problem(
            Anchor::TopKey("static"),
            "a static pod case needs `requires: [static-pods]` (setups that cannot place manifests ignore the case)",
        ));
    }
    let mut created = false;
    let mut agent_killed = false;
    for (i, step) in case.steps.iter().enumerate() {
        let here = || Anchor::Step(i);
        match step {
            Step::Create => {
                if created {
                    out.push(problem(here(), "a second `create`: expected one per case"));
                }
                created = true;
            }
            Step::Delete(d) => {
                if !created {
                    out.push(problem(here(), "`delete` before `create`"));
                }
                if d.grace_period_seconds.is_some_and(|g| g < 0) {
                    out.push(problem(here(), "gracePeriodSeconds: expected 0 or more"));
                }
            }
            Step::RemoveFinalizers => {
                if !created {
                    out.push(problem(here(), "`removeFinalizers` before `create`"));
                }
            }
            Step::Fault(Fault::Api(fault)) => {
                if !case.requires.contains(&Requirement::ApiFaults) {
                    out.push(problem(
                        here(),
                        "a `fault: {api: …}` step needs `requires: [api-faults]` (setups where the harness does not sit between the agent and its API server ignore the case)",
                    ));
                }
                if let Err(invalid) = fault.rule() {
                    out.push(problem(here(), format!("fault api: {invalid}")));
                }
            }
            Step::Fault(fault) => {
                if !case.requires.contains(&Requirement::RuntimeControl) {
                    out.push(problem(
                        here(),
                        "a `fault` step needs `requires: [runtime-control]` (setups without runtime control ignore the case)",
                    ));
                }
                if fault.is_node_wide() && !case.requires.contains(&Requirement::DedicatedNode) {
                    out.push(problem(
                        here(),
                        "this fault changes the whole node: it needs `requires: [dedicated-node]`, so that no other case runs there",
                    ));
                }
                if let Fault::Kill(kill) = fault
                    && !containers.contains(&kill.container.as_str())
                    && !init_containers.contains(&kill.container.as_str())
                {
                    out.push(problem(
                        here(),
                        format!(
                            "kill: no container `{}` in the pod: expected one of {}",
                            kill.container,
                            containers.join(", ")
                        ),
                    ));
                }
            }
            Step::Wait(_) | Step::ExpectNode(_) => {}
            Step::ExpectRuntime(_) => {
                if !case.requires.contains(&Requirement::RuntimeState) {
                    out.push(problem(
                        here(),
                        "an `expectRuntime` step needs `requires: [runtime-state]`",
                    ));
                }
            }
            Step::Apply(object) => check_object(object, here, &mut out),
            Step::Patch(patch) => {
                if patch.object == Target::Pod && !created {
                    out.push(problem(here(), "`patch` of the pod before `create`"));
                }
                if let Some(sub) = patch.subresource
                    && patch.object != Target::Pod
                {
                    out.push(problem(
                        here(),
                        format!(
                            "subresource: {} has no {} subresource",
                            patch.object,
                            sub.as_str()
                        ),
                    ));
                }
                let shape_ok = match patch.patch_type {
                    PatchType::Json => patch.patch.is_array(),
                    PatchType::Strategic | PatchType::Merge | PatchType::Update => {
                        patch.patch.is_object()
                    }
                };
                if !shape_ok {
                    out.push(problem(
                        here(),
                        "patch: expected a mapping (a list of operations for `type: json`)",
                    ));
                }
            }
            Step::DeleteObject(_) => {}
            Step::Agent(action) => {
                if !case.requires.contains(&Requirement::AgentRestart) {
                    out.push(problem(
                        here(),
                        "an `agent` step needs `requires: [agent-restart]` (setups whose agent the harness does not run ignore the case)",
                    ));
                }
                let killing = *action == AgentStep::Kill;
                if killing == agent_killed {
                    let message = if killing {
                        "`agent: kill` of an agent killed already: expected `agent: start` first"
                    } else {
                        "`agent: start` of an agent that runs: expected `agent: kill` first"
                    };
                    out.push(problem(here(), message));
                }
                agent_killed = killing;
            }
            Step::UpdateManifest(_) | Step::RemoveManifest => {
                if !case.static_pod {
                    out.push(problem(
                        here(),
                        format!(
                            "`{}` needs `static: true`: only a static pod has a manifest",
                            step.kind()
                        ),
                    ));
                }
                if !created {
                    out.push(problem(
                        here(),
                        format!("`{}` before `create`", step.kind()),
                    ));
                }
                if let Step::UpdateManifest(patch) = step
                    && !patch.is_object()
                {
                    out.push(problem(
                        here(),
                        "updateManifest: expected a mapping (a JSON merge patch of the pod)",
                    ));
                }
            }
            Step::ExpectEvents(events) => {
                if events.events.is_empty() && events.never.is_empty() {
                    out.push(problem(
                        here(),
                        "`expectEvents` with neither `events` nor `never`",
                    ));
                }
                if events.events.is_empty() && events.hold.is_none() {
                    out.push(problem(
                        here(),
                        "`never` without `events` needs `hold: <duration>`: how long to watch",
                    ));
                }
            }
            Step::ExpectLogs(logs) => {
                if !created {
                    out.push(problem(here(), "`expectLogs` before `create`"));
                }
                if !logs.checks() {
                    out.push(problem(
                        here(),
                        "`expectLogs` checks nothing: expected `contains`, `equals`, `matches` or `lines`",
                    ));
                }
                check_regex(logs.matches.as_deref(), here, &mut out);
                let peer = logs.pod.as_deref().filter(|p| *p != pod_name);
                match peer.map(|p| {
                    case.peers
                        .iter()
                        .find(|c| c.metadata.name.as_deref() == Some(p))
                }) {
                    None => check_container(
                        logs.container.as_deref(),
                        &containers,
                        &init_containers,
                        here,
                        &mut out,
                    ),
                    Some(Some(peer)) => {
                        let (regular, init) = container_names(peer.spec.as_ref());
                        check_container(logs.container.as_deref(), &regular, &init, here, &mut out);
                    }
                    Some(None) => out.push(problem(
                        here(),
                        format!(
                            "expectLogs: no peer `{}`: `pod` names one of the case's `peers`",
                            logs.pod.as_deref().unwrap_or_default()
                        ),
                    )),
                }
            }
            Step::Exec(exec) => {
                if !created {
                    out.push(problem(here(), "`exec` before `create`"));
                }
                if exec.command.is_empty() {
                    out.push(problem(here(), "`exec` without a `command`"));
                }
                for text in [&exec.stdout, &exec.stderr].into_iter().flatten() {
                    check_regex(text.matches.as_deref(), here, &mut out);
                }
                check_container(
                    exec.container.as_deref(),
                    &containers,
                    &init_containers,
                    here,
                    &mut out,
                );
            }
            Step::PortForward(forward) => {
                if !created {
                    out.push(problem(here(), "`portForward` before `create`"));
                }
                if forward.port == 0 {
                    out.push(problem(
                        here(),
                        "`portForward` to port 0: expected the pod's port",
                    ));
                }
                if let Some(body) = &forward.body {
                    check_regex(body.matches.as_deref(), here, &mut out);
                }
            }
            Step::Expect(expect) => {
                if !created {
                    out.push(problem(
                        here(),
                        "`expect` before `create`: expected a `create` step first",
                    ));
                }
                if expect.states.is_empty() && expect.never.is_empty() {
                    out.push(problem(
                        here(),
                        "`expect` with neither `states` nor `never`",
                    ));
                }
                if let Some(message) = empty_range(expect.versions()) {
                    out.push(problem(here(), message));
                }
                if !expect.never.is_empty() && expect.states.is_empty() && expect.hold.is_none() {
                    out.push(problem(
                        here(),
                        "`never` without `states` needs `hold: <duration>`: how long to watch",
                    ));
                }
                for (j, p) in expect.states.iter().chain(expect.never.iter()).enumerate() {
                    let which = if j < expect.states.len() {
                        format!("states[{j}]")
                    } else {
                        format!("never[{}]", j - expect.states.len())
                    };
                    check_pattern(p, &which, &containers, &init_containers, i, &mut out);
                }
                for (j, p) in expect.states.iter().enumerate() {
                    if let Some(from) = p.from.filter(|&k| k >= j) {
                        let message = match j {
                            0 => format!("states[0]: `from: {from}`: no pattern comes before it"),
                            _ => format!(
                                "states[{j}]: `from: {from}` must name an earlier pattern of this step (0 to {})",
                                j - 1
                            ),
                        };
                        out.push(problem(here(), message));
                    }
                    let within = p.within.or(expect.within);
                    if let (Some(after), Some(within)) = (p.after, within)
                        && after.get() >= within.get()
                    {
                        out.push(problem(
                            here(),
                            format!(
                                "states[{j}]: `after: {after}` is not less than `within: {within}`: no time is left to match"
                            ),
                        ));
                    }
                }
                for (j, p) in expect.never.iter().enumerate() {
                    if p.after.is_some() || p.from.is_some() {
                        out.push(problem(
                            here(),
                            format!(
                                "never[{j}]: `after` and `from` do not apply to `never` patterns"
                            ),
                        ));
                    }
                    if p.within.is_some() {
                        out.push(problem(
                            here(),
                            format!(
                                "never[{j}]: `within` does not apply to `never` patterns (`hold` says how long they are watched)"
                            ),
                        ));
                    }
                }
            }
        }
    }
    if !created {
        out.push(problem(
            Anchor::TopKey("steps"),
            "no `create` step: expected one",
        ));
    }
    out
}

/// An object a case creates: a DNS-label name, no namespace (the harness sets it).
fn check_object(object: &Object, anchor: impl Fn() -> Anchor, out: &mut Vec<Problem>) {
    let meta = object.metadata();
    if !meta.name.as_deref().is_some_and(is_dns_label) {
        out.push(problem(
            anchor(),
            format!("{}: expected metadata.name, a DNS label", object.describe()),
        ));
    }
    if meta.namespace.is_some() {
        out.push(problem(
            anchor(),
            format!(
                "{}: metadata.namespace is set: expected none, the harness sets it",
                object.describe()
            ),
        ));
    }
}

fn check_pattern(
    p: &PodPattern,
    which: &str,
    containers: &[&str],
    init_containers: &[&str],
    step: usize,
    out: &mut Vec<Problem>,
) {
    if p.gone && p.checks_fields() {
        out.push(problem(
            Anchor::Step(step),
            format!("{which}: `gone: true` cannot be combined with other fields (a removed pod has no state)"),
        ));
    }
    if !p.gone && !p.checks_fields() {
        out.push(problem(
            Anchor::Step(step),
            format!("{which}: an empty pattern: expected at least one of phase, conditions, containers, initContainers, reason, message, messageEquals, hostIP, deleting, hasPodIp, generation, observedGeneration, gone"),
        ));
    }
    for (names, map, field) in [
        (containers, &p.containers, "containers"),
        (init_containers, &p.init_containers, "initContainers"),
    ] {
        for (name, cp) in map {
            if !names.contains(&name.as_str()) {
                out.push(problem(
                    Anchor::Step(step),
                    format!(
                        "{which}.{field}: no container `{name}` in the pod's {field}: expected one of [{}]",
                        names.join(", ")
                    ),
                ));
            }
            if *cp == ContainerPattern::default() {
                out.push(problem(
                    Anchor::Step(step),
                    format!("{which}.{field}.{name}: an empty container pattern"),
                ));
            }
        }
    }
}

/// A `matches:` pattern must compile.
fn check_regex(pattern: Option<&str>, here: impl Fn() -> Anchor, out: &mut Vec<Problem>) {
    if let Some(Err(e)) = pattern.map(regex::Regex::new) {
        out.push(problem(
            here(),
            format!("matches: invalid regular expression: {e}"),
        ));
    }
}

/// A step's `container:` must name one of the pod's (or be absent when the pod has one).
fn check_container(
    name: Option<&str>,
    containers: &[&str],
    init_containers: &[&str],
    here: impl Fn() -> Anchor,
    out: &mut Vec<Problem>,
) {
    match name {
        None if containers.len() != 1 => out.push(problem(
            here(),
            format!(
                "the pod has {} containers: name one with `container:` (one of [{}])",
                containers.len(),
                containers.join(", ")
            ),
        )),
        Some(name) if !containers.contains(&name) && !init_containers.contains(&name) => {
            out.push(problem(
                here(),
                format!(
                    "no container `{name}` in the pod: expected one of [{}]",
                    containers.join(", ")
                ),
            ));
        }
        _ => {}
    }
}

//! Unit tests of the generated pod status.

use super::*;
use crate::runtime::{Container as RtContainer, Sandbox};
use k8s_openapi::api::core::v1::{ContainerState, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn pod(policy: &str, init: &[&str], app: &[&str]) -> Pod {
    let mk = |n: &&str| Container {
        name: (*n).to_owned(),
        image: Some("busybox".into()),
        ..Default::default()
    };
    let mut pod = Pod::default();
    pod.metadata.name = Some("p".into());
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.uid = Some("uid-1".into());
    let spec = pod.spec.get_or_insert_default();
    spec.restart_policy = Some(policy.into());
    spec.containers = app.iter().map(mk).collect();
    if !init.is_empty() {
        spec.init_containers = Some(init.iter().map(mk).collect());
    }
    pod
}

fn sandbox() -> Sandbox {
    Sandbox {
        id: "sb".into(),
        ready: true,
        created_at: 1,
        attempt: 0,
        ip: Some("10.88.0.2".into()),
    }
}

fn ctr(name: &str, state: RtState, exit: i32, restarts: i32, created: i64) -> RtContainer {
    RtContainer {
        id: format!("{name}-{restarts}"),
        sandbox_id: "sb".into(),
        name: name.into(),
        state,
        created_at: created,
        started_at: created * 1_000_000_000,
        finished_at: if state == RtState::Exited {
            (created + 1) * 1_000_000_000
        } else {
            0
        },
        exit_code: exit,
        reason: match (state, exit) {
            (RtState::Exited, 0) => "Completed".into(),
            (RtState::Exited, _) => "Error".into(),
            _ => String::new(),
        },
        message: String::new(),
        image: "docker.io/library/busybox:latest".into(),
        image_ref: "sha256:abc".into(),
        restart_count: restarts,
        hash: None,
    }
}

fn compute(pod: &Pod, rt: &runtime::PodStatus, terminal: bool) -> PodStatus {
    compute_with(pod, rt, &HashMap::new(), terminal)
}

fn compute_with(
    pod: &Pod,
    rt: &runtime::PodStatus,
    reasons: &HashMap<String, Reason>,
    terminal: bool,
) -> PodStatus {
    generate(&Input {
        pod,
        runtime: rt,
        reasons,
        old: &PodStatus::default(),
        terminal,
        host_ip: Some("192.168.1.10"),
        runtime_name: "fake",
        probes: &crate::prober::Results::new(),
        deadline_exceeded: false,
        resize: &Resize::default(),
    })
}

fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
    s.conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == t))
        .expect("condition present")
}

fn state(s: &PodStatus, name: &str) -> ContainerState {
    s.container_statuses
        .as_ref()
        .and_then(|l| l.iter().find(|c| c.name == name))
        .and_then(|c| c.state.clone())
        .expect("container status")
}

#[test]
fn first_status_is_container_creating() {
    let p = pod("Always", &[], &["c"]);
    let s = compute(&p, &runtime::PodStatus::default(), false);
    assert_eq!(s.phase.as_deref(), Some(PENDING));
    assert_eq!(
        state(&s, "c").waiting.and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );
    let ready = cond(&s, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [c]")
    );
    assert_eq!(cond(&s, "Initialized").status, "True");
    assert_eq!(cond(&s, "PodScheduled").status, "True");
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "False");
    assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn qos_class_is_the_api_servers() {
    // `GetPodQOS`: the class set at creation wins over what the spec would give.
    let mut p = pod("Always", &[], &["c"]);
    p.status.get_or_insert_default().qos_class = Some("Burstable".into());
    let s = compute(&p, &runtime::PodStatus::default(), false);
    assert_eq!(s.qos_class.as_deref(), Some("Burstable"));
}

#[test]
fn running_is_ready() {
    let p = pod("Always", &[], &["c"]);
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("c", RtState::Running, 0, 0, 5)],
    };
    let s = compute(&p, &rt, false);
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    assert_eq!(cond(&s, "Ready").status, "True");
    assert_eq!(cond(&s, "ContainersReady").status, "True");
    assert_eq!(cond(&s, "PodReadyToStartContainers").status, "True");
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert_eq!(cs.container_id.as_deref(), Some("fake://c-0"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.88.0.2"));
}

#[test]
fn phase_per_restart_policy_after_failure() {
    // Exit 3 on the only run.
    for (policy, phase) in [
        ("Never", FAILED),
        ("OnFailure", RUNNING),
        ("Always", RUNNING),
    ] {
        let p = pod(policy, &[], &["c"]);
        let rt = runtime::PodStatus {
            sandboxes: vec![sandbox()],
            containers: vec![ctr("c", RtState::Exited, 3, 0, 5)],
        };
        let s = compute(&p, &rt, false);
        assert_eq!(s.phase.as_deref(), Some(phase), "{policy}");
        let t = state(&s, "c").terminated.expect("terminated");
        assert_eq!(t.exit_code, 3);
        assert_eq!(t.reason.as_deref(), Some("Error"));
    }
}

#[test]
fn phase_per_restart_policy_after_success() {
    for (policy, phase) in [
        ("Never", SUCCEEDED),
        ("OnFailure", SUCCEEDED),
        ("Always", RUNNING),
    ] {
        let p = pod(policy, &[], &["c"]);
        let rt = runtime::PodStatus {
            sandboxes: vec![sandbox()],
            containers: vec![ctr("c", RtState::Exited, 0, 0, 5)],
        };
        let s = compute(&p, &rt, false);
        assert_eq!(s.phase.as_deref(), Some(phase), "{policy}");
        if phase == SUCCEEDED {
            assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
            assert_eq!(
                cond(&s, "Initialized").reason.as_deref(),
                Some("PodCompleted")
            );
        }
    }
}

#[test]
fn crash_loop_shows_waiting_with_last_state() {
    let p = pod("Always", &[], &["c"]);
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![
            ctr("c", RtState::Exited, 1, 1, 7),
            ctr("c", RtState::Exited, 1, 0, 5),
        ],
    };
    let reasons = HashMap::from([(
        "c".to_owned(),
        Reason {
            reason: "CrashLoopBackOff".into(),
            message: "back-off 10s restarting failed container=c pod=p_ns(uid-1)".into(),
        },
    )]);
    let s = compute_with(&p, &rt, &reasons, false);
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(cs.restart_count, 1);
    assert_eq!(
        cs.state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref()),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        cs.last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        Some(1)
    );
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    assert!(!cs.ready);
}

#[test]
fn init_containers_gate_the_app() {
    let p = pod("Always", &["i1", "i2"], &["c"]);
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("i1", RtState::Running, 0, 0, 5)],
    };
    let s = compute(&p, &rt, false);
    assert_eq!(s.phase.as_deref(), Some(PENDING));
    let init = cond(&s, "Initialized");
    assert_eq!(init.status, "False");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [i1 i2]")
    );
    assert_eq!(
        state(&s, "c").waiting.and_then(|w| w.reason).as_deref(),
        Some("PodInitializing")
    );
    let init_statuses = s.init_container_statuses.unwrap();
    assert_eq!(init_statuses[0].name, "i1");
    assert_eq!(init_statuses[1].name, "i2");
}

#[test]
fn failed_init_under_never_fails_the_pod() {
    let p = pod("Never", &["i1"], &["c"]);
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("i1", RtState::Exited, 1, 0, 5)],
    };
    let s = compute(&p, &rt, false);
    assert_eq!(s.phase.as_deref(), Some(FAILED));
    assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodFailed"));
    assert_eq!(
        cond(&s, "Initialized").reason.as_deref(),
        Some("ContainersNotInitialized")
    );
}

#[test]
fn deleted_pending_pod_fails() {
    let p = pod("Always", &[], &["c"]);
    let s = compute(&p, &runtime::PodStatus::default(), true);
    assert_eq!(s.phase.as_deref(), Some(FAILED));
}

#[test]
fn deleted_running_pod_phase_from_exit_codes() {
    for (exit, phase) in [(0, SUCCEEDED), (137, FAILED)] {
        let p = pod("Always", &[], &["c"]);
        let rt = runtime::PodStatus {
            sandboxes: vec![sandbox()],
            containers: vec![ctr("c", RtState::Exited, exit, 0, 5)],
        };
        let s = compute(&p, &rt, true);
        assert_eq!(s.phase.as_deref(), Some(phase));
    }
}

#[test]
fn terminal_phase_waits_for_the_worker() {
    let running = PodStatus {
        phase: Some(RUNNING.into()),
        ..Default::default()
    };
    let failed = PodStatus {
        phase: Some(FAILED.into()),
        ..Default::default()
    };
    let held = delay_terminal_phase(&running, failed.clone(), false);
    assert_eq!(held.phase.as_deref(), Some(RUNNING));
    let never_written = delay_terminal_phase(&PodStatus::default(), failed.clone(), false);
    assert_eq!(never_written.phase.as_deref(), Some(PENDING));
    let done = delay_terminal_phase(&running, failed.clone(), true);
    assert_eq!(done.phase.as_deref(), Some(FAILED));
    let already = delay_terminal_phase(&failed, failed.clone(), false);
    assert_eq!(already.phase.as_deref(), Some(FAILED));
}

#[test]
fn terminal_phase_is_sticky() {
    let mut p = pod("Always", &[], &["c"]);
    p.status = Some(PodStatus {
        phase: Some(SUCCEEDED.into()),
        ..Default::default()
    });
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("c", RtState::Running, 0, 0, 5)],
    };
    assert_eq!(compute(&p, &rt, false).phase.as_deref(), Some(SUCCEEDED));
}

#[test]
fn a_past_deadline_fails_the_pod_whatever_its_containers_exit_with() {
    // pause answers SIGTERM with exit 0: without the override the pod would be Succeeded.
    let p = pod("Always", &[], &["c"]);
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("c", RtState::Exited, 0, 0, 5)],
    };
    let probes = crate::prober::Results::new();
    let (reasons, old) = (HashMap::new(), PodStatus::default());
    let (runtime, pod) = (&rt, &p);
    let s = generate(&Input {
        pod,
        runtime,
        reasons: &reasons,
        old: &old,
        terminal: true,
        host_ip: None,
        runtime_name: "fake",
        probes: &probes,
        deadline_exceeded: true,
        resize: &Resize::default(),
    });
    assert_eq!(s.phase.as_deref(), Some(FAILED));
    assert_eq!(s.reason.as_deref(), Some(active_deadline::REASON));
}

#[test]
fn foreign_conditions_are_kept() {
    let mut p = pod("Always", &[], &["c"]);
    p.status = Some(PodStatus {
        conditions: Some(vec![condition("example.com/gate", true, None, None)]),
        ..Default::default()
    });
    let s = compute(&p, &runtime::PodStatus::default(), false);
    assert_eq!(cond(&s, "example.com/gate").status, "True");
}

#[test]
fn a_resize_shows_its_conditions_and_the_allocated_resources() {
    let mut p = pod("Always", &[], &["c"]);
    p.metadata.generation = Some(3);
    let requests: crate::resource::List = [("cpu".to_owned(), Quantity("25m".into()))].into();
    p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        requests: Some(requests.clone()),
        ..Default::default()
    });
    let rt = runtime::PodStatus {
        sandboxes: vec![sandbox()],
        containers: vec![ctr("c", RtState::Running, 0, 0, 5)],
    };
    let resize = Resize {
        pending: Some(crate::allocation::Pending {
            reason: "Deferred".into(),
            message: "Node didn't have enough resource: cpu".into(),
            generation: Some(2),
        }),
        in_progress: true,
    };
    let s = generate(&Input {
        pod: &p,
        runtime: &rt,
        reasons: &HashMap::new(),
        old: &PodStatus::default(),
        terminal: false,
        host_ip: None,
        runtime_name: "fake",
        probes: &crate::prober::Results::new(),
        deadline_exceeded: false,
        resize: &resize,
    });
    let pending = cond(&s, "PodResizePending");
    assert_eq!(
        (pending.reason.as_deref(), pending.observed_generation),
        (Some("Deferred"), Some(2)),
        "the generation it was decided for"
    );
    assert_eq!(cond(&s, "PodResizeInProgress").observed_generation, Some(3));
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(cs.allocated_resources.as_ref(), Some(&requests));
    assert_eq!(
        cs.resources.as_ref().unwrap().requests.as_ref(),
        Some(&requests)
    );
    let done = compute(&p, &rt, false);
    assert!(
        !done
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_.starts_with("PodResize")),
        "no resize, no condition"
    );
}

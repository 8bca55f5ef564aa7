//! Mutants: the reference agent with one kubelet rule broken on purpose, to measure how much
//! the cases catch (`nodeconform mutants`). A mutant is chosen once for the whole process
//! ([`select`]) and every agent in it then breaks that rule; each rule's site asks
//! [`active`].
//!
//! Built only with the `mutants` cargo feature: without it [`active`] is a constant `false`
//! and no agent can be a mutant. Each variant's doc names the rule it breaks and the kubelet
//! code that holds it.

use std::sync::OnceLock;

/// One kubelet rule broken on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Mutant {
    /// The crash-loop back-off starts at half the kubelet's 10 s (`initialCrashLoopBackOff`).
    CrashBackoffHalf,
    /// The crash-loop back-off starts at twice the kubelet's 10 s.
    CrashBackoffDouble,
    /// The crash-loop back-off never doubles (`flowcontrol.Backoff.Next`).
    CrashBackoffConstant,
    /// A restarted container keeps its predecessor's restart count
    /// (`kuberuntime_container.go`: `restartCount + 1` on each new container).
    RestartCountFrozen,
    /// Every kill waits 1 s for the container, whatever the grace period
    /// (`calculateEffectiveGracePeriod`).
    KillGraceOneSecond,
    /// A deletion's own grace period is ignored for the spec's
    /// (`calculateEffectiveGracePeriod` prefers `deletionGracePeriodSeconds`).
    DeletionGraceIgnored,
    /// `status.startTime` is never set (the status manager stamps it once, at the first status).
    StartTimeUnset,
    /// A container's crash-loop back-off outlives an update of its spec (a new image): the
    /// kubelet keys it by the spec's hash (`GetStableKey`), so the new container starts at once.
    BackoffKeptOnUpdate,
    /// A container is reported ready while it runs, whatever its readiness probe says
    /// (`prober_manager.UpdatePodStatus`).
    ReadinessIgnored,
    /// A failed liveness or startup probe never kills the container (`computePodActions`).
    LivenessIgnored,
    /// A probe fails after one failed try, whatever its `failureThreshold` (`worker.doProbe`).
    ProbeFailureThresholdOne,
    /// Probes run twice as often as their `periodSeconds` says (`worker.run`).
    ProbePeriodHalf,
    /// A `postStart` hook is not run (`kuberuntime_container.startContainer`).
    PostStartSkipped,
    /// A `preStop` hook is not run (`killContainer`).
    PreStopSkipped,
    /// `$(VAR)` references in `command`, `args` and `env` stay unexpanded (`expansion.Expand`).
    EnvExpansionSkipped,
    /// `imagePullPolicy: Always` pulls only a missing image (`EnsureImageExists`).
    PullAlwaysIgnored,
    /// The pod's readiness gates are left out of its Ready condition
    /// (`GeneratePodReadyCondition`).
    ReadinessGatesIgnored,
    /// Every status write stamps each condition's `lastTransitionTime` anew, changed or not
    /// (the status manager keeps it while the status stays).
    TransitionTimeRestamped,
    /// A container of a `restartPolicy: OnFailure` pod that succeeded is started again
    /// (`ContainerShouldRestart`).
    OnFailureRestartsSuccess,
    /// Housekeeping leaves the containers and sandboxes of pods it no longer knows
    /// (`HandlePodCleanups`).
    OrphansKept,
    /// `status.hostIP` and `hostIPs` are never set (`generateAPIPodStatus`).
    HostIpUnset,
    /// `activeDeadlineSeconds` is never enforced (`pastActiveDeadline`).
    ActiveDeadlineIgnored,
    /// The node's Lease is written once and never renewed (`nodelease.controller`).
    LeaseNotRenewed,
    /// The node's Lease is renewed twice as often as the kubelet's quarter of its duration
    /// (`nodelease.NewController`'s renew interval).
    LeaseRenewHalf,
    /// The file at `terminationMessagePath` is not read (`getTerminationMessage`).
    TerminationMessageIgnored,
    /// A pod whose `nodeSelector` or required node affinity the node does not match is
    /// admitted (`NodeAffinity` admission).
    NodeAffinityIgnored,
    /// The spec's `terminationGracePeriodSeconds` is ignored for the default 30 s
    /// (`calculateEffectiveGracePeriod`).
    SpecGraceIgnored,
    /// A failed pull is retried at once, with no image pull back-off (`ImagePullBackOff`).
    ImageBackoffNone,
    /// A pod whose containers all succeeded is reported Failed (`getPhase`).
    SucceededAsFailed,
    /// A failed init container that will not restart does not fail the pod (`getPhase`).
    FailedInitIgnored,
    /// No event is recorded (the kubelet's `EventRecorder`).
    EventsNotRecorded,
    /// Downward-API volumes are not rewritten when the pod's labels or annotations change
    /// (the kubelet remounts them when it syncs the updated pod).
    DownwardApiStale,
    /// An in-place resize is reported as done without `UpdateContainerResources`: the
    /// status shows the new resources, the container keeps the old ones
    /// (`doPodResizeAction`).
    ResizeNotActuated,
}

static SELECTED: OnceLock<Mutant> = OnceLock::new();

/// Makes every agent of this process the mutant `mutant`; `false` when one was chosen already
/// (a process is one mutant for its whole life).
#[cfg(feature = "mutants")]
pub fn select(mutant: Mutant) -> bool {
    SELECTED.set(mutant).is_ok()
}

/// The mutant this process's agents are, if any.
pub fn selected() -> Option<Mutant> {
    SELECTED.get().copied()
}

/// Whether this process's agents break `mutant`'s rule.
#[inline]
pub(crate) fn active(mutant: Mutant) -> bool {
    cfg!(feature = "mutants") && selected() == Some(mutant)
}

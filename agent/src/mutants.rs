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
    /// A container is reported ready while it runs, whatever its readiness probe says
    /// (`prober_manager.UpdatePodStatus`).
    ReadinessIgnored,
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

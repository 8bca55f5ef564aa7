//! The agent's timing constants, with the upstream kubelet's defaults.

use std::time::Duration;

/// Every period and limit the agent uses. [`Timings::default`] is the
/// upstream kubelet's configuration; [`Timings::fast`] shortens everything
/// for tests and cases while keeping the same ratios where they matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timings {
    /// PLEG relist period (`--pleg-relist-period`, 1 s).
    pub pleg_relist_period: Duration,
    /// How stale the last successful PLEG relist may get before the node is
    /// not ready (`relistThreshold`, 3 min).
    pub pleg_health_threshold: Duration,
    /// Housekeeping period (`housekeepingPeriod`, 2 s).
    pub housekeeping_period: Duration,
    /// Full resync of every pod worker (`syncFrequency`, 1 min).
    pub sync_frequency: Duration,
    /// Status manager batch sync: retry of failed status writes (10 s).
    pub status_batch_sync: Duration,
    /// How often the node status is computed (`nodeStatusUpdateFrequency`, 10 s).
    pub node_status_update_frequency: Duration,
    /// How often the node status is written when nothing changed (`nodeStatusReportFrequency`, 5 min).
    pub node_status_report_frequency: Duration,
    /// Lease duration written to the node Lease (`nodeLeaseDurationSeconds`, 40 s).
    pub node_lease_duration: Duration,
    /// How often the Lease is renewed (a quarter of the duration, 10 s).
    pub node_lease_renew_interval: Duration,
    /// First CrashLoopBackOff delay (10 s).
    pub crash_backoff_initial: Duration,
    /// CrashLoopBackOff cap (`maxContainerRestartPeriod`, 300 s); reset after twice this of running.
    pub crash_backoff_max: Duration,
    /// First image pull back-off delay (10 s).
    pub image_backoff_initial: Duration,
    /// Image pull back-off cap (300 s).
    pub image_backoff_max: Duration,
    /// The shortest stop timeout given to `StopContainer` (the kubelet's `minimumGracePeriodInSeconds`, 2 s).
    pub minimum_stop_grace: Duration,
    /// Timeout of a single CRI call that is not a stop or a pull (the kubelet's `--runtime-request-timeout`, 2 min).
    pub runtime_request_timeout: Duration,
    /// First retry delay after a volume failed to set up (upstream 500 ms).
    pub volume_backoff_initial: Duration,
    /// Cap of the volume set-up back-off (upstream 2 min 2 s).
    pub volume_backoff_max: Duration,
    /// How often the static pod directory is reread in full (upstream 20 s;
    /// changes are seen at once through inotify).
    pub file_check_frequency: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            pleg_relist_period: Duration::from_secs(1),
            pleg_health_threshold: Duration::from_secs(180),
            housekeeping_period: Duration::from_secs(2),
            sync_frequency: Duration::from_secs(60),
            status_batch_sync: Duration::from_secs(10),
            node_status_update_frequency: Duration::from_secs(10),
            node_status_report_frequency: Duration::from_secs(300),
            node_lease_duration: Duration::from_secs(40),
            node_lease_renew_interval: Duration::from_secs(10),
            crash_backoff_initial: Duration::from_secs(10),
            crash_backoff_max: Duration::from_secs(300),
            image_backoff_initial: Duration::from_secs(10),
            image_backoff_max: Duration::from_secs(300),
            minimum_stop_grace: Duration::from_secs(2),
            runtime_request_timeout: Duration::from_secs(120),
            volume_backoff_initial: Duration::from_millis(500),
            volume_backoff_max: Duration::from_secs(122),
            file_check_frequency: Duration::from_secs(20),
        }
    }
}

impl Timings {
    /// Shortened timings for tests: sub-second loops and back-offs, the
    /// same structure as the defaults.
    pub fn fast() -> Self {
        Self {
            pleg_relist_period: Duration::from_millis(100),
            pleg_health_threshold: Duration::from_secs(3),
            housekeeping_period: Duration::from_millis(200),
            sync_frequency: Duration::from_secs(5),
            status_batch_sync: Duration::from_millis(500),
            node_status_update_frequency: Duration::from_millis(200),
            node_status_report_frequency: Duration::from_secs(5),
            node_lease_duration: Duration::from_secs(4),
            node_lease_renew_interval: Duration::from_secs(1),
            crash_backoff_initial: Duration::from_millis(300),
            crash_backoff_max: Duration::from_secs(3),
            image_backoff_initial: Duration::from_millis(300),
            image_backoff_max: Duration::from_secs(3),
            minimum_stop_grace: Duration::from_secs(2),
            runtime_request_timeout: Duration::from_secs(10),
            volume_backoff_initial: Duration::from_millis(100),
            volume_backoff_max: Duration::from_secs(1),
            file_check_frequency: Duration::from_secs(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstream() {
        let t = Timings::default();
        assert_eq!(t.pleg_relist_period, Duration::from_secs(1));
        assert_eq!(t.node_lease_renew_interval * 4, t.node_lease_duration);
        assert_eq!(t.crash_backoff_max, Duration::from_secs(300));
    }
}

//! Exponential back-off per key, the kubelet's `flowcontrol.Backoff`.
//!
//! Used for CrashLoopBackOff (key: pod + container) and image pull back-off
//! (key: pod + image). The first failure is retried at once; each failure
//! within the window doubles the delay up to the cap; an entry that was not
//! touched for twice the cap starts over (a container that ran 10 minutes
//! with the default 300 s cap is restarted at once again).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Back-off state of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

/// Per-key exponential back-off.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Backoff {
    /// A back-off starting at `initial`, doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// The current delay of `key` (zero when it has none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// Records a failure at `event` (e.g. the container's `finishedAt`),
    /// growing the delay: `initial` for a new or expired key, else doubled
    /// up to the cap.
    pub fn next(&mut self, key: &str, event: Instant, now: Instant) {
        let (initial, max) = (self.initial, self.max);
        let entry = self.entries.entry(key.to_owned()).or_insert(Entry {
            backoff: Duration::ZERO,
            last_update: now,
        });
        if entry.backoff.is_zero() || has_expired(event, entry.last_update, max) {
            entry.backoff = initial;
        } else {
            entry.backoff = (entry.backoff * 2).min(max);
        }
        entry.last_update = now;
    }

    /// Whether `key` is still backing off from a failure at `event`.
    pub fn is_in_backoff_since(&self, key: &str, event: Instant, now: Instant) -> bool {
        let Some(entry) = self.entries.get(key) else {
            return false;
        };
        if has_expired(now, entry.last_update, self.max) {
            return false;
        }
        now.saturating_duration_since(event) < entry.backoff
    }

    /// Whether `key` is still backing off from its last recorded failure (`IsInBackOffSinceUpdate`).
    pub fn is_in_backoff_since_update(&self, key: &str, now: Instant) -> bool {
        let Some(entry) = self.entries.get(key) else {
            return false;
        };
        if has_expired(now, entry.last_update, self.max) {
            return false;
        }
        now.saturating_duration_since(entry.last_update) < entry.backoff
    }

    /// When the back-off of `key` since its last recorded failure ends.
    pub fn expiry_since_update(&self, key: &str) -> Instant {
        match self.entries.get(key) {
            Some(e) => e.last_update + e.backoff,
            None => Instant::now(),
        }
    }

    /// When the back-off of `key` started at `event` ends.
    pub fn expiry(&self, key: &str, event: Instant) -> Instant {
        event + self.get(key)
    }

    /// Forgets `key`.
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }
}

/// An entry not updated for twice the cap is forgotten (`hasExpired`).
fn has_expired(event: Instant, last_update: Instant, max: Duration) -> bool {
    event.saturating_duration_since(last_update) > max * 2
}

/// Formats a duration truncated to milliseconds like Go's `time.Duration.String`
/// ("10s", "5m0s", "300ms", "0s"), as it appears in the kubelet's messages.
pub fn go_duration(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        return "0s".into();
    }
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let total_ms = d.as_millis();
    let secs = (total_ms / 1000) % 60;
    let frac = total_ms % 1000;
    let mins = (total_ms / 60_000) % 60;
    let hours = total_ms / 3_600_000;
    let sec_str = if frac == 0 {
        format!("{secs}s")
    } else {
        let f = format!("{frac:03}");
        format!("{secs}.{}s", f.trim_end_matches('0'))
    };
    if hours > 0 {
        format!("{hours}h{mins}m{sec_str}")
    } else if mins > 0 {
        format!("{mins}m{sec_str}")
    } else {
        sec_str
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn doubles_to_cap_and_first_failure_is_free() {
        let mut b = Backoff::new(10 * S, 300 * S);
        let t0 = Instant::now();
        assert!(
            !b.is_in_backoff_since("c", t0, t0),
            "first failure restarts at once"
        );
        b.next("c", t0, t0);
        assert_eq!(b.get("c"), 10 * S);
        let mut expected = 10;
        for _ in 0..8 {
            tokio::time::advance(S).await;
            let now = Instant::now();
            assert!(b.is_in_backoff_since("c", now, now));
            b.next("c", now, now);
            expected = (expected * 2).min(300);
            assert_eq!(b.get("c"), expected * S);
        }
        assert_eq!(b.get("c"), 300 * S);
    }

    #[tokio::test(start_paused = true)]
    async fn in_backoff_until_delay_passed() {
        let mut b = Backoff::new(10 * S, 300 * S);
        let t0 = Instant::now();
        b.next("c", t0, t0);
        tokio::time::advance(9 * S).await;
        assert!(b.is_in_backoff_since("c", t0, Instant::now()));
        tokio::time::advance(2 * S).await;
        assert!(!b.is_in_backoff_since("c", t0, Instant::now()));
        assert_eq!(b.expiry("c", t0), t0 + 10 * S);
    }

    #[tokio::test(start_paused = true)]
    async fn resets_after_ten_minutes_of_running() {
        let mut b = Backoff::new(10 * S, 300 * S);
        let t0 = Instant::now();
        b.next("c", t0, t0);
        b.next("c", t0, t0);
        b.next("c", t0, t0);
        assert_eq!(b.get("c"), 40 * S);
        // The container then runs for 10 minutes and a bit before it fails again.
        tokio::time::advance(601 * S).await;
        let now = Instant::now();
        assert!(!b.is_in_backoff_since("c", now, now));
        b.next("c", now, now);
        assert_eq!(b.get("c"), 10 * S);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(10 * S), "10s");
        assert_eq!(go_duration(300 * S), "5m0s");
        assert_eq!(go_duration(80 * S), "1m20s");
        assert_eq!(go_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(
            go_duration(Duration::from_micros(400)),
            "0s",
            "truncated to milliseconds"
        );
    }
}

//! Expectations on what an agent reports beside the pod status: its events
//! (`expectEvents`) and a container's log read through the API (`expectLogs`).

use serde::{Deserialize, Serialize};

use super::duration::CaseDuration;
use super::streams::TextMatch;

/// `expectEvents`: events about the pod (or the node) that must appear, and ones that must not.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventExpectation {
    /// How long to wait for every pattern in `events` (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// Whose events: the case's pod (default) or the node under test.
    #[serde(default)]
    pub about: EventSubject,
    /// Patterns each matched by some event (in any order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventPattern>,
    /// Patterns no event may match, checked when the step ends (after `hold`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<EventPattern>,
    /// Keep watching this long after `events` matched, so `never` covers a stretch of time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<CaseDuration>,
}

/// Whose events an `expectEvents` step reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EventSubject {
    /// `involvedObject` is the case's pod, in the case's namespace.
    #[default]
    Pod,
    /// `involvedObject` is the node under test (the kubelet writes these to `default`).
    Node,
}

/// What one event must look like. Every field present must match.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventPattern {
    /// `reason` equals (`Pulled`, `BackOff`, `FailedMount`, …).
    pub reason: String,
    /// `type` equals: `Normal` or `Warning`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<EventType>,
    /// `message` contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The event's `count` (or `series.count`) is at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_at_least: Option<i32>,
}

/// An event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// `expectLogs`: a container's log, read through the API (`pods/log`), must match within a bound.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LogExpectation {
    /// The pod: a peer's name (default: the pod under test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The container (default: the pod's only container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Read the previous (terminated) instance's log.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub previous: bool,
    /// Read it over WebSocket with this protocol (`binary.k8s.io`,
    /// `base64.binary.k8s.io`), as upstream's websocket log test does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<String>,
    /// How long to keep reading until the log matches (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// The log contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The log is exactly this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// The log matches this regular expression (Rust `regex` syntax; `(?m)` for line anchors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// Lines the log must contain, each as a whole line (as `env` prints `NAME=value`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
}

impl LogExpectation {
    /// The log's matchers.
    fn text(&self) -> TextMatch {
        TextMatch {
            contains: self.contains.clone(),
            equals: self.equals.clone(),
            matches: self.matches.clone(),
            lines: self.lines.clone(),
        }
    }

    /// `None` when `log` matches, else what differs.
    pub fn mismatch(&self, log: &str) -> Option<String> {
        self.text().mismatch("the log", log)
    }

    /// Whether it checks anything.
    pub fn checks(&self) -> bool {
        self.text().checks()
    }
}

impl EventPattern {
    /// `None` when the event `(reason, type, message, count)` matches.
    pub fn mismatch(
        &self,
        reason: &str,
        event_type: &str,
        message: &str,
        count: i32,
    ) -> Option<String> {
        if reason != self.reason {
            return Some(format!("reason is {reason}, expected {}", self.reason));
        }
        if let Some(want) = self.event_type
            && event_type != want.as_str()
        {
            return Some(format!("type is {event_type}, expected {}", want.as_str()));
        }
        if let Some(want) = &self.message
            && !message.contains(want.as_str())
        {
            return Some(format!("message {message:?} does not contain {want:?}"));
        }
        if let Some(want) = self.count_at_least
            && count < want
        {
            return Some(format!("count is {count}, expected at least {want}"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_match_by_content_and_whole_lines() {
        let exp = LogExpectation {
            contains: Some("B=2".into()),
            lines: vec!["A=1".into()],
            ..Default::default()
        };
        assert_eq!(exp.mismatch("A=1\nB=2\n"), None);
        assert!(
            exp.mismatch("AA=1\nB=2\n")
                .unwrap()
                .contains("lacks the lines [\"A=1\"]")
        );
        let exact = LogExpectation {
            equals: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(exact.mismatch(""), None);
        let re = LogExpectation {
            matches: Some("(?m)^HOSTNAME=[a-z-]+$".into()),
            ..Default::default()
        };
        assert_eq!(re.mismatch("A=1\nHOSTNAME=pod-a\n"), None);
        assert!(
            re.mismatch("HOSTNAME=\n")
                .unwrap()
                .contains("does not match")
        );
        assert!(exact.mismatch("x").is_some());
    }

    #[test]
    fn events_match_reason_type_message_and_count() {
        let p = EventPattern {
            reason: "BackOff".into(),
            event_type: Some(EventType::Warning),
            message: Some("restarting".into()),
            count_at_least: Some(2),
        };
        assert_eq!(
            p.mismatch(
                "BackOff",
                "Warning",
                "Back-off restarting failed container",
                2
            ),
            None
        );
        assert!(
            p.mismatch("BackOff", "Warning", "Back-off restarting", 1)
                .unwrap()
                .contains("count is 1")
        );
        assert!(
            p.mismatch("Pulled", "Normal", "", 1)
                .unwrap()
                .contains("reason is Pulled")
        );
        assert!(
            p.mismatch("BackOff", "Normal", "restarting", 3)
                .unwrap()
                .contains("type is Normal")
        );
    }
}

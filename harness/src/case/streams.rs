//! Steps that reach into a running container through the API server, as
//! `kubectl exec` and `kubectl port-forward` do: `exec` runs a command
//! (`pods/exec`) and checks its output and exit code; `portForward` sends
//! an HTTP request to a port of the pod (`pods/portforward`) and checks the
//! answer. Both go over the node agent's streaming endpoints.

use serde::{Deserialize, Serialize};

use super::duration::CaseDuration;

/// What a text (a log, a command's output, a response body) must be.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TextMatch {
    /// It contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// It is exactly this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// It matches this regular expression (Rust `regex` syntax; `(?m)` for line anchors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// Lines it must contain, each as a whole line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
}

impl TextMatch {
    /// `None` when `text` matches, else what differs; `what` names the text
    /// (`the log`, `stdout`).
    pub fn mismatch(&self, what: &str, text: &str) -> Option<String> {
        if let Some(want) = &self.equals
            && text != want
        {
            return Some(format!("{what} is {text:?}, expected exactly {want:?}"));
        }
        if let Some(want) = &self.contains
            && !text.contains(want.as_str())
        {
            return Some(format!("{what} {text:?} does not contain {want:?}"));
        }
        if let Some(pattern) = &self.matches {
            match regex::Regex::new(pattern) {
                Ok(re) if re.is_match(text) => {}
                Ok(_) => return Some(format!("{what} {text:?} does not match /{pattern}/")),
                Err(e) => return Some(format!("matches: invalid regular expression: {e}")),
            }
        }
        let missing: Vec<&str> = self
            .lines
            .iter()
            .map(String::as_str)
            .filter(|want| !text.lines().any(|line| line == *want))
            .collect();
        (!missing.is_empty()).then(|| format!("{what} {text:?} lacks the lines {missing:?}"))
    }

    /// Whether it checks anything.
    pub fn checks(&self) -> bool {
        self.equals.is_some()
            || self.contains.is_some()
            || self.matches.is_some()
            || !self.lines.is_empty()
    }
}

/// `exec`: a command run in a container through `pods/exec`; retried until
/// its output and exit code match, within the bound.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecStep {
    /// The container (default: the pod's only container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The command and its arguments (no shell unless it is `sh -c …`).
    pub command: Vec<String>,
    /// Text sent to the command's standard input, which then ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Speak WebSocket with this channel protocol (`channel.k8s.io`,
    /// `v4.channel.k8s.io`, `v5.channel.k8s.io`, …) instead of SPDY, as
    /// upstream's websocket tests and kubectl ≥ 1.30 do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<String>,
    /// How long to keep trying until everything matches (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// What its standard output must be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<TextMatch>,
    /// What its standard error must be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<TextMatch>,
    /// Its exit code (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// `portForward`: an HTTP `GET` sent to a port of the pod through
/// `pods/portforward`; retried until the answer matches, within the bound.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PortForwardStep {
    /// The pod's port.
    pub port: u16,
    /// The request path (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How long to keep trying until the answer matches (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<CaseDuration>,
    /// The answer's status code (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What its body must be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<TextMatch>,
}

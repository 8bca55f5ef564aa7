//! Scenarios: scripted client requests, written as YAML in `fidelity/scenarios/`.
//!
//! A scenario is what one client does against an API server, request by request: the
//! method, path, query, body and content type it sends, the watches it opens and when it
//! reads their events. Strings may name variables in braces: `{ns}` is the scenario's
//! own namespace (made fresh for every run, so runs never see each other), any other
//! name is a value captured from an earlier response (`capture: {rv: /metadata/resourceVersion}`).
//! A captured value keeps its JSON type when a string is exactly `{name}`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// The file name without `.yaml`; unique.
    pub name: String,
    /// What the scenario checks and which upstream behaviour it pins down.
    pub description: String,
    /// The clients that send these requests (client-go informers, kubectl, the kubelet, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
    /// The requests, in order.
    pub steps: Vec<Step>,
}

/// One thing the client does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "do",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Step {
    /// Sends one request and records the answer.
    Request {
        /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
        method: Method,
        /// The URL path, e.g. `/api/v1/namespaces/{ns}/pods`.
        path: String,
        /// Query parameters.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        query: BTreeMap<String, String>,
        /// The body's content type; defaults by method (JSON; a PATCH must say which).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Content>,
        /// The body, as JSON (sent as YAML for `apply`, JSON being YAML).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        /// The body is a captured object with a JSON merge patch applied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_from: Option<BodyFrom>,
        /// The body as text, sent as it is (malformed input, YAML).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw: Option<String>,
        /// The `Accept` header; `application/json` when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accept: Option<String>,
        /// Values to capture from the answer's JSON: variable name → JSON pointer (`""`: all).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        capture: BTreeMap<String, String>,
    },
    /// Opens a watch (`watch=1` is added to the query) and keeps reading it in the background.
    Watch {
        /// The name later steps use for it.
        id: String,
        /// The URL path of the collection.
        path: String,
        /// Query parameters (`resourceVersion`, selectors, `allowWatchBookmarks`, …).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        query: BTreeMap<String, String>,
    },
    /// Records the events a watch delivered since it was last read: every event until it
    /// has been quiet for a moment (bookmarks are left out unless they end the initial events).
    Events {
        /// The watch.
        watch: String,
        /// Read until the server ends the stream (`timeoutSeconds`, an `ERROR` event).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        until_end: bool,
    },
    /// Stops reading a watch and closes it.
    Close {
        /// The watch.
        watch: String,
    },
}

/// HTTP methods a scenario uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
}

impl Method {
    /// The `http` method.
    pub fn http(self) -> http::Method {
        match self {
            Method::Get => http::Method::GET,
            Method::Post => http::Method::POST,
            Method::Put => http::Method::PUT,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        }
    }
}

/// Request body content types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Content {
    /// `application/json`
    Json,
    /// `application/yaml` (kubectl's `create -f` of YAML sends JSON; some clients send YAML)
    Yaml,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/json-patch+json`
    JsonPatch,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl Content {
    /// The `Content-Type` header value.
    pub fn mime(self) -> &'static str {
        match self {
            Content::Json => "application/json",
            Content::Yaml => "application/yaml",
            Content::Merge => "application/merge-patch+json",
            Content::Strategic => "application/strategic-merge-patch+json",
            Content::JsonPatch => "application/json-patch+json",
            Content::Apply => "application/apply-patch+yaml",
        }
    }
}

/// A body made from a captured object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BodyFrom {
    /// The captured variable holding the object.
    pub var: String,
    /// A JSON merge patch (RFC 7386) applied to it; `null` removes a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<Value>,
}

/// Why a scenario file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line, 0 when unknown.
        line: usize,
        /// 1-based column, 0 when unknown.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl Scenario {
    /// Reads and checks one scenario file; its `name` must be the file's stem.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: display.clone(),
            source,
        })?;
        let scenario: Scenario = serde_yaml::from_str(&text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            Error::Parse {
                path: display.clone(),
                line,
                column,
                message: e.to_string(),
            }
        })?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if scenario.name != stem {
            return Err(Error::Parse {
                path: display,
                line: 1,
                column: 1,
                message: format!(
                    "name `{}` differs from the file name `{stem}`",
                    scenario.name
                ),
            });
        }
        scenario.check().map_err(|message| Error::Parse {
            path: path.display().to_string(),
            line: 0,
            column: 0,
            message,
        })?;
        Ok(scenario)
    }

    /// Every scenario file (`*.yaml`) in `dir`, sorted by name.
    pub fn load_dir(dir: &Path) -> Result<Vec<Self>, Error> {
        let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
            path: dir.display().to_string(),
            source,
        })?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        paths.iter().map(|p| Self::load(p)).collect()
    }

    /// Checks what the types cannot: watches are opened before they are read, a PATCH
    /// says its patch type, a body has one source.
    pub fn check(&self) -> Result<(), String> {
        let mut open = std::collections::BTreeSet::new();
        for (i, step) in self.steps.iter().enumerate() {
            let at = format!("step {} ", i + 1);
            match step {
                Step::Request {
                    method,
                    content,
                    body,
                    body_from,
                    ..
                } => {
                    if *method == Method::Patch && content.is_none() {
                        return Err(format!(
                            "{at}: a PATCH needs `content` (merge, strategic, json-patch, apply)"
                        ));
                    }
                    if body.is_some() && body_from.is_some() {
                        return Err(format!("{at}: `body` and `bodyFrom` both set"));
                    }
                }
                Step::Watch { id, .. } => {
                    if !open.insert(id.clone()) {
                        return Err(format!("{at}: watch `{id}` is already open"));
                    }
                }
                Step::Events { watch, .. } => {
                    if !open.contains(watch) {
                        return Err(format!("{at}: no open watch `{watch}`"));
                    }
                }
                Step::Close { watch } => {
                    if !open.remove(watch) {
                        return Err(format!("{at}: no open watch `{watch}`"));
                    }
                }
            }
        }
        Ok(())
    }

    /// How many requests the scenario sends (watches included).
    pub fn requests(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Request { .. } | Step::Watch { .. }))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_from_yaml_with_their_tags() {
        let s: Scenario = serde_yaml::from_str(
            r#"
name: x
description: d
steps:
  - do: watch
    id: w
    path: /api/v1/namespaces/{ns}/pods
    query: {resourceVersion: "0"}
  - do: request
    method: PATCH
    path: /api/v1/namespaces/{ns}/pods/p
    content: strategic
    body: {metadata: {labels: {a: b}}}
  - do: events
    watch: w
"#,
        )
        .unwrap();
        assert_eq!(s.steps.len(), 3);
        assert_eq!(s.requests(), 2);
        s.check().unwrap();
    }

    #[test]
    fn mistakes_are_named() {
        let e = serde_yaml::from_str::<Scenario>(
            "name: x\ndescription: d\nsteps:\n  - do: requets\n    method: GET\n    path: /\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant `requets`"), "{e}");
        let s: Scenario = serde_yaml::from_str(
            "name: x\ndescription: d\nsteps:\n  - do: request\n    method: PATCH\n    path: /\n",
        )
        .unwrap();
        assert!(s.check().unwrap_err().contains("needs `content`"));
        let s: Scenario =
            serde_yaml::from_str("name: x\ndescription: d\nsteps:\n  - do: events\n    watch: w\n")
                .unwrap();
        assert!(s.check().unwrap_err().contains("no open watch"));
    }
}

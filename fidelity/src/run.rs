//! Running a scenario against a server: every request sent as the scenario says, every
//! answer and watch event recorded as the server gave it (normalizing comes after).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::scenario::{Content, Scenario, Step};

/// How long a watch must stay quiet before its events count as all delivered (by default).
const QUIET: Duration = Duration::from_millis(300);
/// The longest wait for one answer or for the events a recording says will come.
const PATIENCE: Duration = Duration::from_secs(10);

/// An API server to run scenarios against.
#[derive(Clone)]
pub struct Target {
    client: kube::Client,
    /// What it is, for reports (`kube-apiserver v1.28.7 at https://…`).
    pub name: String,
    quiet: Duration,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("name", &self.name).finish()
    }
}

/// Why a scenario could not be run (a server's error answers are records, not errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A request could not be sent or its answer not read.
    #[error("step {step} of {scenario}: {message}")]
    Transport {
        /// The scenario.
        scenario: String,
        /// 1-based step.
        step: usize,
        /// What failed.
        message: String,
    },
    /// The scenario refers to something that does not exist (a variable, a watch).
    #[error("step {step} of {scenario}: {message}")]
    Script {
        /// The scenario.
        scenario: String,
        /// 1-based step.
        step: usize,
        /// What is wrong.
        message: String,
    },
}

impl Target {
    /// The server a kubeconfig's current context points at.
    pub async fn from_kubeconfig(path: &Path) -> Result<Self, Error> {
        let err = |source: Box<dyn std::error::Error + Send + Sync>| Error::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| err(e.into()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| err(e.into()))?;
        let url = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(|e| err(e.into()))?;
        let version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_else(|_| "unknown version".into());
        Ok(Self {
            client,
            name: format!("{version} at {url}"),
            quiet: QUIET,
        })
    }

    /// How long a watch must be quiet for its events to count as all delivered; shorter
    /// makes runs faster where the server delivers at once (loopback, no load).
    pub fn with_quiet(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// A server reached through `client`.
    pub fn from_client(client: kube::Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
            quiet: QUIET,
        }
    }

    async fn send(
        &self,
        method: http::Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<http::Response<kube::client::Body>, String> {
        let mut request = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let request = request
            .body(kube::client::Body::from(body))
            .map_err(|e| e.to_string())?;
        tokio::time::timeout(PATIENCE, self.client.send(request))
            .await
            .map_err(|_| "no answer within 10 s".to_string())?
            .map_err(|e| e.to_string())
    }
}

/// What one step left behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "camelCase", deny_unknown_fields)]
pub enum Record {
    /// The answer to a request.
    Response {
        /// The HTTP status code.
        status: u16,
        /// `Warning` headers, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// The body: JSON, or a string when it is not JSON.
        body: Value,
    },
    /// The answer to a watch request (its events come with later steps).
    Watch {
        /// The HTTP status code.
        status: u16,
        /// The body when the watch was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
    },
    /// The events a watch delivered.
    Events {
        /// `{type, object}` in order of arrival.
        events: Vec<Value>,
        /// The server ended the stream.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ended: bool,
    },
    /// A watch was closed.
    Closed,
}

/// Everything a run recorded, one record per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// The namespace the run used (normalized away).
    pub namespace: String,
    /// One record per step.
    pub records: Vec<Record>,
}

/// One open watch: its events, read in the background.
struct OpenWatch {
    events: mpsc::UnboundedReceiver<Value>,
    reader: tokio::task::JoinHandle<()>,
    /// Started from the current state (`resourceVersion` unset or "0") and not read yet:
    /// its first events are that state, in an order upstream leaves open (its watch cache
    /// iterates a map).
    initial_state: bool,
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Runs `scenario` against `target` in a fresh namespace `namespace`. `expected`, when
/// replaying a recording, says how many events each `events` step should wait for.
pub async fn run(
    scenario: &Scenario,
    target: &Target,
    namespace: &str,
    expected: Option<&[Record]>,
) -> Result<Transcript, Error> {
    prepare_namespace(target, namespace).await;
    let mut vars: BTreeMap<String, Value> = BTreeMap::new();
    vars.insert("ns".into(), Value::String(namespace.into()));
    let mut watches: BTreeMap<String, OpenWatch> = BTreeMap::new();
    let mut records = Vec::with_capacity(scenario.steps.len());
    for (i, step) in scenario.steps.iter().enumerate() {
        let transport = |message: String| Error::Transport {
            scenario: scenario.name.clone(),
            step: i + 1,
            message,
        };
        let script = |message: String| Error::Script {
            scenario: scenario.name.clone(),
            step: i + 1,
            message,
        };
        let record = match step {
            Step::Request {
                method,
                path,
                query,
                content,
                body,
                body_from,
                raw,
                accept,
                capture,
            } => {
                let body = match (body, body_from) {
                    (Some(b), _) => Some(substitute(b, &vars)),
                    (None, Some(from)) => {
                        let mut object = vars
                            .get(&from.var)
                            .cloned()
                            .ok_or_else(|| script(format!("no variable `{}`", from.var)))?;
                        if let Some(patch) = &from.merge {
                            json_patch::merge(&mut object, &substitute(patch, &vars));
                        }
                        Some(object)
                    }
                    (None, None) => None,
                };
                let content = content.unwrap_or(Content::Json);
                let uri = uri(path, query, &vars, false);
                let mut headers = vec![("Accept", accept.as_deref().unwrap_or("application/json"))];
                let bytes = match (&body, raw) {
                    (Some(b), _) => serde_json::to_vec(b).unwrap_or_default(),
                    (None, Some(text)) => substitute_str(text, &vars).into_bytes(),
                    (None, None) => Vec::new(),
                };
                if body.is_some() || raw.is_some() {
                    headers.push(("Content-Type", content.mime()));
                }
                let response = target
                    .send(method.http(), &uri, &headers, bytes)
                    .await
                    .map_err(transport)?;
                let status = response.status().as_u16();
                let warnings = response
                    .headers()
                    .get_all("warning")
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(str::to_owned))
                    .collect();
                let bytes = tokio::time::timeout(PATIENCE, response.into_body().collect())
                    .await
                    .map_err(|_| transport("the body did not end within 10 s".into()))?
                    .map_err(|e| transport(e.to_string()))?
                    .to_bytes();
                let body = parse_body(&bytes);
                for (var, pointer) in capture {
                    let value = body.pointer(pointer).cloned().ok_or_else(|| {
                        script(format!(
                            "nothing at `{pointer}` to capture as `{var}` (status {status})"
                        ))
                    })?;
                    vars.insert(var.clone(), value);
                }
                Record::Response {
                    status,
                    warnings,
                    body,
                }
            }
            Step::Watch { id, path, query } => {
                let uri = uri(path, query, &vars, true);
                let response = target
                    .send(
                        http::Method::GET,
                        &uri,
                        &[("Accept", "application/json")],
                        Vec::new(),
                    )
                    .await
                    .map_err(transport)?;
                let status = response.status().as_u16();
                if status != 200 {
                    let bytes = response
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    Record::Watch {
                        status,
                        body: Some(parse_body(&bytes)),
                    }
                } else {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let reader = tokio::spawn(read_events(response.into_body(), tx));
                    let initial_state = query
                        .get("resourceVersion")
                        .is_none_or(|rv| rv.is_empty() || rv == "0");
                    watches.insert(
                        id.clone(),
                        OpenWatch {
                            events: rx,
                            reader,
                            initial_state,
                        },
                    );
                    Record::Watch { status, body: None }
                }
            }
            Step::Events { watch, until_end } => {
                let Some(open) = watches.get_mut(watch) else {
                    // A refused watch: nothing was delivered.
                    records.push(Record::Events {
                        events: Vec::new(),
                        ended: true,
                    });
                    continue;
                };
                let want = match expected.and_then(|e| e.get(i)) {
                    Some(Record::Events { events, .. }) => events.len(),
                    _ => 0,
                };
                let (mut events, ended) =
                    drain(&mut open.events, want, *until_end, target.quiet).await;
                if std::mem::take(&mut open.initial_state) {
                    sort_initial_state(&mut events);
                }
                Record::Events { events, ended }
            }
            Step::Close { watch } => {
                watches.remove(watch);
                Record::Closed
            }
        };
        records.push(record);
    }
    drop(watches);
    // Best effort: the namespace's content goes with it (on kube-apiserver without a
    // controller manager it stays `Terminating`, which no later run sees).
    let _ = target
        .send(
            http::Method::DELETE,
            &format!("/api/v1/namespaces/{namespace}"),
            &[],
            Vec::new(),
        )
        .await;
    Ok(Transcript {
        namespace: namespace.to_string(),
        records,
    })
}

/// The namespace and what kube-controller-manager would put in it (its `default`
/// ServiceAccount, without which the ServiceAccount admission plugin refuses pods, and
/// the `kube-root-ca.crt` ConfigMap): a recording runs against kube-apiserver alone. Both
/// are made by the runner itself on every server (a server's own are deleted first), so
/// that their content and managed fields are the same everywhere.
async fn prepare_namespace(target: &Target, namespace: &str) {
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let post = |path: String, body: Value| async move {
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let _ = target.send(http::Method::POST, &path, &json, body).await;
    };
    post(
        "/api/v1/namespaces".into(),
        json!({"metadata": {"name": namespace}}),
    )
    .await;
    for (resource, name, body) in [
        (
            "serviceaccounts",
            "default",
            json!({"metadata": {"name": "default"}}),
        ),
        (
            "configmaps",
            "kube-root-ca.crt",
            json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ""}}),
        ),
    ] {
        let path = format!("/api/v1/namespaces/{namespace}/{resource}");
        let _ = target
            .send(
                http::Method::DELETE,
                &format!("{path}/{name}"),
                &json,
                Vec::new(),
            )
            .await;
        post(path, body).await;
    }
}

fn uri(
    path: &str,
    query: &BTreeMap<String, String>,
    vars: &BTreeMap<String, Value>,
    watch: bool,
) -> String {
    let path = substitute_str(path, vars);
    let mut q = form_query(query, vars);
    if watch {
        q.append_pair("watch", "1");
    }
    let q = q.finish();
    if q.is_empty() {
        path
    } else {
        format!("{path}?{q}")
    }
}

fn form_query(
    query: &BTreeMap<String, String>,
    vars: &BTreeMap<String, Value>,
) -> form_urlencoded::Serializer<'static, String> {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in query {
        q.append_pair(k, &substitute_str(v, vars));
    }
    q
}

fn parse_body(bytes: &Bytes) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// Reads a watch body line by line into `tx` until it ends.
async fn read_events(body: kube::client::Body, tx: mpsc::UnboundedSender<Value>) {
    let mut stream = body.into_data_stream();
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = &line[..line.len() - 1];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event = serde_json::from_slice(line)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(line).into_owned()));
            if tx.send(event).is_err() {
                return;
            }
        }
    }
}

/// Puts the leading `ADDED` events in `resourceVersion` order: a watch from the current
/// state sends it first, in no particular order; events after it have newer versions.
fn sort_initial_state(events: &mut [Value]) {
    let leading = events.iter().take_while(|e| e["type"] == "ADDED").count();
    let version = |e: &Value| {
        e.pointer("/object/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    events[..leading].sort_by_key(version);
}

/// Bookmarks are the server's to send when it likes; only the one that ends a
/// streaming list's initial events is part of the protocol.
fn is_periodic_bookmark(event: &Value) -> bool {
    event["type"] == "BOOKMARK"
        && event
            .pointer("/object/metadata/annotations/k8s.io~1initial-events-end")
            .is_none()
}

/// Takes the events delivered so far: at least `want` of them (waiting up to
/// [`PATIENCE`]), then every further one until the watch is quiet for `quiet`, or
/// with `until_end` every one until the stream ends.
async fn drain(
    rx: &mut mpsc::UnboundedReceiver<Value>,
    want: usize,
    until_end: bool,
    quiet: Duration,
) -> (Vec<Value>, bool) {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let wait = if until_end || events.len() < want {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        } else {
            quiet
        };
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(event)) => {
                if !is_periodic_bookmark(&event) {
                    events.push(event);
                }
            }
            Ok(None) => return (events, true),
            Err(_) => return (events, false),
        }
    }
}

/// Replaces `{name}` in every string of `value` with the variable's value; a string
/// that is only `{name}` takes the variable's JSON value and type.
pub fn substitute(value: &Value, vars: &BTreeMap<String, Value>) -> Value {
    match value {
        Value::String(s) => {
            if let Some(name) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}'))
                && let Some(v) = vars.get(name)
            {
                return v.clone();
            }
            Value::String(substitute_str(s, vars))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (substitute_str(k, vars), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Replaces each `{name}` whose name is a variable; other braces stay as they are.
pub fn substitute_str(s: &str, vars: &BTreeMap<String, Value>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if vars.contains_key(&after[..close]) => {
                match &vars[&after[..close]] {
                    Value::String(v) => out.push_str(v),
                    other => out.push_str(&other.to_string()),
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_keep_their_type_when_alone() {
        let vars = BTreeMap::from([
            ("ns".to_string(), json!("fid-1")),
            ("rv".to_string(), json!("42")),
            ("pod".to_string(), json!({"a": 1})),
        ]);
        let v = substitute(
            &json!({"x": "{pod}", "y": "/ns/{ns}/{rv}", "z": "${HOME} {nope}"}),
            &vars,
        );
        assert_eq!(
            v,
            json!({"x": {"a": 1}, "y": "/ns/fid-1/42", "z": "${HOME} {nope}"})
        );
    }

    #[test]
    fn queries_are_encoded() {
        let vars = BTreeMap::from([("ns".to_string(), json!("a"))]);
        let q = BTreeMap::from([(
            "fieldSelector".to_string(),
            "spec.nodeName={ns}-n1".to_string(),
        )]);
        assert_eq!(
            uri("/api/v1/pods", &q, &vars, true),
            "/api/v1/pods?fieldSelector=spec.nodeName%3Da-n1&watch=1"
        );
    }
}

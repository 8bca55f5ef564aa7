//! `GET /containerLogs/{namespace}/{pod}/{container}` (the kubelet server's
//! `getContainerLogs` and `GetKubeletContainerLogs`): the query read as a
//! `PodLogOptions`, the container picked from the pod's status
//! (`validateContainerLogStatus`: the running one, or the last terminated one
//! with `previous`), its log found through CRI and read by [`crate::log_reader`].
//!
//! Every failure is an [`Error`] whose text and HTTP status are the kubelet's
//! ([`Error::code`]); the API server passes both on to `kubectl`.

use std::path::Path;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;

use crate::log_reader;
use crate::runtime::Runtime;

/// Why logs cannot be served, in the kubelet's words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A query parameter has a value of the wrong type.
    #[error(r#"{{"message": "Unable to decode query."}}"#)]
    Query,
    /// The options fail `ValidatePodLogOptions`.
    #[error(r#"{{"message": "Invalid request."}}"#)]
    Invalid,
    /// The node runs no such pod.
    #[error("pod {pod:?} does not exist")]
    PodNotFound {
        /// The pod name.
        pod: String,
    },
    /// The pod has no such container in its spec.
    #[error("container {container:?} not found in pod {pod:?}")]
    NoSuchContainer {
        /// The container name.
        container: String,
        /// The pod name.
        pod: String,
    },
    /// The container's log cannot be served in its state.
    #[error("{}", state.message(container, pod))]
    State {
        /// The container name.
        container: String,
        /// The pod name.
        pod: String,
        /// What is in the way.
        state: Unavailable,
    },
    /// The runtime does not know the container, or it is not one of this agent's.
    #[error("unable to retrieve container logs for {container_id}")]
    Runtime {
        /// The container ID as the pod status gives it (`runtime://id`).
        container_id: String,
    },
    /// The pod could not be read from the API server (the answer carries the cause).
    #[error("reading pod {pod:?}: {error}")]
    Api {
        /// The pod name.
        pod: String,
        /// The client error.
        error: kube::Error,
    },
    /// The log file cannot be read.
    #[error(transparent)]
    Log(#[from] log_reader::Error),
}

impl Error {
    /// The HTTP status the kubelet answers with.
    pub fn code(&self) -> u16 {
        match self {
            Error::Query => 400,
            Error::Invalid => 422,
            Error::PodNotFound { .. } | Error::NoSuchContainer { .. } => 404,
            Error::State { .. } | Error::Runtime { .. } | Error::Log(_) => 400,
            Error::Api { .. } => 500,
        }
    }
}

/// What keeps a container's log from being served (`validateContainerLogStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The pod status has no status for the container yet.
    NotAvailable,
    /// `previous` was asked, and no earlier instance terminated.
    NoPrevious,
    /// Terminated before a container was created.
    Terminated,
    /// Waiting, with its reason.
    Waiting(String),
    /// No state at all.
    NoLogsYet,
}

impl Unavailable {
    fn message(&self, container: &str, pod: &str) -> String {
        match self {
            Unavailable::NotAvailable => {
                format!("container {container:?} in pod {pod:?} is not available")
            }
            Unavailable::NoPrevious => {
                format!("previous terminated container {container:?} in pod {pod:?} not found")
            }
            Unavailable::Terminated => {
                format!("container {container:?} in pod {pod:?} is terminated")
            }
            Unavailable::Waiting(reason) => {
                let why = match reason.as_str() {
                    "ErrImagePull" => "image can't be pulled",
                    "ImagePullBackOff" => "trying and failing to pull image",
                    other => other,
                };
                format!("container {container:?} in pod {pod:?} is waiting to start: {why}")
            }
            Unavailable::NoLogsYet => {
                format!("container {container:?} in pod {pod:?} is waiting to start - no logs yet")
            }
        }
    }
}

/// The query of a `/containerLogs` request (`v1.PodLogOptions`, as the
/// kubelet decodes it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `previous`.
    pub previous: bool,
    /// `follow`.
    pub follow: bool,
    /// `timestamps`.
    pub timestamps: bool,
    /// `tailLines` (or the legacy `tail`; `tail=all` means all).
    pub tail_lines: Option<i64>,
    /// `limitBytes`.
    pub limit_bytes: Option<i64>,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime`.
    pub since_time: Option<Timestamp>,
}

impl Query {
    /// Decodes and validates the query string.
    pub fn parse(query: Option<&str>) -> Result<Query, Error> {
        let mut q = Query::default();
        let mut tail = None;
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let int = || value.parse::<i64>().map_err(|_| Error::Query);
            // Go's query booleans: anything but "0" and "false" is true.
            let flag = || !(value == "0" || value.eq_ignore_ascii_case("false"));
            match key.as_ref() {
                "previous" => q.previous = flag(),
                "follow" => q.follow = flag(),
                "timestamps" => q.timestamps = flag(),
                "tailLines" => q.tail_lines = Some(int()?),
                "tail" => tail = Some(value.into_owned()),
                "limitBytes" => q.limit_bytes = Some(int()?),
                "sinceSeconds" => q.since_seconds = Some(int()?),
                "sinceTime" => {
                    q.since_time = Some(value.parse().map_err(|_| Error::Query)?);
                }
                _ => {}
            }
        }
        match tail.as_deref() {
            Some("all") => q.tail_lines = None,
            Some(lines) => q.tail_lines = Some(lines.parse().map_err(|_| Error::Query)?),
            None => {}
        }
        q.validate()?;
        Ok(q)
    }

    /// `ValidatePodLogOptions`.
    fn validate(&self) -> Result<(), Error> {
        let negative_tail = self.tail_lines.is_some_and(|n| n < 0);
        let bad_limit = self.limit_bytes.is_some_and(|n| n < 1);
        let both_since = self.since_seconds.is_some() && self.since_time.is_some();
        let bad_since = self.since_seconds.is_some_and(|n| n < 1);
        if negative_tail || bad_limit || both_since || bad_since {
            return Err(Error::Invalid);
        }
        Ok(())
    }

    /// The reader's options at `now` (the kubelet's `NewLogOptions`: the
    /// later of `sinceSeconds` and `sinceTime`).
    pub fn reader_options(&self, now: Timestamp) -> log_reader::Options {
        let from_seconds = self
            .since_seconds
            .and_then(|s| now.checked_sub(SignedDuration::from_secs(s)).ok());
        log_reader::Options {
            tail: self.tail_lines.map(|n| n.unsigned_abs()),
            limit_bytes: self.limit_bytes.map(|n| n.unsigned_abs()),
            since: from_seconds.max(self.since_time),
            timestamps: self.timestamps,
            follow: self.follow,
        }
    }
}

/// What the handler needs from the agent.
#[derive(Clone)]
pub struct Context {
    /// Reads the pod (the agent keeps no pod store of its own).
    pub client: kube::Client,
    /// This node's name: pods bound elsewhere do not exist here.
    pub node_name: String,
    /// The runtime, for the container's log path and state.
    pub runtime: Runtime,
    /// When the agent started (the node's `startTime` in `/stats/summary`).
    pub started: Timestamp,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

/// A container's log, ready to be streamed.
#[derive(Debug)]
pub struct Opened {
    /// The open log.
    pub log: log_reader::Log,
    /// The container ID in the runtime (for the follower's state checks).
    pub container_id: String,
}

/// Everything before the first byte of the answer: the pod, the container
/// instance, its log path (which must be one of this agent's files) and the
/// open log.
pub async fn open(
    ctx: &Context,
    namespace: &str,
    pod_name: &str,
    container: &str,
    query: &Query,
) -> Result<Opened, Error> {
    let pod = node_pod(ctx, namespace, pod_name).await?;
    if !has_container(&pod, container) {
        return Err(Error::NoSuchContainer {
            container: container.to_owned(),
            pod: pod_name.to_owned(),
        });
    }
    let state_error = |state| Error::State {
        container: container.to_owned(),
        pod: pod_name.to_owned(),
        state,
    };
    let status = find_status(&pod, container).ok_or(state_error(Unavailable::NotAvailable))?;
    let container_id = container_id(status, query.previous).map_err(state_error)?;
    let runtime_error = || Error::Runtime {
        container_id: container_id.clone(),
    };
    let id = container_id
        .split_once("://")
        .map_or(container_id.as_str(), |(_, id)| id)
        .to_owned();
    let log = ctx
        .runtime
        .container_log(&id)
        .await
        .map_err(|_| runtime_error())?
        .ok_or_else(runtime_error)?;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if log.pod_uid != uid || !is_below(&log.path, ctx.runtime.pod_logs_dir()) {
        // Only the logs of this agent's own containers, in its own directory.
        return Err(runtime_error());
    }
    let log = log_reader::open(&log.path, query.reader_options(Timestamp::now())).await?;
    Ok(Opened {
        log,
        container_id: id,
    })
}

/// Pod `namespace/name` if it is bound to this node (the kubelet's
/// `GetPodByName` on its pod manager).
pub async fn node_pod(ctx: &Context, namespace: &str, name: &str) -> Result<Pod, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    pods.get_opt(name)
        .await
        .map_err(|error| Error::Api {
            pod: name.to_owned(),
            error,
        })?
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&ctx.node_name))
        .ok_or_else(|| Error::PodNotFound {
            pod: name.to_owned(),
        })
}

fn has_container(pod: &Pod, name: &str) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.containers.iter().any(|c| c.name == name)
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == name)
}

fn find_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    [
        &status.container_statuses,
        &status.init_container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .find(|s| s.name == name)
}

/// The container instance whose log is asked for (`validateContainerLogStatus`).
pub fn container_id(status: &ContainerStatus, previous: bool) -> Result<String, Unavailable> {
    let last = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    let last_id = last
        .and_then(|t| t.container_id.clone())
        .filter(|id| !id.is_empty());
    let state = status.state.as_ref();
    let running = state.and_then(|s| s.running.as_ref());
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let waiting = state.and_then(|s| s.waiting.as_ref());
    if previous {
        return last_id.ok_or(Unavailable::NoPrevious);
    }
    if running.is_some() {
        return status.container_id.clone().ok_or(Unavailable::NoLogsYet);
    }
    if let Some(terminated) = terminated {
        return terminated
            .container_id
            .clone()
            .filter(|id| !id.is_empty())
            .or(last_id)
            .ok_or(Unavailable::Terminated);
    }
    if last.is_some() {
        return last_id.ok_or(Unavailable::Terminated);
    }
    if let Some(waiting) = waiting {
        return Err(Unavailable::Waiting(
            waiting.reason.clone().unwrap_or_default(),
        ));
    }
    Err(Unavailable::NoLogsYet)
}

/// Whether `path`, with its symbolic links resolved, is inside `dir`. A file
/// not written yet counts when its path has no `..` (opening it then fails
/// with the kubelet's error).
fn is_below(path: &Path, dir: &Path) -> bool {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return false;
    };
    match std::fs::canonicalize(path) {
        Ok(resolved) => resolved.starts_with(dir),
        Err(_) => {
            path.starts_with(&dir)
                && !path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: serde_json::Value) -> ContainerStatus {
        let mut v =
            json!({"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0});
        v.as_object_mut()
            .unwrap()
            .extend(value.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn query_is_decoded_like_the_kubelet() {
        let q = Query::parse(Some(
            "follow=true&previous=1&timestamps=false&tailLines=3&limitBytes=10&sinceSeconds=5",
        ))
        .unwrap();
        assert!(q.follow && q.previous && !q.timestamps);
        assert_eq!(
            (q.tail_lines, q.limit_bytes, q.since_seconds),
            (Some(3), Some(10), Some(5))
        );
        assert_eq!(Query::parse(Some("tail=4")).unwrap().tail_lines, Some(4));
        assert_eq!(Query::parse(Some("tail=all")).unwrap().tail_lines, None);
        let t = Query::parse(Some("sinceTime=2026-01-02T03:04:05Z")).unwrap();
        assert_eq!(t.since_time.unwrap().to_string(), "2026-01-02T03:04:05Z");
        assert_eq!(Query::parse(None).unwrap(), Query::default());
    }

    #[test]
    fn bad_queries_get_the_kubelets_answers() {
        for (query, code) in [
            ("tailLines=x", 400),
            ("sinceTime=yesterday", 400),
            ("tailLines=-1", 422),
            ("limitBytes=0", 422),
            ("sinceSeconds=0", 422),
            ("sinceSeconds=1&sinceTime=2026-01-02T03:04:05Z", 422),
        ] {
            let err = Query::parse(Some(query)).unwrap_err();
            assert_eq!(err.code(), code, "{query}");
        }
        assert_eq!(
            Query::parse(Some("limitBytes=0")).unwrap_err().to_string(),
            r#"{"message": "Invalid request."}"#
        );
    }

    #[test]
    fn since_is_the_later_of_seconds_and_time() {
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let q = Query {
            since_seconds: Some(60),
            ..Query::default()
        };
        assert_eq!(
            q.reader_options(now).since.unwrap().to_string(),
            "2026-01-02T03:03:05Z"
        );
    }

    #[test]
    fn the_container_instance_follows_validate_container_log_status() {
        let running = status(json!({"containerID": "fake://b", "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "fake://a"}}}));
        assert_eq!(container_id(&running, false).unwrap(), "fake://b");
        assert_eq!(container_id(&running, true).unwrap(), "fake://a");

        let first = status(json!({"containerID": "fake://a", "state": {"running": {}}}));
        assert_eq!(container_id(&first, true), Err(Unavailable::NoPrevious));

        let creating = status(json!({"state": {"waiting": {"reason": "ContainerCreating"}}}));
        let err = container_id(&creating, false).unwrap_err();
        assert_eq!(
            err.message("c", "p"),
            r#"container "c" in pod "p" is waiting to start: ContainerCreating"#
        );
        let pulling = status(json!({"state": {"waiting": {"reason": "ImagePullBackOff"}}}));
        assert_eq!(
            container_id(&pulling, false).unwrap_err().message("c", "p"),
            r#"container "c" in pod "p" is waiting to start: trying and failing to pull image"#
        );
        let backoff = status(json!({"state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "containerID": "fake://a"}}}));
        assert_eq!(container_id(&backoff, false).unwrap(), "fake://a");
        assert_eq!(
            Unavailable::NoPrevious.message("c", "p"),
            r#"previous terminated container "c" in pod "p" not found"#
        );
        let done =
            status(json!({"state": {"terminated": {"exitCode": 0, "containerID": "fake://z"}}}));
        assert_eq!(container_id(&done, false).unwrap(), "fake://z");
    }

    #[test]
    fn only_files_below_the_pods_directory_are_served() {
        let dir = tempfile::tempdir().unwrap();
        let pods = dir.path().join("pods");
        std::fs::create_dir_all(pods.join("ns_p_u/c")).unwrap();
        std::fs::write(pods.join("ns_p_u/c/0.log"), "").unwrap();
        assert!(is_below(&pods.join("ns_p_u/c/0.log"), &pods));
        assert!(!is_below(Path::new("/etc/passwd"), &pods));
        assert!(!is_below(&pods.join("../../etc/passwd"), &pods));
    }
}

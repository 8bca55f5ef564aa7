//! Fault injection: [`Control`] in process, and the same operations as a
//! JSON-over-HTTP API on the control socket (see `fake-cri/README.md`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::faults::{Fault, RPCS, parse_code};
use crate::runtime::{ImageFs, Runtime};

/// Which running containers to kill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillTarget {
    /// One container by id.
    Id(String),
    /// A pod's container by name; an empty name means every container of the pod.
    Container {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
        /// The container's name, or empty for all.
        container: String,
    },
}

/// Errors of the control operations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControlError {
    /// No running container matched a kill.
    #[error("no running container matches {target:?}")]
    NothingToKill {
        /// What was asked.
        target: KillTarget,
    },
    /// The RPC name is not a CRI method.
    #[error("unknown RPC {rpc:?}: expected a CRI method name such as CreateContainer")]
    UnknownRpc {
        /// The name given.
        rpc: String,
    },
    /// The gRPC code name is unknown.
    #[error("unknown gRPC code {code:?}: expected a name such as Unavailable or a number 0-16")]
    UnknownCode {
        /// The code given.
        code: String,
    },
    /// A request is missing what it needs.
    #[error("{0}")]
    BadRequest(String),
    /// The endpoint exists but not with this method.
    #[error("{method} is not allowed on {path}: see fake-cri/README.md")]
    MethodNotAllowed {
        /// The method used.
        method: String,
        /// The path asked for.
        path: String,
    },
    /// No control endpoint has this path.
    #[error("no control endpoint {path:?}: see fake-cri/README.md")]
    NoRoute {
        /// The path asked for.
        path: String,
    },
}

/// In-process fault injection, with the same operations as the HTTP control API.
#[derive(Debug, Clone)]
pub struct Control {
    runtime: Arc<Runtime>,
}

impl Control {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        Self { runtime }
    }

    /// Sets the `RuntimeReady` condition reported by `Status`.
    pub fn set_runtime_ready(&self, ready: bool) {
        self.runtime.set_conditions(|c| {
            c.runtime_ready = ready;
            c.default_reason("FakeRuntimeNotReady", "runtime");
        });
    }

    /// Sets the `NetworkReady` condition reported by `Status`.
    pub fn set_network_ready(&self, ready: bool) {
        self.runtime.set_conditions(|c| {
            c.network_ready = ready;
            c.default_reason("NetworkPluginNotReady", "network");
        });
    }

    /// Sets the reason and message of conditions that are not ready.
    pub fn set_condition_reason(&self, reason: &str, message: &str) {
        self.runtime.set_conditions(|c| {
            c.reason = reason.to_owned();
            c.message = message.to_owned();
        });
    }

    /// Kills running containers with SIGKILL (exit 137, reason `Error`), or as
    /// the OOM killer (exit 137, reason `OOMKilled`). Returns their ids.
    pub fn kill(&self, target: KillTarget, oom: bool) -> Result<Vec<String>, ControlError> {
        let killed = self.runtime.kill(&target, oom);
        if killed.is_empty() {
            return Err(ControlError::NothingToKill { target });
        }
        Ok(killed)
    }

    /// Makes the next `count` calls of `rpc` fail with `code`.
    pub fn fail_next(&self, rpc: &str, count: u32, code: tonic::Code) -> Result<(), ControlError> {
        self.add_fault(rpc, count, Duration::ZERO, Some(code), None)
    }

    /// Delays the next `count` calls of `rpc` by `delay`.
    pub fn delay_next(&self, rpc: &str, count: u32, delay: Duration) -> Result<(), ControlError> {
        self.add_fault(rpc, count, delay, None, None)
    }

    fn add_fault(
        &self,
        rpc: &str,
        count: u32,
        delay: Duration,
        code: Option<tonic::Code>,
        message: Option<String>,
    ) -> Result<(), ControlError> {
        if !RPCS.contains(&rpc) {
            return Err(ControlError::UnknownRpc {
                rpc: rpc.to_owned(),
            });
        }
        let fail = code.map(|code| {
            let message =
                message.unwrap_or_else(|| format!("fake-cri: injected {code:?} for {rpc}"));
            (code, message)
        });
        self.runtime.faults.add(
            rpc,
            Fault {
                remaining: count,
                delay,
                fail,
            },
        );
        Ok(())
    }

    /// Drops every pending fault.
    pub fn clear_faults(&self) {
        self.runtime.faults.clear();
    }

    /// Sets the image filesystem usage reported by `ImageFsInfo` (and its
    /// capacity, reported through the control API's state).
    pub fn set_image_fs_usage(&self, used_bytes: u64, capacity_bytes: Option<u64>) {
        self.runtime.set_image_fs(ImageFs {
            used_bytes: Some(used_bytes),
            capacity_bytes,
        });
    }

    /// Restarts the runtime: every sandbox and container is lost, as after a
    /// crash; pulled images stay; conditions are ready again.
    pub fn restart(&self) {
        self.runtime.restart();
    }

    /// The runtime's state.
    pub fn state(&self) -> Snapshot {
        self.runtime.snapshot()
    }
}

/// The runtime's state as the control API reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// `RuntimeReady`.
    pub runtime_ready: bool,
    /// `NetworkReady`.
    pub network_ready: bool,
    /// Every sandbox.
    pub sandboxes: Vec<SandboxSummary>,
    /// Every container.
    pub containers: Vec<ContainerSummary>,
}

/// A sandbox in a [`Snapshot`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSummary {
    /// Sandbox id.
    pub id: String,
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// `SANDBOX_READY` or `SANDBOX_NOTREADY`.
    pub state: String,
}

/// A container in a [`Snapshot`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSummary {
    /// Container id.
    pub id: String,
    /// Its sandbox.
    pub sandbox_id: String,
    /// Container name.
    pub name: String,
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Pod UID.
    pub pod_uid: String,
    /// `CONTAINER_CREATED`, `CONTAINER_RUNNING` or `CONTAINER_EXITED`.
    pub state: String,
    /// Exit code (0 until exited).
    pub exit_code: i32,
}

/// The body of `POST /v1/runtime`: the runtime's conditions to set (what is left out stays).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeBody {
    /// `RuntimeReady`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_ready: Option<bool>,
    /// `NetworkReady`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_ready: Option<bool>,
    /// The reason of a condition set false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The body of `POST /v1/kill`: a container by id, or a pod's containers (one by name, or
/// all) by namespace and pod name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KillBody {
    /// The container's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The pod's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The pod's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The container's name in the pod (every container when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Killed by the OOM killer (`reason: OOMKilled`, exit code 137).
    #[serde(default)]
    pub oom: bool,
}

/// The body of `POST /v1/faults`: the next `count` calls of `rpc` fail with `code`, are
/// delayed by `delay_ms`, or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultBody {
    /// The CRI method's name (`StartContainer`).
    pub rpc: String,
    /// How many calls.
    #[serde(default = "one")]
    pub count: u32,
    /// The gRPC code, by name (`Unavailable`) or number (`14`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The status message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Milliseconds each call waits first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
}

fn one() -> u32 {
    1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The body of `PUT /v1/imagefs`: the image filesystem's usage (and capacity) to report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageFsBody {
    /// Bytes used.
    pub used_bytes: u64,
    /// Capacity in bytes, if reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        let status = match self {
            Self::NothingToKill { .. } | Self::NoRoute { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnknownRpc { .. } | Self::UnknownCode { .. } | Self::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
        };
        (
            status,
            Json(serde_json::json!({ "error": self.to_string() })),
        )
            .into_response()
    }
}

/// Parses a JSON body, turning serde's rejection into our error shape.
fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ControlError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ControlError::BadRequest(format!("invalid JSON body: {e}")))
}

/// The control API's routes.
pub(crate) fn router(control: Control) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/v1/state",
            get(|State(c): State<Control>| async move { Json(c.state()) }),
        )
        .route("/v1/runtime", post(runtime))
        .route("/v1/kill", post(kill))
        .route("/v1/faults", post(add_fault).delete(clear_faults))
        .route("/v1/imagefs", put(image_fs))
        .route("/v1/restart", post(restart))
        .fallback(|uri: axum::http::Uri| async move {
            ControlError::NoRoute {
                path: uri.path().to_owned(),
            }
        })
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                ControlError::MethodNotAllowed {
                    method: method.to_string(),
                    path: uri.path().to_owned(),
                }
            },
        )
        .with_state(control)
}

type Reply = Result<Json<serde_json::Value>, ControlError>;

async fn runtime(State(control): State<Control>, bytes: axum::body::Bytes) -> Reply {
    let body: RuntimeBody = body(&bytes)?;
    if let (Some(reason), message) = (&body.reason, &body.message) {
        control.set_condition_reason(reason, message.as_deref().unwrap_or_default());
    }
    if let Some(ready) = body.runtime_ready {
        control.set_runtime_ready(ready);
    }
    if let Some(ready) = body.network_ready {
        control.set_network_ready(ready);
    }
    let conditions = control.runtime.conditions();
    Ok(Json(serde_json::json!({
        "runtimeReady": conditions.runtime_ready,
        "networkReady": conditions.network_ready,
    })))
}

async fn kill(State(control): State<Control>, bytes: axum::body::Bytes) -> Reply {
    let body: KillBody = body(&bytes)?;
    let target = match (body.container_id, body.namespace, body.pod) {
        (Some(id), None, None) => KillTarget::Id(id),
        (None, Some(namespace), Some(pod)) => KillTarget::Container {
            namespace,
            pod,
            container: body.container.unwrap_or_default(),
        },
        _ => {
            return Err(ControlError::BadRequest(
                "give either containerId, or namespace and pod (and optionally container)"
                    .to_owned(),
            ));
        }
    };
    let killed = control.kill(target, body.oom)?;
    Ok(Json(serde_json::json!({ "killed": killed })))
}

async fn add_fault(State(control): State<Control>, bytes: axum::body::Bytes) -> Reply {
    let body: FaultBody = body(&bytes)?;
    let code = body
        .code
        .map(|code| parse_code(&code).ok_or(ControlError::UnknownCode { code }))
        .transpose()?;
    if code.is_none() && body.delay_ms == 0 {
        return Err(ControlError::BadRequest(
            "a fault needs a code, a delayMs, or both".to_owned(),
        ));
    }
    control.add_fault(
        &body.rpc,
        body.count,
        Duration::from_millis(body.delay_ms),
        code,
        body.message,
    )?;
    Ok(Json(
        serde_json::json!({ "rpc": body.rpc, "count": body.count }),
    ))
}

async fn clear_faults(State(control): State<Control>) -> Reply {
    control.clear_faults();
    Ok(Json(serde_json::json!({})))
}

async fn image_fs(State(control): State<Control>, bytes: axum::body::Bytes) -> Reply {
    let body: ImageFsBody = body(&bytes)?;
    control.set_image_fs_usage(body.used_bytes, body.capacity_bytes);
    let fs = control.runtime.image_fs();
    Ok(Json(serde_json::json!({
        "usedBytes": fs.used_bytes,
        "capacityBytes": fs.capacity_bytes,
    })))
}

async fn restart(State(control): State<Control>) -> Reply {
    control.restart();
    Ok(Json(serde_json::json!({ "restarted": true })))
}

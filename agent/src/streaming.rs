//! The kubelet server's streaming endpoints (`getExec`, `getAttach`,
//! `getPortForward` and `proxyStream`): `/exec/{namespace}/{pod}[/{uid}]/{container}`,
//! `/attach/…` the same, `/portForward/{namespace}/{pod}[/{uid}]`. The pod is
//! looked up, its running container (or sandbox) found in the runtime, the
//! runtime asked for a URL (`Exec`, `Attach`, `PortForward`), and the
//! client's upgrade request proxied there: the runtime's streaming server
//! speaks SPDY or WebSocket with the client through the agent.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use nodeconform_stream::{proxy, upgrade};
use tokio::net::TcpStream;

use crate::pod_logs::{self, Context};
use crate::runtime::{self, Channels};

/// Why a streaming request fails, with the kubelet's words and status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No channel asked for (`NewOptions`).
    #[error("you must specify at least 1 of stdin, stdout, stderr")]
    NoChannels,
    /// The request is not an upgrade (`UpgradeAwareHandler` with `upgradeRequired`).
    #[error("Upgrade request required")]
    UpgradeRequired,
    /// The node runs no such pod.
    #[error("pod does not exist")]
    PodNotFound,
    /// The pod reading failed.
    #[error(transparent)]
    Pod(pod_logs::Error),
    /// The pod has no running container of that name (`findContainer`).
    #[error("container not found ({0:?})")]
    ContainerNotFound(String),
    /// The pod has no sandbox in the runtime.
    #[error("pod not found ({0:?})")]
    SandboxNotFound(String),
    /// The runtime refused.
    #[error("{0}")]
    Runtime(#[from] runtime::Error),
    /// The runtime's URL is not one the agent can reach.
    #[error("unexpected streaming URL {0:?}")]
    Url(String),
    /// The streaming server could not be reached or asked.
    #[error("error dialing backend: {0}")]
    Backend(String),
}

impl Error {
    /// The HTTP status the kubelet answers with (`streaming.WriteError` for
    /// runtime errors: a gRPC `NotFound` is a 404, anything else a 500).
    pub fn code(&self) -> StatusCode {
        match self {
            Error::NoChannels | Error::UpgradeRequired => StatusCode::BAD_REQUEST,
            Error::PodNotFound => StatusCode::NOT_FOUND,
            Error::Pod(e) => {
                StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            Error::Runtime(e)
                if e.status()
                    .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
            {
                StatusCode::NOT_FOUND
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A streaming request, from its path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/exec/…`.
    Exec {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The container.
        container: String,
        /// The command (`command` parameters, in order).
        command: Vec<String>,
    },
    /// `/attach/…`.
    Attach {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
    /// `/portForward/…`.
    PortForward {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// `port` parameters (the WebSocket protocol names ports in the query).
        ports: Vec<i32>,
    },
}

impl Target {
    /// The request `segments` (the path split on `/`) ask for, if streaming.
    pub fn parse(segments: &[&str], query: Option<&str>) -> Option<Target> {
        let params: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .into_owned()
            .collect();
        let all = |key: &'static str| {
            params
                .iter()
                .filter(move |(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let s = |v: &&str| (*v).to_owned();
        match segments {
            ["exec", ns, pod, container] | ["exec", ns, pod, _, container] => Some(Target::Exec {
                namespace: s(ns),
                pod: s(pod),
                container: s(container),
                command: all("command").collect(),
            }),
            ["attach", ns, pod, container] | ["attach", ns, pod, _, container] => {
                Some(Target::Attach {
                    namespace: s(ns),
                    pod: s(pod),
                    container: s(container),
                })
            }
            ["portForward", ns, pod] | ["portForward", ns, pod, _] => Some(Target::PortForward {
                namespace: s(ns),
                pod: s(pod),
                ports: all("port").filter_map(|p| p.parse().ok()).collect(),
            }),
            _ => None,
        }
    }
}

/// The channels of an exec or attach query (`NewOptions`: `1` is true, and
/// a TTY takes no separate stderr).
fn channels(query: Option<&str>) -> Result<Channels, Error> {
    let on = |key: &str| {
        form_urlencoded::parse(query.unwrap_or("").as_bytes()).any(|(k, v)| k == key && v == "1")
    };
    // The kubelet's parameter names: `input`, `output`, `error`, `tty`.
    let tty = on("tty");
    let channels = Channels {
        stdin: on("input"),
        stdout: on("output"),
        stderr: on("error") && !tty,
        tty,
    };
    if !channels.stdin && !channels.stdout && !channels.stderr {
        return Err(Error::NoChannels);
    }
    Ok(channels)
}

/// Serves a streaming request: the runtime's URL, then the proxied upgrade.
pub async fn serve<B>(
    ctx: &Context,
    req: Request<B>,
    target: Target,
) -> Result<Response<Bytes>, Error> {
    let query = req.uri().query().map(str::to_owned);
    let url = match &target {
        Target::Exec {
            namespace,
            pod,
            container,
            command,
        } => {
            let channels = channels(query.as_deref())?;
            let pod = pod_of(ctx, namespace, pod).await?;
            let id = running_container(ctx, &pod, container).await?;
            ctx.runtime.exec_url(&id, command.clone(), channels).await?
        }
        Target::Attach {
            namespace,
            pod,
            container,
        } => {
            let channels = channels(query.as_deref())?;
            let pod = pod_of(ctx, namespace, pod).await?;
            let id = running_container(ctx, &pod, container).await?;
            ctx.runtime.attach_url(&id, channels).await?
        }
        Target::PortForward {
            namespace,
            pod,
            ports,
        } => {
            let pod = pod_of(ctx, namespace, pod).await?;
            let status = ctx.runtime.pod_status(&pod).await?;
            let sandbox = status
                .sandbox()
                .filter(|s| s.ready)
                .ok_or_else(|| Error::SandboxNotFound(full_name(&pod)))?;
            ctx.runtime
                .port_forward_url(&sandbox.id, ports.clone())
                .await?
        }
    };
    if !upgrade::is_upgrade(&req) {
        return Err(Error::UpgradeRequired);
    }
    let (authority, path) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .ok_or_else(|| Error::Url(url.clone()))?;
    let backend = TcpStream::connect(authority)
        .await
        .map_err(|e| Error::Backend(format!("dial tcp {authority}: connect: {e}")))?;
    proxy::upgrade(req, backend, authority, &format!("/{path}"))
        .await
        .map_err(|e| Error::Backend(e.to_string()))
}

async fn pod_of(ctx: &Context, namespace: &str, name: &str) -> Result<Pod, Error> {
    match pod_logs::node_pod(ctx, namespace, name).await {
        Ok(pod) => Ok(pod),
        Err(pod_logs::Error::PodNotFound { .. }) => Err(Error::PodNotFound),
        Err(other) => Err(Error::Pod(other)),
    }
}

/// The running container named `name` in the runtime.
async fn running_container(ctx: &Context, pod: &Pod, name: &str) -> Result<String, Error> {
    let status = ctx.runtime.pod_status(pod).await?;
    status
        .running()
        .find(|c| c.name == name)
        .map(|c| c.id.clone())
        .ok_or_else(|| Error::ContainerNotFound(name.to_owned()))
}

/// `name_namespace`, the kubelet's pod full name.
fn full_name(pod: &Pod) -> String {
    format!(
        "{}_{}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default()
    )
}

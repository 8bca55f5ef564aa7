//! The kubelet's lifecycle handler runner (`pkg/kubelet/lifecycle/handlers.go`):
//! runs a container's `postStart` or `preStop` handler — `exec` through CRI
//! `ExecSync` in the container, `httpGet` to the pod IP (or `host`, through
//! [`crate::handler`], which probes share) — and words
//! a failure as the kubelet does. What a failure does (kill, restart, events)
//! is the caller's: `startContainer` and `killContainer` in [`crate::sync_pod`].
//!
//! Besides those two, `sleep` (1.29's `PodLifecycleSleepAction`, on by default) waits its
//! seconds: for `preStop` within what is left of the grace period, after which the kill
//! goes on and the cut-off sleep is no failure (the kubelet's sleep outlives the grace
//! period unseen). A handler with none of these (`tcpSocket`, kept in the API for
//! compatibility) fails as an invalid handler.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, LifecycleHandler, Pod};

use crate::handler::{HttpGet, Purpose};
use crate::runtime::Runtime;

/// A lifecycle handler that failed; the message is the kubelet's (`handlerRunner.Run`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `exec` command could not run or exited with a non-zero code.
    #[error(
        "Exec lifecycle hook ([{command}]) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {output:?}"
    )]
    Exec {
        /// The command, words joined by spaces.
        command: String,
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it: `name_namespace(uid)`.
        pod: String,
        /// Why: `command '…' exited with N: <stderr>`, or the runtime's error.
        error: String,
        /// What the command wrote (stdout, then stderr).
        output: String,
    },
    /// The `httpGet` request got no response.
    #[error(
        "HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {error}"
    )]
    Http {
        /// The request path.
        path: String,
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it: `name_namespace(uid)`.
        pod: String,
        /// Why, in the words of Go's HTTP client where they can be had.
        error: String,
    },
    /// The handler has no action this agent runs.
    #[error("Cannot run handler: invalid handler for Container {container:?} in Pod {pod:?}")]
    Invalid {
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it: `name_namespace(uid)`.
        pod: String,
    },
}

/// The pod as the kubelet's `format.Pod` prints it: `name_namespace(uid)`.
pub fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// Where the handler runs.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The container's spec.
    pub container: &'a Container,
    /// The running container's CRI ID.
    pub container_id: &'a str,
    /// The pod's IP, for an `httpGet` without `host`.
    pub pod_ip: Option<&'a str>,
}

/// Runs `handler` for `target` (`handlerRunner.Run`); `timeout` bounds an `exec`
/// in the runtime (`None`: the kubelet passes no timeout) and an `httpGet`.
pub async fn run(
    runtime: &Runtime,
    target: Target<'_>,
    handler: &LifecycleHandler,
    timeout: Option<Duration>,
) -> Result<(), Error> {
    let container = target.container.name.clone();
    let pod = format_pod(target.pod);
    if let Some(exec) = &handler.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let command = cmd.join(" ");
        let (error, output) = match runtime.exec(target.container_id, cmd, timeout).await {
            Ok(out) if out.exit_code == 0 => return Ok(()),
            Ok(out) => (
                format!(
                    "command '{command}' exited with {}: {}",
                    out.exit_code, out.stderr
                ),
                out.stdout + &out.stderr,
            ),
            Err(error) => (error.short_message(), String::new()),
        };
        return Err(Error::Exec {
            command,
            container,
            pod,
            error,
            output,
        });
    }
    if let Some(http) = &handler.http_get {
        let path = http.path.clone().unwrap_or_default();
        let request = http_get(target, http);
        let result = match timeout {
            Some(t) => tokio::time::timeout(t, request)
                .await
                .unwrap_or_else(|_| Err("context deadline exceeded".into())),
            None => request.await,
        };
        return result.map_err(|error| Error::Http {
            path,
            container,
            pod,
            error,
        });
    }
    if let Some(sleep) = &handler.sleep {
        let seconds = u64::try_from(sleep.seconds).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        return Ok(());
    }
    Err(Error::Invalid { container, pod })
}

/// One GET (`NewRequestForHTTPGetAction` + `Do`): any HTTP response is success, as for
/// the kubelet's lifecycle handlers (only probes look at the status code); a redirect to
/// another host is not followed.
async fn http_get(target: Target<'_>, http: &HTTPGetAction) -> Result<(), String> {
    let get = HttpGet::new(http, target.container, target.pod_ip)?;
    get.send(Purpose::Lifecycle).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;

    #[test]
    fn exec_failure_is_worded_like_the_kubelet() {
        let error = Error::Exec {
            command: "sh -c exit 3".into(),
            container: "c".into(),
            pod: "p_ns(u)".into(),
            error: "command 'sh -c exit 3' exited with 3: ".into(),
            output: "oops\n".into(),
        };
        assert_eq!(
            error.to_string(),
            "Exec lifecycle hook ([sh -c exit 3]) for Container \"c\" in Pod \"p_ns(u)\" failed - error: command 'sh -c exit 3' exited with 3: , message: \"oops\\n\""
        );
    }

    #[tokio::test]
    async fn http_to_a_closed_port_fails_as_go_words_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let pod = Pod::default();
        let container = Container::default();
        let target = Target {
            pod: &pod,
            container: &container,
            container_id: "id",
            pod_ip: Some("127.0.0.1"),
        };
        let action = HTTPGetAction {
            path: Some("/echo?msg=poststart".into()),
            port: IntOrString::Int(i32::from(port)),
            ..Default::default()
        };
        assert_eq!(
            http_get(target, &action).await,
            Err(format!(
                "Get \"http://127.0.0.1:{port}/echo?msg=poststart\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }
}

//! What the kubelet server asks the runtime for: the streaming RPCs (`Exec`,
//! `Attach`, `PortForward`), each returning the URL of the runtime's
//! streaming server that `kubectl exec`, `attach` and `port-forward` are
//! proxied to, and the stats of `/stats/summary`.

use nodeconform_cri::v1 as cri;

use super::{Result, Runtime};

/// The channels a remote command asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    /// Standard input.
    pub stdin: bool,
    /// Standard output.
    pub stdout: bool,
    /// Standard error.
    pub stderr: bool,
    /// A terminal.
    pub tty: bool,
}

impl Runtime {
    /// `Exec`: the URL that runs `cmd` in container `id`.
    pub async fn exec_url(&self, id: &str, cmd: Vec<String>, channels: Channels) -> Result<String> {
        let resp = self
            .call(
                "Exec",
                || format!("container {id}"),
                None,
                self.rs.clone().exec(cri::ExecRequest {
                    container_id: id.to_owned(),
                    cmd,
                    tty: channels.tty,
                    stdin: channels.stdin,
                    stdout: channels.stdout,
                    stderr: channels.stderr,
                }),
            )
            .await?;
        Ok(resp.url)
    }

    /// `Attach`: the URL that attaches to container `id`.
    pub async fn attach_url(&self, id: &str, channels: Channels) -> Result<String> {
        let resp = self
            .call(
                "Attach",
                || format!("container {id}"),
                None,
                self.rs.clone().attach(cri::AttachRequest {
                    container_id: id.to_owned(),
                    stdin: channels.stdin,
                    tty: channels.tty,
                    stdout: channels.stdout,
                    stderr: channels.stderr,
                }),
            )
            .await?;
        Ok(resp.url)
    }

    /// `PortForward`: the URL that forwards `ports` of sandbox `id`.
    pub async fn port_forward_url(&self, id: &str, ports: Vec<i32>) -> Result<String> {
        let resp = self
            .call(
                "PortForward",
                || format!("sandbox {id}"),
                None,
                self.rs.clone().port_forward(cri::PortForwardRequest {
                    pod_sandbox_id: id.to_owned(),
                    port: ports,
                }),
            )
            .await?;
        Ok(resp.url)
    }
}

impl Runtime {
    /// `ListPodSandboxStats`: every ready sandbox's stats with its containers'.
    pub async fn pod_sandbox_stats(&self) -> Result<Vec<cri::PodSandboxStats>> {
        let resp = self
            .call(
                "ListPodSandboxStats",
                || "runtime".into(),
                None,
                self.rs
                    .clone()
                    .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest::default()),
            )
            .await?;
        Ok(resp.stats)
    }
}

//! Shared set-up for the fake-cri integration tests: a real server on a
//! temporary unix socket and real CRI clients.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::BodyExt;
use nodeconform_cri::v1;
use nodeconform_cri::{ImageServiceClient, RuntimeServiceClient};
use nodeconform_fake_cri::{Builder, FakeCri};
use tonic::transport::Channel;

/// How long a test waits for something that should happen at once.
pub const LIMIT: Duration = Duration::from_secs(5);

/// A running fake-cri with clients.
pub struct Env {
    pub cri: FakeCri,
    pub runtime: RuntimeServiceClient<Channel>,
    pub images: ImageServiceClient<Channel>,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub async fn start() -> Self {
        Self::start_with(|builder| builder).await
    }

    /// Starts a fake-cri configured by `configure` (the sockets are set already).
    pub async fn start_with(configure: impl FnOnce(Builder) -> Builder) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let builder = FakeCri::builder()
            .socket(dir.path().join("cri.sock"))
            .control_socket(dir.path().join("control.sock"));
        let cri = configure(builder).start().await.expect("fake-cri starts");
        let channel = nodeconform_cri::connect(&cri.endpoint())
            .await
            .expect("connect");
        Self {
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
            cri,
            dir,
        }
    }

    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    pub async fn pull(&mut self, image: &str) -> Result<String, tonic::Status> {
        self.images
            .pull_image(v1::PullImageRequest {
                image: Some(image_spec(image)),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner().image_ref)
    }

    pub fn sandbox_config(&self, name: &str) -> v1::PodSandboxConfig {
        sandbox_config(name, &self.log_dir().join(name).display().to_string())
    }

    pub async fn sandbox(&mut self, name: &str) -> String {
        let config = self.sandbox_config(name);
        self.run_sandbox(config).await.expect("RunPodSandbox")
    }

    pub async fn run_sandbox(
        &mut self,
        config: v1::PodSandboxConfig,
    ) -> Result<String, tonic::Status> {
        self.runtime
            .run_pod_sandbox(v1::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler: String::new(),
            })
            .await
            .map(|r| r.into_inner().pod_sandbox_id)
    }

    pub async fn sandbox_status(
        &mut self,
        id: &str,
    ) -> Result<v1::PodSandboxStatusResponse, tonic::Status> {
        self.runtime
            .pod_sandbox_status(v1::PodSandboxStatusRequest {
                pod_sandbox_id: id.to_owned(),
                verbose: false,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Pulls nginx and runs a container of it in `sandbox` (fake-cri simulates
    /// its server on port 80); the container's id.
    pub async fn run_nginx(&mut self, sandbox: &str) -> String {
        self.pull("nginx").await.expect("pull nginx");
        let mut web = container_config("web", &[]);
        web.image = Some(image_spec("nginx"));
        self.run_with(sandbox, web).await
    }

    /// `UpdateRuntimeConfig` with `pod_cidr` as the kubelet sends its node's `podCIDR`.
    pub async fn set_pod_cidr(&mut self, pod_cidr: &str) -> Result<(), tonic::Status> {
        self.runtime
            .update_runtime_config(v1::UpdateRuntimeConfigRequest {
                runtime_config: Some(v1::RuntimeConfig {
                    network_config: Some(v1::NetworkConfig {
                        pod_cidr: pod_cidr.to_owned(),
                    }),
                }),
            })
            .await
            .map(|_| ())
    }

    /// `ImageFsInfo`.
    pub async fn image_fs_info(&mut self) -> v1::ImageFsInfoResponse {
        self.images
            .image_fs_info(v1::ImageFsInfoRequest {})
            .await
            .expect("ImageFsInfo")
            .into_inner()
    }

    /// The pod IP `PodSandboxStatus` reports.
    pub async fn pod_ip(&mut self, id: &str) -> String {
        let status = self.sandbox_status(id).await.unwrap().status.unwrap();
        status.network.unwrap().ip
    }

    pub async fn stop_sandbox(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.runtime
            .stop_pod_sandbox(v1::StopPodSandboxRequest {
                pod_sandbox_id: id.to_owned(),
            })
            .await
            .map(|_| ())
    }

    pub async fn remove_sandbox(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.runtime
            .remove_pod_sandbox(v1::RemovePodSandboxRequest {
                pod_sandbox_id: id.to_owned(),
            })
            .await
            .map(|_| ())
    }

    /// The ids of the sandboxes `filter` selects, sorted.
    pub async fn sandbox_ids(&mut self, filter: Option<v1::PodSandboxFilter>) -> Vec<String> {
        let items = self
            .runtime
            .list_pod_sandbox(v1::ListPodSandboxRequest { filter })
            .await
            .expect("ListPodSandbox")
            .into_inner()
            .items;
        let mut ids: Vec<String> = items.into_iter().map(|s| s.id).collect();
        ids.sort();
        ids
    }

    /// Creates a container running `sh -c SCRIPT` with the kubelet's default
    /// PID namespace (its own: the script is PID 1).
    pub async fn create(
        &mut self,
        sandbox: &str,
        name: &str,
        script: &str,
    ) -> Result<String, tonic::Status> {
        self.create_with(sandbox, container_config(name, &["sh", "-c", script]))
            .await
    }

    /// Pulls busybox, then creates a container from `config`.
    pub async fn create_with(
        &mut self,
        sandbox: &str,
        config: v1::ContainerConfig,
    ) -> Result<String, tonic::Status> {
        self.pull("busybox").await?;
        self.create_raw(sandbox, Some(config)).await
    }

    /// `CreateContainer` exactly as given, without pulling anything first.
    pub async fn create_raw(
        &mut self,
        sandbox: &str,
        config: Option<v1::ContainerConfig>,
    ) -> Result<String, tonic::Status> {
        self.runtime
            .create_container(v1::CreateContainerRequest {
                pod_sandbox_id: sandbox.to_owned(),
                config,
                sandbox_config: None,
            })
            .await
            .map(|r| r.into_inner().container_id)
    }

    pub async fn start_container(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.runtime
            .start_container(v1::StartContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(|_| ())
    }

    /// Creates and starts `sh -c SCRIPT`.
    pub async fn run(&mut self, sandbox: &str, name: &str, script: &str) -> String {
        let id = self
            .create(sandbox, name, script)
            .await
            .expect("CreateContainer");
        self.start_container(&id).await.expect("StartContainer");
        id
    }

    /// Creates and starts a container from `config`.
    pub async fn run_with(&mut self, sandbox: &str, config: v1::ContainerConfig) -> String {
        let id = self
            .create_with(sandbox, config)
            .await
            .expect("CreateContainer");
        self.start_container(&id).await.expect("StartContainer");
        id
    }

    pub async fn status(&mut self, id: &str) -> Result<v1::ContainerStatus, tonic::Status> {
        self.runtime
            .container_status(v1::ContainerStatusRequest {
                container_id: id.to_owned(),
                verbose: false,
            })
            .await
            .map(|r| r.into_inner().status.unwrap_or_default())
    }

    /// Waits (at most `limit`) until the container has exited; returns its status.
    pub async fn wait_exit(&mut self, id: &str, limit: Duration) -> v1::ContainerStatus {
        tokio::time::timeout(limit, async {
            loop {
                let status = self.status(id).await.expect("ContainerStatus");
                if status.state == v1::ContainerState::ContainerExited as i32 {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("container {id} did not exit within {limit:?}"))
    }

    pub async fn stop(&mut self, id: &str, timeout: i64) -> Result<(), tonic::Status> {
        self.runtime
            .stop_container(v1::StopContainerRequest {
                container_id: id.to_owned(),
                timeout,
            })
            .await
            .map(|_| ())
    }

    pub async fn remove(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.runtime
            .remove_container(v1::RemoveContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(|_| ())
    }

    /// The ids of the containers `filter` selects, sorted.
    pub async fn container_ids(&mut self, filter: Option<v1::ContainerFilter>) -> Vec<String> {
        let containers = self
            .runtime
            .list_containers(v1::ListContainersRequest { filter })
            .await
            .expect("ListContainers")
            .into_inner()
            .containers;
        let mut ids: Vec<String> = containers.into_iter().map(|c| c.id).collect();
        ids.sort();
        ids
    }

    pub async fn exec(
        &mut self,
        id: &str,
        cmd: &[&str],
        timeout: i64,
    ) -> Result<v1::ExecSyncResponse, tonic::Status> {
        self.runtime
            .exec_sync(v1::ExecSyncRequest {
                container_id: id.to_owned(),
                cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
                timeout,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Starts `sh -c 'touch /tmp/in-exec; sleep 600'` as an exec with no
    /// timeout in container `id` and returns once it runs; the task ends when
    /// the container or the runtime ends the exec.
    pub async fn start_blocking_exec(
        &mut self,
        id: &str,
    ) -> tokio::task::JoinHandle<Result<tonic::Response<v1::ExecSyncResponse>, tonic::Status>> {
        let mut runtime = self.runtime.clone();
        let container_id = id.to_owned();
        let exec = tokio::spawn(async move {
            runtime
                .exec_sync(v1::ExecSyncRequest {
                    container_id,
                    cmd: vec![
                        "sh".to_owned(),
                        "-c".to_owned(),
                        "touch /tmp/in-exec; sleep 600".to_owned(),
                    ],
                    timeout: 0,
                })
                .await
        });
        tokio::time::timeout(LIMIT, async {
            while self
                .exec(id, &["test", "-e", "/tmp/in-exec"], 5)
                .await
                .expect("ExecSync")
                .exit_code
                != 0
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the exec runs");
        exec
    }

    /// `Status`: (RuntimeReady, NetworkReady) conditions.
    pub async fn conditions(&mut self) -> (v1::RuntimeCondition, v1::RuntimeCondition) {
        let status = self
            .runtime
            .status(v1::StatusRequest { verbose: false })
            .await
            .expect("Status")
            .into_inner()
            .status
            .expect("Status.status");
        let find = |kind: &str| {
            status
                .conditions
                .iter()
                .find(|c| c.r#type == kind)
                .cloned()
                .unwrap_or_else(|| panic!("no {kind} condition in {status:?}"))
        };
        (find("RuntimeReady"), find("NetworkReady"))
    }

    pub fn control_socket(&self) -> PathBuf {
        self.dir.path().join("control.sock")
    }

    /// One request to the control API over its unix socket: (HTTP status,
    /// JSON body, or the body as a JSON string when it is not JSON).
    pub async fn http(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        http(&self.control_socket(), method, path, body).await
    }
}

/// One HTTP/1.1 request over a unix socket.
pub async fn http(socket: &Path, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect to the control socket");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("HTTP handshake");
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "fake-cri")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(
            body.to_owned(),
        )))
        .expect("request");
    let response = sender.send_request(request).await.expect("HTTP response");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("HTTP body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
    });
    (status, value)
}

/// A sandbox `name` in `default` (uid `uid-<name>`) writing its logs to `log_directory`.
pub fn sandbox_config(name: &str, log_directory: &str) -> v1::PodSandboxConfig {
    v1::PodSandboxConfig {
        metadata: Some(v1::PodSandboxMetadata {
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            namespace: "default".to_owned(),
            attempt: 0,
        }),
        hostname: name.to_owned(),
        log_directory: log_directory.to_owned(),
        ..Default::default()
    }
}

pub fn image_spec(image: &str) -> v1::ImageSpec {
    v1::ImageSpec {
        image: image.to_owned(),
        ..Default::default()
    }
}

/// A container config as the kubelet sends it: its own PID namespace, a log path.
pub fn container_config(name: &str, argv: &[&str]) -> v1::ContainerConfig {
    v1::ContainerConfig {
        metadata: Some(v1::ContainerMetadata {
            name: name.to_owned(),
            attempt: 0,
        }),
        image: Some(image_spec("busybox")),
        command: argv.iter().map(|s| (*s).to_owned()).collect(),
        log_path: format!("{name}/0.log"),
        linux: Some(v1::LinuxContainerConfig {
            security_context: Some(v1::LinuxContainerSecurityContext {
                namespace_options: Some(v1::NamespaceOption {
                    pid: v1::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `sh -c SCRIPT` with the kubelet's defaults.
pub fn script_config(name: &str, script: &str) -> v1::ContainerConfig {
    container_config(name, &["sh", "-c", script])
}

/// Waits until something accepts connections on `ip:port` (a simulated
/// server listens once its container's process runs).
pub async fn until_listening(ip: &str, port: u16) {
    tokio::time::timeout(LIMIT, async {
        while tokio::net::TcpStream::connect((ip, port)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("nothing listens on {ip}:{port}"));
}

/// One entry of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub stream: String,
    pub tag: String,
    pub text: String,
}

/// Reads a CRI log (`<RFC3339Nano> <stream> <F|P> <text>`), checking each
/// entry's timestamp parses.
pub fn read_log(path: &str) -> Vec<LogEntry> {
    let content =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading log {path}: {e}"));
    content
        .lines()
        .map(|line| {
            let mut fields = line.splitn(4, ' ');
            let time = fields.next().unwrap_or_default();
            chrono::DateTime::parse_from_rfc3339(time)
                .unwrap_or_else(|e| panic!("bad time in {line:?}: {e}"));
            LogEntry {
                stream: fields.next().unwrap_or_default().to_owned(),
                tag: fields.next().unwrap_or_default().to_owned(),
                text: fields.next().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

/// The full stdout lines of a CRI log.
pub fn stdout_lines(path: &str) -> Vec<String> {
    read_log(path)
        .into_iter()
        .filter(|e| e.stream == "stdout")
        .map(|e| e.text)
        .collect()
}

pub fn state(s: v1::ContainerState) -> i32 {
    s as i32
}

/// Expects an error with `code`; returns its message.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
) -> String {
    match result {
        Ok(value) => panic!("expected {code:?}, got Ok({value:?})"),
        Err(status) => {
            assert_eq!(status.code(), code, "unexpected status: {status:?}");
            status.message().to_owned()
        }
    }
}

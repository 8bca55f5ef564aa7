//! Fault injection through the fake-cri control API: JSON over HTTP/1.1 on its unix control socket.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::UnixStream;

use crate::case::Fault;

/// A control API call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control socket could not be reached.
    #[error("cannot connect to the fake-cri control socket {}", socket.display())]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed.
    #[error("control request {method} {path} failed")]
    Http {
        /// Method.
        method: &'static str,
        /// Path.
        path: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The API answered with an error status.
    #[error("control request {method} {path} answered {status}: {body}")]
    Status {
        /// Method.
        method: &'static str,
        /// Path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
}

/// A client of one fake-cri's control socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
}

impl Client {
    /// A client for the control socket at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one request and returns the JSON body (or `Null` for an empty one).
    pub async fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Error> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|source| Error::Connect {
                socket: self.socket.clone(),
                source,
            })?;
        let http_err = |source| Error::Http {
            method,
            path: path.to_string(),
            source,
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http_err)?;
        let conn_task = tokio::spawn(conn);
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "fake-cri")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| Error::Status {
                method,
                path: path.to_string(),
                status: 0,
                body: e.to_string(),
            })?;
        let resp = sender.send_request(req).await.map_err(http_err)?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(http_err)?
            .to_bytes();
        conn_task.abort();
        if !(200..300).contains(&status) {
            return Err(Error::Status {
                method,
                path: path.to_string(),
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        if body.is_empty() {
            return Ok(Value::Null);
        }
        Ok(serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())))
    }

    /// Injects `fault`; `pod` is `(namespace, name)` of the case's pod for container kills.
    pub async fn inject(&self, fault: &Fault, namespace: &str, pod: &str) -> Result<Value, Error> {
        let (method, path, body) = request_for(fault, namespace, pod);
        self.request(method, path, body).await
    }

    /// `GET /healthz`.
    pub async fn healthy(&self) -> bool {
        self.request("GET", "/healthz", None).await.is_ok()
    }
}

/// The HTTP request that injects `fault` (method, path, JSON body).
pub fn request_for(
    fault: &Fault,
    namespace: &str,
    pod: &str,
) -> (&'static str, &'static str, Option<Value>) {
    match fault {
        Fault::Runtime(r) => {
            let mut body = serde_json::Map::new();
            if let Some(v) = r.runtime_ready {
                body.insert("runtimeReady".into(), v.into());
            }
            if let Some(v) = r.network_ready {
                body.insert("networkReady".into(), v.into());
            }
            if let Some(v) = &r.reason {
                body.insert("reason".into(), v.clone().into());
            }
            if let Some(v) = &r.message {
                body.insert("message".into(), v.clone().into());
            }
            ("POST", "/v1/runtime", Some(Value::Object(body)))
        }
        Fault::Kill(k) => (
            "POST",
            "/v1/kill",
            Some(
                json!({"namespace": namespace, "pod": pod, "container": k.container, "oom": k.oom}),
            ),
        ),
        Fault::FailNext(f) => {
            let mut body = json!({"rpc": f.rpc, "count": f.count});
            if let Some(code) = &f.code {
                body["code"] = code.clone().into();
            }
            if let Some(message) = &f.message {
                body["message"] = message.clone().into();
            }
            if let Some(delay) = f.delay {
                body["delayMs"] = (delay.get().as_millis() as u64).into();
            }
            ("POST", "/v1/faults", Some(body))
        }
        Fault::ImageFs(i) => {
            let mut body = json!({"usedBytes": i.used_bytes});
            if let Some(c) = i.capacity_bytes {
                body["capacityBytes"] = c.into();
            }
            ("PUT", "/v1/imagefs", Some(body))
        }
        Fault::RestartRuntime => ("POST", "/v1/restart", None),
        Fault::ClearFaults => ("DELETE", "/v1/faults", None),
    }
}

/// `None` when the control API's `/v1/state` answer satisfies `exp` for pod `namespace/pod`.
pub fn runtime_mismatch(
    exp: &crate::case::RuntimeExpectation,
    state: &Value,
    namespace: &str,
    pod: &str,
) -> Option<String> {
    let empty = Vec::new();
    if let Some(want) = exp.running_containers {
        let containers = state["containers"].as_array().unwrap_or(&empty);
        let running: Vec<&str> = containers
            .iter()
            .filter(|c| {
                c["podNamespace"] == namespace
                    && c["podName"] == pod
                    && c["state"] == "CONTAINER_RUNNING"
            })
            .map(|c| c["name"].as_str().unwrap_or("?"))
            .collect();
        if running.len() != want {
            return Some(format!(
                "{} running container(s) of the pod in the runtime ({}), expected {want}",
                running.len(),
                running.join(", ")
            ));
        }
    }
    if let Some(want) = exp.ready_sandboxes {
        let sandboxes = state["sandboxes"].as_array().unwrap_or(&empty);
        let ready = sandboxes
            .iter()
            .filter(|s| {
                s["namespace"] == namespace && s["name"] == pod && s["state"] == "SANDBOX_READY"
            })
            .count();
        if ready != want {
            return Some(format!(
                "{ready} ready sandbox(es) of the pod in the runtime, expected {want}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_state_counts_the_pods_containers() {
        let state = json!({"runtimeReady": true, "networkReady": true,
        "sandboxes": [{"id": "s", "name": "p", "namespace": "ns", "uid": "u", "state": "SANDBOX_READY"}],
        "containers": [
            {"id": "1", "sandboxId": "s", "name": "c", "podName": "p", "podNamespace": "ns", "podUid": "u", "state": "CONTAINER_RUNNING", "exitCode": 0},
            {"id": "2", "sandboxId": "x", "name": "c", "podName": "p", "podNamespace": "other", "podUid": "v", "state": "CONTAINER_RUNNING", "exitCode": 0}
        ]});
        let exp: crate::case::RuntimeExpectation =
            serde_yaml::from_str("runningContainers: 0").unwrap();
        let m = runtime_mismatch(&exp, &state, "ns", "p").unwrap();
        assert!(
            m.starts_with("1 running container(s) of the pod in the runtime (c)"),
            "{m}"
        );
        let exp: crate::case::RuntimeExpectation =
            serde_yaml::from_str("runningContainers: 1\nreadySandboxes: 1").unwrap();
        assert_eq!(runtime_mismatch(&exp, &state, "ns", "p"), None);
    }

    use super::*;
    use crate::case::model::{KillFault, RuntimeFault};

    #[test]
    fn faults_map_to_the_documented_requests() {
        let (m, p, b) = request_for(
            &Fault::Kill(KillFault {
                container: "c".into(),
                oom: true,
            }),
            "ns",
            "p",
        );
        assert_eq!((m, p), ("POST", "/v1/kill"));
        assert_eq!(
            b.unwrap(),
            json!({"namespace": "ns", "pod": "p", "container": "c", "oom": true})
        );
        let (m, p, b) = request_for(
            &Fault::Runtime(RuntimeFault {
                runtime_ready: Some(false),
                network_ready: None,
                reason: None,
                message: None,
            }),
            "ns",
            "p",
        );
        assert_eq!((m, p), ("POST", "/v1/runtime"));
        assert_eq!(b.unwrap(), json!({"runtimeReady": false}));
        assert_eq!(request_for(&Fault::ClearFaults, "", "").0, "DELETE");
    }

    #[tokio::test]
    async fn talks_http_over_a_unix_socket() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("control.sock");
        let listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).into_owned();
            let body = r#"{"killed":["abc"]}"#;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(resp.as_bytes()).await.unwrap();
            req
        });
        let client = Client::new(&sock);
        let out = client
            .inject(
                &Fault::Kill(KillFault {
                    container: "c".into(),
                    oom: false,
                }),
                "ns",
                "p",
            )
            .await
            .unwrap();
        assert_eq!(out, json!({"killed": ["abc"]}));
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /v1/kill HTTP/1.1"), "{req}");
        assert!(req.contains(r#""container":"c""#), "{req}");
    }
}

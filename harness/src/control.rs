//! Fault injection through the fake-cri control API: JSON over HTTP/1.1 on its unix control socket.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use nodeconform_fake_cri::Snapshot;
use nodeconform_fake_cri::control::{FaultBody, ImageFsBody, KillBody, RuntimeBody};
use serde::Serialize;
use serde_json::Value;
use tokio::net::UnixStream;

use crate::case::Fault;

/// A control API call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The fault is not the runtime's: an API fault goes to the node's API proxy.
    #[error("an API fault is injected by the node's API proxy, not by fake-cri")]
    NotRuntime,
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
    /// The answer is not what the control API answers.
    #[error("control request GET {path}: unexpected answer")]
    Decode {
        /// Path.
        path: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
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
        let (method, path, body) = request_for(fault, namespace, pod).ok_or(Error::NotRuntime)?;
        self.request(method, path, body).await
    }

    /// `GET /v1/state`: every sandbox and container the runtime has, with what fake-cri
    /// knows of them (the CRI shows the same through its list calls).
    pub async fn state(&self) -> Result<Snapshot, Error> {
        const PATH: &str = "/v1/state";
        let state = self.request("GET", PATH, None).await?;
        serde_json::from_value(state).map_err(|source| Error::Decode { path: PATH, source })
    }

    /// `GET /healthz`.
    pub async fn healthy(&self) -> bool {
        self.request("GET", "/healthz", None).await.is_ok()
    }
}

/// The HTTP request that injects `fault` (method, path, JSON body), in fake-cri's own
/// types of the control API's bodies; `None` for an API fault, which is not fake-cri's.
pub fn request_for(
    fault: &Fault,
    namespace: &str,
    pod: &str,
) -> Option<(&'static str, &'static str, Option<Value>)> {
    Some(match fault {
        Fault::Runtime(r) => (
            "POST",
            "/v1/runtime",
            Some(json(RuntimeBody {
                runtime_ready: r.runtime_ready,
                network_ready: r.network_ready,
                reason: r.reason.clone(),
                message: r.message.clone(),
            })),
        ),
        Fault::Kill(k) => (
            "POST",
            "/v1/kill",
            Some(json(KillBody {
                namespace: Some(namespace.to_owned()),
                pod: Some(pod.to_owned()),
                container: Some(k.container.clone()),
                oom: k.oom,
                ..KillBody::default()
            })),
        ),
        Fault::FailNext(f) => (
            "POST",
            "/v1/faults",
            Some(json(FaultBody {
                rpc: f.rpc.clone(),
                count: f.count,
                code: f.code.clone(),
                message: f.message.clone(),
                delay_ms: f.delay.map_or(0, |d| d.get().as_millis() as u64),
            })),
        ),
        Fault::ImageFs(i) => (
            "PUT",
            "/v1/imagefs",
            Some(json(ImageFsBody {
                used_bytes: i.used_bytes,
                capacity_bytes: i.capacity_bytes,
            })),
        ),
        Fault::RestartRuntime => ("POST", "/v1/restart", None),
        Fault::ClearFaults => ("DELETE", "/v1/faults", None),
        Fault::Api(_) => return None,
    })
}

/// A body as JSON. The bodies are plain structs of strings, numbers and booleans, which
/// always serialize.
fn json(body: impl Serialize) -> Value {
    serde_json::to_value(body).expect("a control API body serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::model::{KillFault, RuntimeFault};
    use serde_json::json;

    #[test]
    fn faults_map_to_the_documented_requests() {
        let (m, p, b) = request_for(
            &Fault::Kill(KillFault {
                container: "c".into(),
                oom: true,
            }),
            "ns",
            "p",
        )
        .unwrap();
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
        )
        .unwrap();
        assert_eq!((m, p), ("POST", "/v1/runtime"));
        assert_eq!(b.unwrap(), json!({"runtimeReady": false}));
        assert_eq!(
            request_for(&Fault::ClearFaults, "", "").unwrap().0,
            "DELETE"
        );
        let api = Fault::Api(crate::case::api_fault::ApiFault::CloseWatches);
        assert!(request_for(&api, "", "").is_none());
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

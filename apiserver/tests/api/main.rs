//! Integration tests: the API server double over real HTTP on 127.0.0.1, driven by kube-rs,
//! and raw HTTP (real clients no one here wrote are in `tests/clients.rs`).

mod binding;
mod crud;
mod deletion;
mod errors;
mod garbage_collection;
mod kubelet;
mod logs;
mod node_lifecycle;
mod patches;
mod resize;
mod security;
mod selectors;
mod watches;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nodeconform_apiserver::ApiServer;
use serde_json::Value;

/// The bound on every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// A server with the defaults.
pub async fn server() -> ApiServer {
    ApiServer::builder().start().await.expect("server starts")
}

/// A server answering as Kubernetes 1.28, for what was recorded from kube-apiserver 1.28.7.
pub async fn server_1_28() -> ApiServer {
    ApiServer::builder()
        .emulate_version(nodeconform_apiserver::Version::V1_28)
        .start()
        .await
        .expect("server starts")
}

/// A raw HTTP response: status, content type and body.
pub struct Raw {
    pub status: u16,
    pub content_type: String,
    pub warnings: Vec<String>,
    pub body: Bytes,
}

impl Raw {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends one plain-HTTP request with the given headers and body.
pub async fn raw(
    api: &ApiServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Raw {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", api.url()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).expect("valid request");
    let resp = tokio::time::timeout(WAIT, client.request(req))
        .await
        .expect("request timed out")
        .expect("request sent");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let warnings = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Raw {
        status,
        content_type,
        warnings,
        body,
    }
}

/// An object from its JSON.
pub fn from_json<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid object")
}

/// JSON content type header.
pub const JSON: (&str, &str) = ("content-type", "application/json");

/// Asserts a `metav1.Status` failure with this code and reason.
#[track_caller]
pub fn assert_status(r: &Raw, code: u16, reason: &str) {
    let v = r.json();
    assert_eq!(r.status, code, "{v}");
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert!(!v["message"].as_str().unwrap_or("").is_empty(), "{v}");
}

/// Asserts a kube-rs error is an API error with this code and reason, and returns its
/// `Status` for what else a test checks.
#[track_caller]
pub fn assert_api_error<T: std::fmt::Debug>(
    r: Result<T, kube::Error>,
    code: u16,
    reason: &str,
) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, code, "{s:?}");
            assert_eq!(s.reason, reason, "{s:?}");
            s
        }
        other => panic!("expected API error {code} {reason}, got {other:?}"),
    }
}

//! `pods/log`: the double proxies to a node's kubelet over HTTPS. A stand-in kubelet
//! (TLS with a self-signed certificate, on 127.0.0.1) records what it is asked and answers
//! by container name, so each upstream mapping is seen through kube-rs and raw HTTP.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, LogParams, PostParams};
use nodeconform_apiserver::ApiServer;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::raw;

/// A kubelet stand-in on `ip`:0; returns its port and the requests it saw.
async fn fake_kubelet(ip: IpAddr) -> (u16, Arc<Mutex<Vec<String>>>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(SocketAddr::from((ip, 0))).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let uri = req.uri().to_string();
                    log.lock().unwrap().push(uri.clone());
                    let container = req.uri().path().rsplit('/').next().unwrap_or("").to_owned();
                    let (code, body) = match container.as_str() {
                        "waiting" => (
                            400,
                            r#"container "waiting" in pod "p" is waiting to start: ContainerCreating"#
                                .to_owned(),
                        ),
                        "gone" => (404, r#"pod "p" does not exist"#.to_owned()),
                        "boom" => (500, "boom".to_owned()),
                        _ => (200, "hello\nworld\n".to_owned()),
                    };
                    async move {
                        let mut resp = http::Response::new(Full::new(Bytes::from(body)));
                        *resp.status_mut() = http::StatusCode::from_u16(code).unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

async fn node(api: &ApiServer, name: &str, address: &str, port: u16) {
    let nodes: Api<Node> = Api::all(api.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {
            "addresses": [{"type": "Hostname", "address": "unresolvable.invalid"},
                          {"type": "InternalIP", "address": address}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        },
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let mut with_status = created.clone();
    with_status.status = node.status;
    nodes
        .replace_status(name, &PostParams::default(), &with_status)
        .await
        .unwrap();
}

async fn pod(api: &ApiServer, name: &str, node: Option<&str>) {
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let mut spec = json!({"containers": [
        {"name": "c", "image": "busybox"}, {"name": "waiting", "image": "busybox"},
        {"name": "gone", "image": "busybox"}, {"name": "boom", "image": "busybox"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

fn container(name: &str) -> LogParams {
    LogParams {
        container: Some(name.into()),
        ..LogParams::default()
    }
}

fn api_error(err: kube::Error) -> (u16, String, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_proxied_to_the_kubelet_with_upstreams_mapping() {
    let api = crate::server().await;
    let (port, seen) = fake_kubelet(IpAddr::V4(Ipv4Addr::LOCALHOST)).await;
    node(&api, "n1", "127.0.0.1", port).await;
    pod(&api, "p", Some("n1")).await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");

    let params = LogParams {
        container: Some("c".into()),
        follow: true,
        tail_lines: Some(2),
        timestamps: true,
        limit_bytes: Some(100),
        previous: true,
        since_seconds: Some(30),
        ..LogParams::default()
    };
    assert_eq!(pods.logs("p", &params).await.unwrap(), "hello\nworld\n");
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        "/containerLogs/default/p/c?follow=true&limitBytes=100&previous=true&sinceSeconds=30&tailLines=2&timestamps=true"
    );

    assert_eq!(
        api_error(pods.logs("p", &container("waiting")).await.unwrap_err()),
        (
            400,
            "BadRequest".into(),
            r#"container "waiting" in pod "p" is waiting to start: ContainerCreating"#.into()
        )
    );
    assert_eq!(
        api_error(pods.logs("p", &container("gone")).await.unwrap_err()),
        (
            404,
            "NotFound".into(),
            "the server could not find the requested resource ( pods/log p)".into()
        )
    );
    assert_eq!(
        api_error(pods.logs("p", &container("boom")).await.unwrap_err()),
        (
            500,
            "InternalError".into(),
            "Internal error occurred: boom".into()
        )
    );
    assert_eq!(
        api_error(pods.logs("p", &LogParams::default()).await.unwrap_err()).2,
        "a container name must be specified for pod p, choose one of: [c waiting gone boom]"
    );

    // The raw answer is text/plain; other verbs are refused.
    let ok = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/pods/p/log?container=c",
        &[],
        "",
    )
    .await;
    assert_eq!((ok.status, ok.content_type.as_str()), (200, "text/plain"));
    assert_eq!(&ok.body[..], b"hello\nworld\n");
    let path = "/api/v1/namespaces/default/pods/p/log?container=c";
    let text_only = raw(&api, "GET", path, &[("accept", "text/plain")], "").await;
    assert_eq!(text_only.status, 200);
    let post = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/p/log",
        &[],
        "",
    )
    .await;
    assert_eq!(post.status, 405);

    // Not scheduled: an empty log, as upstream.
    pod(&api, "unscheduled", None).await;
    assert_eq!(pods.logs("unscheduled", &container("c")).await.unwrap(), "");

    // A kubelet nobody listens for: 500 in Go's words, without a reason.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap().port();
    drop(closed);
    node(&api, "n2", "127.0.0.1", dead).await;
    pod(&api, "orphan", Some("n2")).await;
    let (code, reason, message) =
        api_error(pods.logs("orphan", &container("c")).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (500, ""));
    assert!(
        message.starts_with(&format!(
            "Get \"https://127.0.0.1:{dead}/containerLogs/default/orphan/c\": dial tcp 127.0.0.1:{dead}: connect: "
        )),
        "{message}"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_on_loopback_is_reached_through_the_hosts_own_address() {
    // The harness's kubelets listen on 127.0.0.1 and report the host's address.
    let host_ip = host_address();
    let api = crate::server().await;
    let (port, _) = fake_kubelet(IpAddr::V4(Ipv4Addr::LOCALHOST)).await;
    node(&api, "n1", &host_ip.to_string(), port).await;
    pod(&api, "p", Some("n1")).await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    assert_eq!(
        pods.logs("p", &container("c")).await.unwrap(),
        "hello\nworld\n"
    );
    api.shutdown().await;
}

/// An IPv4 address of this host's that is not loopback, from getifaddrs(3): any interface
/// has one (the test needs no route, and sends nothing off the host).
fn host_address() -> IpAddr {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs(3) fills `list`, freed by freeifaddrs(3) below.
    let status = unsafe { libc::getifaddrs(&mut list) };
    assert_eq!(status, 0, "getifaddrs: {}", std::io::Error::last_os_error());
    let mut found = None;
    let mut at = list;
    while !at.is_null() && found.is_none() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed; an
        // AF_INET address is a sockaddr_in.
        unsafe {
            let addr = (*at).ifa_addr;
            if !addr.is_null() && i32::from((*addr).sa_family) == libc::AF_INET {
                let sin = &*(addr as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                found = (!ip.is_loopback()).then_some(ip);
            }
            at = (*at).ifa_next;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    IpAddr::V4(found.expect("this host has no IPv4 address but loopback: the test needs one"))
}

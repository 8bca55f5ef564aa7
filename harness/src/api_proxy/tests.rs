//! The proxy in front of the API server double, over real sockets: what a client of the
//! proxy sees of each fault, and that without one the proxy changes nothing.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

use super::{Action, ApiProxy, Scope, Verb};

async fn double() -> nodeconform_apiserver::ApiServer {
    nodeconform_apiserver::ApiServer::builder()
        .start()
        .await
        .expect("the API server double starts")
}

fn get(path: &str) -> http::Request<kube::client::Body> {
    http::Request::get(path)
        .body(kube::client::Body::empty())
        .expect("a request")
}

async fn body(response: http::Response<kube::client::Body>) -> Bytes {
    response
        .into_body()
        .collect()
        .await
        .expect("the whole body")
        .to_bytes()
}

/// A client of the proxy that shows every answer as it comes: kube's default retry of
/// 429, 503 and 504 would hide the fault's first answers.
fn raw_client(proxy: &ApiProxy) -> kube::Client {
    let mut config = kube::Config::new(proxy.url().clone());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn without_a_fault_requests_and_watches_pass_through() {
    let api = double().await;
    let proxy = ApiProxy::start(api.client()).await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(proxy.client().unwrap(), "default");
    maps.create(&PostParams::default(), &config_map("through"))
        .await
        .expect("a create through the proxy");
    let direct: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    assert!(
        direct.get("through").await.is_ok(),
        "the write reached the server"
    );
    let listed = maps.list(&Default::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|m| m.metadata.name.as_deref() == Some("through"))
    );
}

#[tokio::test]
async fn errors_are_answered_for_the_matching_requests_only() {
    let api = double().await;
    let proxy = ApiProxy::start(api.client()).await.unwrap();
    let client = raw_client(&proxy);
    proxy.inject(
        Scope {
            verb: Some(Verb::List),
            resource: Some("configmaps".into()),
            count: Some(1),
            lasting: None,
        },
        Action::Error {
            code: http::StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(Duration::from_secs(3)),
        },
    );
    let pods = client
        .send(get("/api/v1/namespaces/default/pods"))
        .await
        .unwrap();
    assert_eq!(pods.status(), 200, "another resource is not throttled");
    let throttled = client
        .send(get("/api/v1/namespaces/default/configmaps"))
        .await
        .unwrap();
    assert_eq!(throttled.status(), 429);
    assert_eq!(throttled.headers()[http::header::RETRY_AFTER], "3");
    assert!(body(throttled).await.starts_with(b"Too many requests"));
    let again = client
        .send(get("/api/v1/namespaces/default/configmaps"))
        .await
        .unwrap();
    assert_eq!(again.status(), 200, "count: 1 took one request");
}

#[tokio::test]
async fn an_expired_watch_gets_410_and_an_ended_watch_ends() {
    let api = double().await;
    let proxy = ApiProxy::start(api.client()).await.unwrap();
    let client = proxy.client().unwrap();
    proxy.inject(Scope::default(), Action::ExpireWatch);
    // Expiry takes watches only: a list through the same rule passes.
    let list = client
        .send(get("/api/v1/namespaces/default/pods"))
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let expired = client
        .send(get(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=7",
        ))
        .await
        .unwrap();
    let event: serde_json::Value = serde_json::from_slice(&body(expired).await).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");

    proxy.clear();
    let watch = client
        .send(get("/api/v1/namespaces/default/configmaps?watch=true"))
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let rest = tokio::spawn(body(watch));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!rest.is_finished(), "an open watch stays open");
    proxy.end_watches();
    tokio::time::timeout(Duration::from_secs(30), rest)
        .await
        .expect("the watch ended")
        .unwrap();
}

#[tokio::test]
async fn a_restart_refuses_connections_until_it_is_up_and_delays_hold_requests() {
    let api = double().await;
    let proxy = ApiProxy::start(api.client()).await.unwrap();
    let client = raw_client(&proxy);
    proxy.restart(Duration::from_secs(2));
    assert!(
        client.send(get("/api/v1/namespaces")).await.is_err(),
        "no answer while down"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let up = client.send(get("/api/v1/namespaces")).await.unwrap();
    assert_eq!(up.status(), 200, "answered again once up");

    proxy.inject(
        Scope {
            resource: Some("namespaces".into()),
            ..Scope::default()
        },
        Action::Delay(Duration::from_millis(500)),
    );
    let start = std::time::Instant::now();
    let late = client.send(get("/api/v1/namespaces")).await.unwrap();
    assert_eq!(late.status(), 200);
    assert!(start.elapsed() >= Duration::from_millis(500), "held back");
    proxy.clear();
    proxy.inject(
        Scope {
            verb: Some(Verb::Get),
            ..Scope::default()
        },
        Action::Reset,
    );
    assert!(
        client
            .send(get("/api/v1/namespaces/default"))
            .await
            .is_err()
    );
}

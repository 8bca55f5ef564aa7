//! Bearer-token authentication and TLS with the CA in the kubeconfig.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use nodeconform_apiserver::ApiServer;

use crate::{assert_status, raw};

#[tokio::test]
async fn token_is_required() {
    let api = ApiServer::builder()
        .token(Some("s3cret".into()))
        .start()
        .await
        .unwrap();
    assert_status(
        &raw(&api, "GET", "/api/v1/pods", &[], "").await,
        401,
        "Unauthorized",
    );
    assert_status(
        &raw(
            &api,
            "GET",
            "/api/v1/pods",
            &[("authorization", "Bearer wrong")],
            "",
        )
        .await,
        401,
        "Unauthorized",
    );
    assert_eq!(
        raw(
            &api,
            "GET",
            "/api/v1/pods",
            &[("authorization", "Bearer s3cret")],
            ""
        )
        .await
        .status,
        200
    );
    assert_eq!(raw(&api, "GET", "/healthz", &[], "").await.status, 200);
    assert!(api.kubeconfig().contains("s3cret"));
    // The handle's client carries the token.
    Api::<Namespace>::all(api.client())
        .get("default")
        .await
        .unwrap();
    api.shutdown().await;
}

#[tokio::test]
async fn tls_with_generated_ca() {
    let api = ApiServer::builder()
        .tls(true)
        .token(Some("t".into()))
        .start()
        .await
        .unwrap();
    assert!(api.url().starts_with("https://127.0.0.1:"));
    assert!(api.kubeconfig().contains("certificate-authority-data"));
    Api::<Namespace>::all(api.client())
        .get("default")
        .await
        .unwrap();
    // A client built from the written kubeconfig file works too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    api.write_kubeconfig(&path).unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    Api::<Namespace>::all(client)
        .get("kube-system")
        .await
        .unwrap();
    // Plain HTTP to a TLS port fails rather than being served.
    let plain = format!("http://{}/api", api.addr());
    let c: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let req = http::Request::get(plain).body(Default::default()).unwrap();
    let resp = tokio::time::timeout(crate::WAIT, c.request(req))
        .await
        .unwrap();
    assert!(resp.is_err() || resp.unwrap().status() != 200);
    api.shutdown().await;
}

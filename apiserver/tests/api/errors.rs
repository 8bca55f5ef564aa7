//! Every error the issue names, as `metav1.Status` with upstream's code and reason, and
//! malformed input that must not hurt the server.

use serde_json::json;

use crate::{JSON, assert_status, raw, server};

#[tokio::test]
async fn errors_are_statuses_with_upstream_codes() {
    let api = server().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_status(
        &raw(&api, "POST", cms, &[JSON], "{not json").await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(&api, "POST", cms, &[JSON], "[1,2]").await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(&api, "GET", "/api/v1/widgets", &[], "").await,
        404,
        "NotFound",
    );
    // A group nobody serves: Go's mux answers in plain text, as kube-apiserver does.
    let r = raw(&api, "GET", "/apis/example.com/v1/things", &[], "").await;
    assert_eq!((r.status, &r.body[..]), (404, &b"404 page not found\n"[..]));
    let r = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/configmaps/nope",
        &[],
        "",
    )
    .await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.json()["message"], "configmaps \"nope\" not found");
    assert_eq!(r.json()["details"]["name"], "nope");
    let body = json!({"metadata": {"name": "a"}}).to_string();
    assert_eq!(
        raw(&api, "POST", cms, &[JSON], body.clone()).await.status,
        201
    );
    let r = raw(&api, "POST", cms, &[JSON], body).await;
    assert_status(&r, 409, "AlreadyExists");
    assert_eq!(r.json()["message"], "configmaps \"a\" already exists");
    let r = raw(
        &api,
        "PUT",
        &format!("{cms}/a"),
        &[JSON],
        json!({"metadata": {"name": "b"}}).to_string(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("does not match the name on the URL")
    );
    let r = raw(
        &api,
        "POST",
        cms,
        &[JSON],
        json!({"metadata": {"name": "x", "namespace": "kube-system"}}).to_string(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    let r = raw(
        &api,
        "POST",
        cms,
        &[JSON],
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}).to_string(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert_status(
        &raw(
            &api,
            "POST",
            cms,
            &[JSON],
            json!({"metadata": {"name": "Bad_Name"}}).to_string(),
        )
        .await,
        422,
        "Invalid",
    );
    assert_status(
        &raw(
            &api,
            "POST",
            cms,
            &[JSON],
            json!({"metadata": {}}).to_string(),
        )
        .await,
        422,
        "Invalid",
    );
    assert_status(
        &raw(
            &api,
            "POST",
            "/api/v1/namespaces/default/pods",
            &[JSON],
            json!({"metadata": {"name": "p"}, "spec": {}}).to_string(),
        )
        .await,
        422,
        "Invalid",
    );
    let big = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"x\":\"{}\"}}}}",
        "a".repeat(3 * 1024 * 1024 + 1)
    );
    assert_status(
        &raw(&api, "POST", cms, &[JSON], big).await,
        413,
        "RequestEntityTooLarge",
    );
    let r = raw(
        &api,
        "POST",
        cms,
        &[("content-type", "application/vnd.kubernetes.protobuf")],
        vec![0x6b, 0x38, 0x73, 0x00],
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("--kube-api-content-type=application/json")
    );
    assert_status(
        &raw(&api, "POST", cms, &[("content-type", "text/plain")], "x").await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &raw(
            &api,
            "GET",
            cms,
            &[("accept", "application/vnd.kubernetes.protobuf")],
            "",
        )
        .await,
        406,
        "NotAcceptable",
    );
    assert_status(
        &raw(&api, "POST", &format!("{cms}/a"), &[JSON], "{}").await,
        405,
        "MethodNotAllowed",
    );
    assert_status(
        &raw(&api, "GET", "/api/v1/pods?limit=abc", &[], "").await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(
            &api,
            "GET",
            "/api/v1/pods?watch=1&resourceVersion=abc",
            &[],
            "",
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(
            &api,
            "GET",
            "/api/v1/namespaces/default/configmaps/a/log",
            &[],
            "",
        )
        .await,
        404,
        "NotFound",
    );
    assert_status(
        &raw(
            &api,
            "POST",
            "/api/v1/namespaces/nope/configmaps",
            &[JSON],
            json!({"metadata": {"name": "a"}}).to_string(),
        )
        .await,
        404,
        "NotFound",
    );
    assert_status(
        &raw(&api, "DELETE", &format!("{cms}/a"), &[JSON], "{bad").await,
        400,
        "BadRequest",
    );
    assert_status(
        &raw(
            &api,
            "POST",
            &format!("{cms}?dryRun=Some"),
            &[JSON],
            json!({"metadata": {"name": "dry"}}).to_string(),
        )
        .await,
        422,
        "Invalid",
    );
    // dryRun=All answers as a write would and changes nothing.
    let rv = api.resource_version();
    let dry = raw(
        &api,
        "POST",
        &format!("{cms}?dryRun=All"),
        &[JSON],
        json!({"metadata": {"name": "dry"}}).to_string(),
    )
    .await;
    assert_eq!(dry.status, 201);
    assert_eq!(dry.json()["metadata"]["name"], "dry");
    let merge = ("content-type", "application/merge-patch+json");
    let dry = raw(
        &api,
        "PATCH",
        &format!("{cms}/a?dryRun=All"),
        &[merge],
        r#"{"data":{"k":"v"}}"#,
    )
    .await;
    assert_eq!(dry.json()["data"]["k"], "v");
    assert_eq!(
        raw(&api, "DELETE", &format!("{cms}/a?dryRun=All"), &[], "")
            .await
            .status,
        200
    );
    assert_eq!(api.resource_version(), rv, "dry runs write nothing");
    assert_status(
        &raw(&api, "GET", &format!("{cms}/dry"), &[], "").await,
        404,
        "NotFound",
    );
    assert!(
        raw(&api, "GET", &format!("{cms}/a"), &[], "")
            .await
            .json()
            .get("data")
            .is_none()
    );
    // Field validation: Strict refuses unknown fields, the default warns.
    let typo = json!({"metadata": {"name": "typo"}, "dta": {"a": "b"}}).to_string();
    let r = raw(
        &api,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        &[JSON],
        typo.clone(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("strict decoding error: unknown field \"dta\"")
    );
    let r = raw(&api, "POST", cms, &[JSON], typo).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.warnings, ["299 - \"unknown field \\\"dta\\\"\""]);
    // After all that the store is intact.
    let r = raw(&api, "GET", &format!("{cms}/a"), &[], "").await;
    assert_eq!(r.status, 200);
    api.shutdown().await;
}

#[tokio::test]
async fn malformed_input_never_crashes_the_server() {
    let api = server().await;
    let paths = [
        "/",
        "//",
        "/api/v1/namespaces//pods",
        "/api/v1/namespaces/default/pods/%00",
        "/apis/coordination.k8s.io/v1/leases/a/b/c/d",
        "/api/v1/watch",
        "/api/v1/namespaces/default/pods/p/status/x",
        "/openapi/v3/nope",
        "/api/v1/pods?labelSelector=%28%28%28",
    ];
    let bodies: [&[u8]; 6] = [
        b"",
        b"null",
        b"\xff\xfe",
        b"{\"metadata\":5}",
        b"{\"metadata\":{\"name\":7}}",
        b"{\"spec\":{\"containers\":\"x\"},\"metadata\":{\"name\":\"p\"}}",
    ];
    for path in paths {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            for body in bodies {
                for ct in [
                    "application/json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/json-patch+json",
                    "application/apply-patch+yaml",
                ] {
                    let r = raw(&api, method, path, &[("content-type", ct)], body.to_vec()).await;
                    assert!(
                        r.status >= 200 && r.status < 500,
                        "{method} {path} {ct}: {}",
                        r.status
                    );
                }
            }
        }
    }
    for body in bodies {
        for ct in [
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/json-patch+json",
            "application/apply-patch+yaml",
        ] {
            raw(
                &api,
                "PATCH",
                "/api/v1/namespaces/default/configmaps/kube-root-ca.crt?fieldManager=x",
                &[("content-type", ct)],
                body.to_vec(),
            )
            .await;
        }
    }
    assert_eq!(raw(&api, "GET", "/healthz", &[], "").await.status, 200);
    api.shutdown().await;
}

#[tokio::test]
async fn discovery_and_health() {
    let api = server().await;
    for path in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(raw(&api, "GET", path, &[], "").await.body, "ok");
    }
    assert_eq!(
        raw(&api, "GET", "/version", &[], "").await.json()["major"],
        "1"
    );
    assert_eq!(
        raw(&api, "GET", "/api", &[], "").await.json()["versions"][0],
        "v1"
    );
    let groups = raw(&api, "GET", "/apis", &[], "").await.json().to_string();
    for g in [
        "coordination.k8s.io",
        "events.k8s.io",
        "node.k8s.io",
        "storage.k8s.io",
    ] {
        assert!(groups.contains(g), "{g}");
    }
    assert_eq!(
        raw(&api, "GET", "/apis/coordination.k8s.io", &[], "")
            .await
            .json()["preferredVersion"]["version"],
        "v1"
    );
    let leases = raw(&api, "GET", "/apis/coordination.k8s.io/v1", &[], "")
        .await
        .json();
    assert_eq!(leases["resources"][0]["name"], "leases");
    let core = raw(&api, "GET", "/api/v1", &[], "")
        .await
        .json()
        .to_string();
    for r in [
        "\"pods\"",
        "\"pods/status\"",
        "\"pods/eviction\"",
        "\"nodes/status\"",
        "\"serviceaccounts/token\"",
        "\"services\"",
    ] {
        assert!(core.contains(r), "{r}");
    }
    // kube-rs discovery works against it.
    let discovery = kube::Discovery::new(api.client()).run().await.unwrap();
    assert!(discovery.has_group("coordination.k8s.io"));
    let r = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(r.json()["kind"], "Table");
    assert!(r.content_type.contains("as=Table"));
    api.shutdown().await;
}

#[tokio::test]
async fn the_metrics_api_is_served_only_when_asked_for() {
    let plain = server().await;
    let groups = raw(&plain, "GET", "/apis", &[], "")
        .await
        .json()
        .to_string();
    assert!(!groups.contains("metrics.k8s.io"), "{groups}");
    assert_eq!(
        raw(&plain, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", &[], "")
            .await
            .status,
        404
    );

    let api = nodeconform_apiserver::ApiServer::builder()
        .metrics_api(true)
        .start()
        .await
        .expect("server starts");
    let groups = raw(&api, "GET", "/apis", &[], "").await.json().to_string();
    assert!(groups.contains("metrics.k8s.io/v1beta1"), "{groups}");
    let resources = raw(&api, "GET", "/apis/metrics.k8s.io/v1beta1", &[], "")
        .await
        .json();
    assert_eq!(resources["resources"][1]["kind"], "PodMetrics");
    let nodes = raw(&api, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", &[], "")
        .await
        .json();
    assert_eq!(nodes["kind"], "NodeMetricsList");
    assert_eq!(nodes["items"], json!([]));
    let missing = raw(
        &api,
        "GET",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/p",
        &[],
        "",
    )
    .await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json()["message"],
        "pods.metrics.k8s.io \"default/p\" not found"
    );
}

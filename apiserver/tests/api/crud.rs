//! kube-rs `Api` create/get/list/replace/delete for every served resource, plus the
//! subresources (`status`, `eviction`, `token`) and server-set metadata.

use std::fmt::Debug;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Node, ObjectReference, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::ObjectMeta;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::{assert_api_error, from_json, server};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

async fn crud<K>(api: Api<K>, obj: K)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let pp = PostParams::default();
    let created = api.create(&pp, &obj).await.expect("create");
    let name = created.name_any();
    let kind = K::kind(&());
    assert!(created.uid().is_some(), "{kind}: uid");
    assert!(
        created.creation_timestamp().is_some(),
        "{kind}: creationTimestamp"
    );
    let rv: u64 = created.resource_version().unwrap().parse().unwrap();
    assert_api_error(api.create(&pp, &obj).await, 409, "AlreadyExists");

    let got = api.get(&name).await.expect("get");
    assert_eq!(got.resource_version(), created.resource_version());
    let list = api.list(&ListParams::default()).await.expect("list");
    assert!(list.metadata.resource_version.is_some(), "{kind}: list rv");
    assert!(
        list.items.iter().any(|o| o.name_any() == name),
        "{kind}: listed"
    );

    let mut changed = got.clone();
    changed.labels_mut().insert("changed".into(), "yes".into());
    let replaced = api.replace(&name, &pp, &changed).await.expect("replace");
    let rv2: u64 = replaced.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv, "{kind}: resourceVersion increases");
    assert_eq!(
        replaced.labels().get("changed").map(String::as_str),
        Some("yes")
    );
    assert_api_error(api.replace(&name, &pp, &got).await, 409, "Conflict");

    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    assert_api_error(api.get(&name).await, 404, "NotFound");
}

#[tokio::test]
async fn every_resource_round_trips() {
    let api = server().await;
    let c = api.client();
    let ns = "default";
    crud(
        Api::<Namespace>::all(c.clone()),
        Namespace {
            metadata: meta("crud-ns"),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<Pod>::namespaced(c.clone(), ns),
        from_json(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})),
    )
    .await;
    crud(
        Api::<Node>::all(c.clone()),
        Node {
            metadata: meta("n1"),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<Event>::namespaced(c.clone(), ns),
        Event {
            metadata: meta("e1"),
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("p".into()),
                ..Default::default()
            },
            reason: Some("Started".into()),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<ConfigMap>::namespaced(c.clone(), ns),
        ConfigMap {
            metadata: meta("cm"),
            data: Some([("a".to_string(), "b".to_string())].into()),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<Secret>::namespaced(c.clone(), ns),
        Secret {
            metadata: meta("s"),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<ServiceAccount>::namespaced(c.clone(), ns),
        ServiceAccount {
            metadata: meta("sa"),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<Service>::namespaced(c.clone(), ns),
        Service {
            metadata: meta("svc"),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<EventV1>::namespaced(c.clone(), ns),
        // What events.k8s.io/v1 requires of a new event (`ValidateEventCreate`).
        EventV1 {
            metadata: meta("e2"),
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            reporting_controller: Some("example.com/test".into()),
            reporting_instance: Some("test-1".into()),
            action: Some("Testing".into()),
            reason: Some("Tested".into()),
            type_: Some("Normal".into()),
            ..Default::default()
        },
    )
    .await;
    crud(
        Api::<Lease>::namespaced(c.clone(), "kube-node-lease"),
        Lease {
            metadata: meta("n1"),
            spec: Some(LeaseSpec {
                holder_identity: Some("n1".into()),
                lease_duration_seconds: Some(40),
                ..Default::default()
            }),
        },
    )
    .await;
    crud(
        Api::<RuntimeClass>::all(c.clone()),
        from_json(json!({"metadata": {"name": "rc"}, "handler": "runc"})),
    )
    .await;
    crud(
        Api::<CSIDriver>::all(c.clone()),
        from_json(json!({"metadata": {"name": "d"}, "spec": {}})),
    )
    .await;
    crud(
        Api::<CSINode>::all(c.clone()),
        from_json(json!({"metadata": {"name": "n1"}, "spec": {"drivers": []}})),
    )
    .await;
    api.shutdown().await;
}

#[tokio::test]
async fn server_sets_metadata_and_defaults() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod: Pod = from_json(json!({"metadata": {"generateName": "web-"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}));
    let a = pods.create(&PostParams::default(), &pod).await.unwrap();
    let b = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert!(a.name_any().starts_with("web-") && a.name_any().len() == 9);
    assert_ne!(a.name_any(), b.name_any());
    assert_ne!(a.uid(), b.uid());
    assert!(
        b.resource_version().unwrap().parse::<u64>().unwrap()
            > a.resource_version().unwrap().parse::<u64>().unwrap()
    );
    assert_eq!(
        a.metadata.generation,
        Some(1),
        "from 1.33 (kube-apiserver 1.28 sets none on pods)"
    );
    let status = a.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let spec = a.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    // Initial namespaces with their default content.
    let nss: Vec<String> = Api::<Namespace>::all(api.client())
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(
        nss,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    Api::<ServiceAccount>::namespaced(api.client(), "kube-system")
        .get("default")
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(api.client(), "default")
        .get("kube-root-ca.crt")
        .await
        .unwrap();
    api.shutdown().await;
}

#[tokio::test]
async fn status_is_separate_from_spec() {
    let api = server().await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let pod: Pod = from_json(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"}}),
    );
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending"),
        "create resets pod status"
    );
    let mut running = created.clone();
    running.status.as_mut().unwrap().phase = Some("Running".into());
    running
        .labels_mut()
        .insert("from-status".into(), "yes".into());
    let after = pods
        .replace_status("p", &PostParams::default(), &running)
        .await
        .unwrap();
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
    assert_eq!(
        after.labels().get("from-status").map(String::as_str),
        Some("yes"),
        "a status write keeps only the stored spec: labels it carries are stored, as \
         kube-apiserver does (fidelity/scenarios/status-subresource-split.yaml)"
    );
    let mut main = after.clone();
    main.status.as_mut().unwrap().phase = Some("Failed".into());
    main.labels_mut().insert("kept".into(), "yes".into());
    let after = pods
        .replace("p", &PostParams::default(), &main)
        .await
        .unwrap();
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Running"),
        "main writes ignore status"
    );
    assert_eq!(after.labels().get("kept").map(String::as_str), Some("yes"));
    let mut image = after.clone();
    image.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
    let after = pods
        .replace("p", &PostParams::default(), &image)
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, Some(2), "a spec change bumps it");
    let same = pods
        .replace("p", &PostParams::default(), &after)
        .await
        .unwrap();
    assert_eq!(
        same.resource_version(),
        after.resource_version(),
        "a no-op update writes nothing"
    );
    let status = pods.get_status("p").await.unwrap();
    assert_eq!(status.status.unwrap().phase.as_deref(), Some("Running"));
    api.shutdown().await;
}

#[tokio::test]
async fn eviction_and_token_subresources() {
    let api = server().await;
    let c = api.client();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = from_json(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.evict("p", &Default::default()).await.unwrap();
    assert_api_error(pods.get("p").await, 404, "NotFound");

    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), "default");
    let req: TokenRequest =
        from_json(json!({"spec": {"audiences": ["api"], "expirationSeconds": 3600}}));
    let token = sas
        .create_token_request("default", &PostParams::default(), &req)
        .await
        .unwrap();
    let status = token.status.unwrap();
    assert_eq!(status.token.unwrap_or_default().split('.').count(), 3);
    assert_api_error(
        sas.create_token_request("missing", &PostParams::default(), &req)
            .await,
        404,
        "NotFound",
    );

    let leases: Api<Lease> = Api::namespaced(c, "kube-node-lease");
    let renew: k8s_openapi::jiff::Timestamp = "2026-01-02T15:04:05.123456Z".parse().unwrap();
    let lease = Lease {
        metadata: meta("n1"),
        spec: Some(LeaseSpec {
            renew_time: Some(MicroTime(renew)),
            ..Default::default()
        }),
    };
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(
        created.spec.unwrap().renew_time.unwrap().0,
        renew,
        "MicroTime keeps microseconds"
    );
    api.shutdown().await;
}

#[tokio::test]
async fn kube_event_recorder_creates_then_patches_a_series() {
    use kube::runtime::events::{Event as Ev, EventType, Recorder, Reporter};
    let api = server().await;
    let reporter = Reporter {
        controller: "nodeconform-agent".into(),
        instance: Some("n1".into()),
    };
    let recorder = Recorder::new(api.client(), reporter);
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("p".into()),
        namespace: Some("default".into()),
        uid: Some("u1".into()),
        ..Default::default()
    };
    let ev = Ev {
        type_: EventType::Normal,
        reason: "Pulled".into(),
        note: Some("pulled".into()),
        action: "Pull".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events: Api<EventV1> = Api::namespaced(api.client(), "default");
    let list = events.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.items.len(),
        1,
        "the second publish patches the first event"
    );
    assert_eq!(list.items[0].series.as_ref().map(|s| s.count), Some(2));
    // One store, two shapes: the core/v1 view (kubectl get events, describe) sees it too.
    let core: Api<Event> = Api::namespaced(api.client(), "default");
    let core = core
        .list(&ListParams::default().fields("involvedObject.name=p"))
        .await
        .unwrap();
    assert_eq!(core.items.len(), 1);
    assert_eq!(core.items[0].message.as_deref(), Some("pulled"));
    assert_eq!(
        core.items[0].reporting_component.as_deref(),
        Some("nodeconform-agent")
    );
    let v1 = events
        .list(
            &ListParams::default().fields("regarding.name=p,reportingController=nodeconform-agent"),
        )
        .await
        .unwrap();
    assert_eq!(v1.items.len(), 1);
    assert_eq!(
        v1.items[0]
            .regarding
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("p")
    );
    api.shutdown().await;
}

//! Defaulting as kube-apiserver applies it to every object it decodes (create, update and
//! the result of a patch): the generated `SetObjectDefaults_*` of `pkg/apis/core/v1`
//! (`SetDefaults_Pod`, `SetDefaults_PodSpec`, `SetDefaults_Container`, the volume sources,
//! probes and HTTP actions, ports, field selectors, `SetDefaults_NodeStatus`, …), a Secret's
//! `stringData` folded into `data` as the v1 conversion does, and on
//! pod creation the admission plugins every cluster runs that fill fields in
//! (`ServiceAccount`'s name, `Priority`, `DefaultTolerationSeconds`).
//!
//! Not defaulted (listed in the crate README): quantities are not rounded to milli scale
//! (`SetDefaults_ResourceList`), the `ServiceAccount` plugin's `kube-api-access-*` token
//! volume is not added, and the volume sources no node agent here can mount (iSCSI, RBD,
//! Azure disk, ScaleIO, ephemeral claims) keep what the client sent.

use serde_json::{Map, Value, json};

use crate::resources::{self, Resource};

/// `ConfigMapVolumeSourceDefaultMode` and its twins for secrets, downward API and projected
/// volumes: 0644.
const VOLUME_DEFAULT_MODE: i64 = 0o644;
const PROBES: [&str; 3] = ["livenessProbe", "readinessProbe", "startupProbe"];
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Inserts `value` at `key` unless the key holds something already.
fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(key.to_string(), value);
        }
    }
}

fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

fn objects<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Applies `resource`'s defaults to `obj`, as decoding does upstream.
pub fn apply(resource: &Resource, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if std::ptr::eq(resource, &resources::PODS) {
        // The spec is a struct, not a pointer: its defaults apply even when none was sent.
        map.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = object(map, "spec") {
            pod_spec(spec);
        }
        if let Some(status) = object(map, "status") {
            // (1.28 drops `hostIPs`, its feature gate being off: not defaulted here.)
            ips_from_ip(status, "podIP", "podIPs");
        }
    } else if std::ptr::eq(resource, &resources::NODES) {
        if let Some(spec) = object(map, "spec") {
            // `SetDefaults_NodeSpec`: podCIDRs from podCIDR.
            if let Some(cidr) = spec
                .get("podCIDR")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
            {
                let cidr = cidr.to_owned();
                spec.entry("podCIDRs").or_insert_with(|| json!([cidr]));
            }
        }
        if let Some(status) = object(map, "status") {
            node_status(status);
        }
    } else if std::ptr::eq(resource, &resources::SECRETS) {
        default(map, "type", "Opaque".into());
        string_data(map);
    } else if std::ptr::eq(resource, &resources::SERVICES) {
        crate::service::defaults(map);
    } else if std::ptr::eq(resource, &resources::NAMESPACES) {
        // `SetDefaults_Namespace`: the name as a label, whatever the client set there.
        let name = map
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(meta) = object(map, "metadata") {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(labels) = labels.as_object_mut() {
                labels.insert("kubernetes.io/metadata.name".into(), name.into());
            }
        }
    }
}

/// The pod status conversion: a single IP (`podIP`, `hostIP`) becomes the first of its
/// plural list when the client sent no list.
fn ips_from_ip(status: &mut Map<String, Value>, single: &str, plural: &str) {
    let Some(ip) = status
        .get(single)
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
    else {
        return;
    };
    let ip = ip.to_owned();
    let empty = status
        .get(plural)
        .is_none_or(|l| l.is_null() || l.as_array().is_some_and(Vec::is_empty));
    if empty {
        status.insert(plural.to_owned(), json!([{"ip": ip}]));
    }
}

/// The `TaintNodesByCondition` admission plugin: a new Node is tainted
/// `node.kubernetes.io/not-ready:NoSchedule` until the node lifecycle controller sees it
/// Ready.
pub fn admit_node(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    let Some(spec) = map
        .entry("spec")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    else {
        return;
    };
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if let Some(taints) = taints.as_array_mut() {
        let tainted = taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/not-ready" && t["effect"] == "NoSchedule");
        if !tainted {
            taints.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
        }
    }
}

/// The v1 → internal conversion of a Secret: `stringData` is write-only, its values are
/// base64-encoded into `data` (over a key both have) and it is never stored.
fn string_data(secret: &mut Map<String, Value>) {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = secret.remove("stringData") else {
        return;
    };
    let data = secret.entry("data").or_insert_with(|| json!({}));
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, encoded.into());
        }
    }
}

/// `SetDefaults_Pod` and `SetDefaults_PodSpec` with everything they reach.
fn pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "dnsPolicy", "ClusterFirst".into());
    default(spec, "restartPolicy", "Always".into());
    default(spec, "securityContext", json!({}));
    default(spec, "terminationGracePeriodSeconds", 30.into());
    default(spec, "schedulerName", "default-scheduler".into());
    default(spec, "enableServiceLinks", true.into());
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in CONTAINER_LISTS {
        for c in objects(spec, list) {
            container(c, list != "ephemeralContainers", host_network);
        }
    }
    for v in objects(spec, "volumes") {
        volume(v);
    }
    pod_level_requests(spec);
}

/// `defaultPodRequests` (`PodLevelResources`, beta and on since 1.34): a pod with pod-level
/// limits gets pod-level requests for cpu and memory from its containers' requests, and
/// for any other limited pod-level resource the limit. (`defaultHugePagePodLimits` is not
/// done: no case asks for huge pages.)
fn pod_level_requests(spec: &mut Map<String, Value>) {
    let limits = match spec.get("resources").and_then(|r| r.get("limits")) {
        Some(Value::Object(l)) if !l.is_empty() => l.clone(),
        _ => return,
    };
    // The spec is valid by now except for what validation will report; a spec that does
    // not read as one gets no pod-level defaults.
    let Ok(typed) =
        serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>(Value::Object(spec.clone()))
    else {
        return;
    };
    let containers =
        nodeconform_resource::pod::container_requests(&k8s_openapi::api::core::v1::Pod {
            spec: Some(typed),
            ..Default::default()
        });
    let Some(resources) = object(spec, "resources") else {
        return;
    };
    let mut requests = resources
        .get("requests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for name in ["cpu", "memory"] {
        if let Some(q) = containers.get(name)
            && !requests.contains_key(name)
        {
            requests.insert(name.into(), q.0.clone().into());
        }
    }
    for (name, q) in limits {
        if nodeconform_resource::pod::is_pod_level_resource(&name) {
            requests.entry(name).or_insert(q);
        }
    }
    if !requests.is_empty() {
        resources.insert("requests".into(), Value::Object(requests));
    }
}

/// `SetDefaults_Container` plus what the generated defaulter reaches inside a container.
/// `limits_are_requests` is `SetDefaults_Pod`'s rule, which skips ephemeral containers.
fn container(c: &mut Map<String, Value>, limits_are_requests: bool, host_network: bool) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    default(c, "imagePullPolicy", image_pull_policy(image).into());
    default(c, "terminationMessagePath", "/dev/termination-log".into());
    default(c, "terminationMessagePolicy", "File".into());
    default(c, "resources", json!({}));
    if limits_are_requests
        && let Some(resources) = object(c, "resources")
        && let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned()
    {
        default(resources, "requests", json!({}));
        if let Some(requests) = object(resources, "requests") {
            for (name, value) in limits {
                requests.entry(name).or_insert(value);
            }
        }
    }
    for port in objects(c, "ports") {
        default(port, "protocol", "TCP".into());
        // `defaultHostNetworkPorts`: with the host's network a port is a host port.
        let zero = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0;
        if host_network
            && zero
            && let Some(container_port) = port.get("containerPort").cloned()
        {
            port.insert("hostPort".into(), container_port);
        }
    }
    for env in objects(c, "env") {
        if let Some(value_from) = object(env, "valueFrom") {
            references(value_from);
        }
    }
    for name in PROBES {
        if let Some(probe) = object(c, name) {
            default(probe, "timeoutSeconds", 1.into());
            default(probe, "periodSeconds", 10.into());
            default(probe, "successThreshold", 1.into());
            default(probe, "failureThreshold", 3.into());
            handler(probe);
        }
    }
    if let Some(lifecycle) = object(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(hook) = object(lifecycle, hook) {
                handler(hook);
            }
        }
    }
}

/// `SetDefaults_HTTPGetAction`, and a gRPC probe's `service` (`+default=""`).
fn handler(handler: &mut Map<String, Value>) {
    if let Some(http) = object(handler, "httpGet") {
        default(http, "path", "/".into());
        default(http, "scheme", "HTTP".into());
    }
    if let Some(grpc) = object(handler, "grpc") {
        default(grpc, "service", "".into());
    }
}

/// `SetDefaults_Container`'s pull policy: `Always` for the tag `latest` (also when no tag
/// and no digest is given, as `parsers.ParseImageName` defaults the tag), else
/// `IfNotPresent`.
pub fn image_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

/// `SetDefaults_Volume` and the volume sources' defaults.
fn volume(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = object(v, source) {
            default(source, "defaultMode", VOLUME_DEFAULT_MODE.into());
        }
    }
    if let Some(host_path) = object(v, "hostPath") {
        default(host_path, "type", "".into());
    }
    if let Some(downward) = object(v, "downwardAPI") {
        downward_items(downward);
    }
    if let Some(projected) = object(v, "projected") {
        for source in objects(projected, "sources") {
            if let Some(downward) = object(source, "downwardAPI") {
                downward_items(downward);
            }
            if let Some(token) = object(source, "serviceAccountToken") {
                default(token, "expirationSeconds", 3600.into());
            }
        }
    }
}

/// Downward API items: their field and resource references.
fn downward_items(source: &mut Map<String, Value>) {
    for item in objects(source, "items") {
        references(item);
    }
}

/// `SetDefaults_ObjectFieldSelector` on a field reference, and a resource reference's
/// `divisor`, which kube-apiserver writes as `"0"` when unset (its zero quantity is not
/// omitted from JSON).
fn references(holder: &mut Map<String, Value>) {
    if let Some(field_ref) = object(holder, "fieldRef") {
        default(field_ref, "apiVersion", "v1".into());
    }
    if let Some(resource_ref) = object(holder, "resourceFieldRef") {
        default(resource_ref, "divisor", "0".into());
    }
}

/// `SetDefaults_NodeStatus`: allocatable is the capacity unless given.
fn node_status(status: &mut Map<String, Value>) {
    if let Some(capacity) = status.get("capacity").cloned() {
        default(status, "allocatable", capacity);
    }
}

/// The admission plugins of a default kube-apiserver that fill in a new pod's spec:
/// `ServiceAccount` (the name; the deprecated `serviceAccount` twin is what the v1
/// conversion writes), `Priority` (no priority classes: 0) and `DefaultTolerationSeconds`.
/// `ServiceAccount` leaves a mirror pod's spec alone (a kubelet deletes a mirror pod
/// whose spec no longer matches its static pod).
pub fn admit_pod(pod: &mut Value) {
    let mirror = pod
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if !mirror {
        default(spec, "serviceAccountName", "default".into());
        let account = spec["serviceAccountName"].clone();
        spec.insert("serviceAccount".into(), account);
        if spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            != Some(false)
        {
            mount_service_account_token(spec);
        }
    }
    default(spec, "priority", 0.into());
    default(spec, "preemptionPolicy", "PreemptLowerPriority".into());
    default_toleration_seconds(spec);
}

/// What the admission plugins do to a pod being updated: `DefaultTolerationSeconds` adds
/// its tolerations back if an update took them away.
pub fn admit_pod_update(pod: &mut Value) {
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        default_toleration_seconds(spec);
    }
}

/// Where the `ServiceAccount` admission plugin mounts the API credentials.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The `ServiceAccount` admission plugin's `kube-api-access-<random>` volume: a projected
/// service-account token (3607 s), the cluster CA from `kube-root-ca.crt` and the pod's
/// namespace, mounted read-only at [`TOKEN_MOUNT_PATH`] in every container that mounts
/// nothing there already.
fn mount_service_account_token(spec: &mut Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| n.starts_with("kube-api-access-"))
        .map(str::to_owned);
    let name = existing
        .clone()
        .unwrap_or_else(|| format!("kube-api-access-{}", crate::meta::name_suffix()));
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        for container in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if !mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
                mounts.push(mount.clone());
                mounted = true;
            }
        }
    }
    if mounted && existing.is_none() {
        let volume = json!({"name": name, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}});
        if let Some(volumes) = spec
            .entry("volumes")
            .or_insert_with(|| json!([]))
            .as_array_mut()
        {
            volumes.push(volume);
        }
    }
}

/// `DefaultTolerationSeconds`: tolerate the not-ready and unreachable taints for 300 s
/// unless a toleration already covers them.
fn default_toleration_seconds(spec: &mut Map<String, Value>) {
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    let Some(tolerations) = tolerations else {
        return;
    };
    for taint in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !tolerated {
            tolerations.push(json!({
                "key": taint,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        for (image, policy) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry:5000/busybox", "Always"),
            ("registry:5000/busybox:1", "IfNotPresent"),
            ("busybox@sha256:abc", "IfNotPresent"),
            ("busybox:latest@sha256:abc", "Always"),
        ] {
            assert_eq!(image_pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn a_pod_gets_what_kube_apiserver_gives_it() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "hostNetwork": true,
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}],
            "containers": [{
                "name": "c", "image": "busybox:1.36",
                "ports": [{"containerPort": 80}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
                "resources": {"limits": {"cpu": "1"}},
                "livenessProbe": {"httpGet": {"port": 80}},
                "readinessProbe": {"grpc": {"port": 9}, "periodSeconds": 2},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
            }],
            "ephemeralContainers": [{"name": "e", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
            "volumes": [
                {"name": "empty"},
                {"name": "cm", "configMap": {"name": "x", "defaultMode": 256}},
                {"name": "s", "secret": {"secretName": "x"}},
                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                {"name": "h", "hostPath": {"path": "/tmp"}},
            ],
        }});
        apply(&resources::PODS, &mut pod);
        admit_pod(&mut pod);
        let spec = &pod["spec"];
        for (field, value) in [
            ("dnsPolicy", json!("ClusterFirst")),
            ("restartPolicy", json!("Always")),
            ("securityContext", json!({})),
            ("terminationGracePeriodSeconds", json!(30)),
            ("schedulerName", json!("default-scheduler")),
            ("enableServiceLinks", json!(true)),
            ("serviceAccountName", json!("default")),
            ("serviceAccount", json!("default")),
            ("priority", json!(0)),
            ("preemptionPolicy", json!("PreemptLowerPriority")),
        ] {
            assert_eq!(spec[field], value, "{field}");
        }
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(
            c["ports"],
            json!([{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}])
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["env"][1]["valueFrom"]["resourceFieldRef"]["divisor"], "0");
        assert_eq!(c["resources"]["requests"], json!({"cpu": "1"}));
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["readinessProbe"]["grpc"]["service"], "");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 2);
        assert_eq!(
            c["lifecycle"]["preStop"]["httpGet"],
            json!({"port": 80, "path": "/stop", "scheme": "HTTP"})
        );
        let e = &spec["ephemeralContainers"][0];
        assert_eq!(e["imagePullPolicy"], "Always");
        assert!(
            e["resources"].get("requests").is_none(),
            "SetDefaults_Pod skips ephemeral containers"
        );
        let v = &spec["volumes"];
        assert_eq!(v[0], json!({"name": "empty", "emptyDir": {}}));
        assert_eq!(v[1]["configMap"]["defaultMode"], 256);
        assert_eq!(v[2]["secret"]["defaultMode"], 420);
        assert_eq!(v[3]["downwardAPI"]["defaultMode"], 420);
        assert_eq!(
            v[3]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
        assert_eq!(v[4]["projected"]["defaultMode"], 420);
        assert_eq!(
            v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
        assert_eq!(v[5]["hostPath"]["type"], "");
    }

    #[test]
    fn a_wildcard_toleration_covers_both_taints() {
        let mut pod = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        admit_pod(&mut pod);
        assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
    }

    #[test]
    fn secret_string_data_lands_in_data() {
        let mut secret =
            json!({"data": {"a": "MQ==", "b": "Mg=="}, "stringData": {"b": "x", "c": "y"}});
        apply(&resources::SECRETS, &mut secret);
        assert_eq!(
            secret,
            json!({"type": "Opaque", "data": {"a": "MQ==", "b": "eA==", "c": "eQ=="}})
        );
    }

    #[test]
    fn node_allocatable_defaults_to_capacity() {
        let mut node = json!({"status": {"capacity": {"cpu": "2"}}});
        apply(&resources::NODES, &mut node);
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
    }

    #[test]
    fn pod_level_limits_default_pod_level_requests() {
        let mut pod = json!({"spec": {
            "resources": {"limits": {"cpu": "500m", "memory": "200Mi"}},
            "containers": [
                {"name": "a", "image": "i", "resources": {"limits": {"cpu": "100m"}}},
                {"name": "b", "image": "i", "resources": {"requests": {"cpu": "50m"}}},
            ],
        }});
        apply(&resources::PODS, &mut pod);
        // cpu: the containers' requests (a's from its limit); memory: the pod-level limit.
        assert_eq!(
            pod["spec"]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "200Mi"},
                   "requests": {"cpu": "150m", "memory": "200Mi"}})
        );
        let mut requests_only = json!({"spec": {
            "resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "a", "image": "i"}],
        }});
        apply(&resources::PODS, &mut requests_only);
        assert_eq!(
            requests_only["spec"]["resources"],
            json!({"requests": {"cpu": "1"}})
        );
    }
}

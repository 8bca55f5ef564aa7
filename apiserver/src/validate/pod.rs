//! `ValidatePodCreate` and `ValidatePodUpdate`, for what clients commonly get wrong:
//! containers ([`super::container`]), the pod's policies, host name and volumes, and which
//! spec fields an update may change.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::field::{Error as FieldError, Value as Bad};
use crate::version::Version;

use super::container::{container, restart_policy};
use super::json::{list, one_of, str_of};
use super::object_meta::{dns_label_errors, dns_subdomain_errors};

const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];

/// The spec fields an update may change, as 1.28's message lists them.
pub(super) const UPDATABLE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The checks of a new pod.
pub(super) fn create(pod: &Value, version: Version) -> Vec<FieldError> {
    let mut out = Vec::new();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let volumes = volumes(spec, &mut out);
    let mut names = BTreeSet::new();
    for (key, path) in [
        ("containers", "spec.containers"),
        ("initContainers", "spec.initContainers"),
    ] {
        let containers = list(spec, key);
        if key == "containers" && containers.is_empty() {
            out.push(FieldError::required(path, ""));
        }
        for (i, c) in containers.iter().enumerate() {
            let path = format!("{path}[{i}]");
            container(c, &path, &volumes, &mut out);
            restart_policy(c, &path, key == "initContainers", version, &mut out);
            let name = str_of(c, "name");
            if !name.is_empty() && !names.insert(name.to_owned()) {
                out.push(FieldError::duplicate(
                    format!("{path}.name"),
                    Bad::str(name),
                ));
            }
        }
    }
    let field = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or("");
    one_of(
        &mut out,
        "spec.restartPolicy",
        field("restartPolicy"),
        &RESTART_POLICIES,
    );
    one_of(
        &mut out,
        "spec.dnsPolicy",
        field("dnsPolicy"),
        &DNS_POLICIES,
    );
    hostname_override(spec, &mut out);
    if let Some(d) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
        && !(1..=i64::from(i32::MAX)).contains(&d)
    {
        out.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            Bad::plain(d),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    out
}

/// `validatePodHostName`: `hostnameOverride` is a DNS subdomain of at most 64 bytes, and
/// neither an FQDN host name nor the host's network goes with it.
fn hostname_override(spec: &Value, out: &mut Vec<FieldError>) {
    let Some(over) = spec.get("hostnameOverride").and_then(Value::as_str) else {
        return;
    };
    const PATH: &str = "spec.hostnameOverride";
    if spec.get("setHostnameAsFQDN").and_then(Value::as_bool) == Some(true) {
        out.push(FieldError::forbidden(
            PATH,
            "may not be specified when setHostnameAsFQDN is true",
        ));
    }
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        out.push(FieldError::forbidden(
            PATH,
            "may not be specified when hostNetwork is true",
        ));
    }
    if over.len() > 64 {
        out.push(FieldError::too_long(PATH, 64));
    }
    for message in dns_subdomain_errors(over) {
        out.push(FieldError::invalid(PATH, Bad::str(over), message));
    }
}

/// The volumes' names (valid, unique), returned for the mounts to refer to.
fn volumes(spec: &Value, out: &mut Vec<FieldError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in list(spec, "volumes").iter().enumerate() {
        let path = format!("spec.volumes[{i}].name");
        let name = str_of(v, "name");
        if name.is_empty() {
            out.push(FieldError::required(path, ""));
            continue;
        }
        for message in dns_label_errors(name) {
            out.push(FieldError::invalid(path.clone(), Bad::str(name), message));
        }
        if !names.insert(name.to_owned()) {
            out.push(FieldError::duplicate(path, Bad::str(name)));
        }
    }
    names
}

/// The checks of an update: containers neither added nor removed, the active deadline
/// only set or lowered, every other spec field as it was but images and added tolerations.
pub(super) fn update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (empty_old, empty_new) = (Value::Null, Value::Null);
    let old_spec = old.get("spec").unwrap_or(&empty_old);
    let new_spec = new.get("spec").unwrap_or(&empty_new);
    let count = |spec: &Value, key: &str| list(spec, key).len();
    for (key, path) in [
        ("containers", "spec.containers"),
        ("initContainers", "spec.initContainers"),
    ] {
        if count(old_spec, key) != count(new_spec, key) {
            return vec![FieldError::forbidden(
                path,
                "pod updates may not add or remove containers",
            )];
        }
    }
    let mut out = Vec::new();
    if let Some(e) = active_deadline(
        old_spec.get("activeDeadlineSeconds"),
        new_spec.get("activeDeadlineSeconds"),
    ) {
        out.push(e);
    }
    out.extend(only_added_tolerations(old_spec, new_spec));
    out.extend(only_deleted_scheduling_gates(old_spec, new_spec));
    let (before, mut after) = (mutable_view(old_spec), mutable_view(new_spec));
    // A negative grace period may become 1, nothing else.
    let grace = |s: &Value| {
        s.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(old_spec).is_some_and(|g| g < 0) && grace(new_spec) == Some(1) {
        after["terminationGracePeriodSeconds"] = old_spec["terminationGracePeriodSeconds"].clone();
    }
    if before != after {
        out.push(FieldError::forbidden(
            "spec",
            format!("{UPDATABLE}\n{}", difference(&before, &after, "spec")),
        ));
    }
    out
}

/// `validateOnlyDeletedSchedulingGates`: no gate the pod did not have.
fn only_deleted_scheduling_gates(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    fn gates(spec: &Value) -> Vec<&str> {
        list(spec, "schedulingGates")
            .iter()
            .map(|g| str_of(g, "name"))
            .collect()
    }
    let old = gates(old_spec);
    gates(new_spec)
        .iter()
        .enumerate()
        .filter(|(_, g)| !old.contains(g))
        .map(|(i, g)| {
            FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{g}'"),
            )
        })
        .collect()
}

/// `validateOnlyAddedTolerations`: every toleration the pod had is still there, but for its
/// `tolerationSeconds`.
fn only_added_tolerations(old_spec: &Value, new_spec: &Value) -> Option<FieldError> {
    let tolerations = |s: &Value| -> Vec<Value> {
        list(s, "tolerations")
            .iter()
            .map(|t| {
                let mut t = t.clone();
                if let Some(map) = t.as_object_mut() {
                    map.remove("tolerationSeconds");
                    // Go's zero values: an absent string equals an empty one.
                    map.retain(|_, v| v.as_str() != Some(""));
                }
                t
            })
            .collect()
    };
    let new = tolerations(new_spec);
    tolerations(old_spec)
        .iter()
        .any(|old| !new.contains(old))
        .then(|| {
            FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            )
        })
}

/// `ValidatePodStatusUpdate`: a container that terminated for good (its pod restarts it
/// never, or only on failure and it succeeded) may not be reported running again; the
/// pod IPs are IP addresses.
pub(super) fn status_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let policy = old
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    let statuses = |pod: &Value, key: &str| -> Vec<Value> {
        pod.pointer(&format!("/status/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for (key, policy) in [
        ("containerStatuses", policy),
        ("initContainerStatuses", policy),
        ("ephemeralContainerStatuses", "Never"),
    ] {
        if policy == "Always" {
            continue;
        }
        let after = statuses(new, key);
        for (i, before) in statuses(old, key).iter().enumerate() {
            let Some(terminated) = before.pointer("/state/terminated").filter(|t| !t.is_null())
            else {
                continue;
            };
            let failed = terminated
                .get("exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                != 0;
            if failed && policy == "OnFailure" {
                continue;
            }
            // `ValidateInitContainerStateTransition`: a sidecar restarts whatever the pod's
            // policy.
            if key == "initContainerStatuses" && is_sidecar(old, before) {
                continue;
            }
            let revived = after.iter().any(|now| {
                now.get("name") == before.get("name")
                    && now.pointer("/state/terminated").is_none_or(Value::is_null)
            });
            if revived {
                out.push(FieldError::forbidden(
                    format!("status.{key}[{i}].state"),
                    "may not be transitioned to non-terminated state",
                ));
            }
        }
    }
    for (i, ip) in new
        .pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let ip = ip.get("ip").and_then(Value::as_str).unwrap_or("");
        if ip.parse::<std::net::IpAddr>().is_err() {
            out.push(FieldError::invalid(
                format!("status.podIPs[{i}]"),
                Bad::str(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    out
}

/// Whether the init container a `status` is of restarts on its own (`restartPolicy: Always`).
fn is_sidecar(pod: &Value, status: &Value) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    list(spec, "initContainers")
        .iter()
        .find(|c| c.get("name") == status.get("name"))
        .is_some_and(|c| str_of(c, "restartPolicy") == "Always")
}

/// The spec with the fields an update may change taken out.
fn mutable_view(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        for k in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
            map.remove(k);
        }
        for key in ["containers", "initContainers"] {
            for c in map
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(c) = c.as_object_mut() {
                    c.remove("image");
                }
            }
        }
    }
    spec
}

/// The fields that differ, one line each (upstream prints a Go diff of its internal type
/// here; its layout is not part of the API).
fn difference(before: &Value, after: &Value, path: &str) -> String {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .filter(|k| a.get(*k) != b.get(*k))
                .map(|k| {
                    let null = Value::Null;
                    difference(
                        a.get(k).unwrap_or(&null),
                        b.get(k).unwrap_or(&null),
                        &format!("{path}.{k}"),
                    )
                })
                .collect::<Vec<_>>()
                .join("")
        }
        (a, b) => format!("  {path}: {a} -> {b}\n"),
    }
}

/// `ValidatePodUpdate`'s rule for `spec.activeDeadlineSeconds`: it may be set or lowered
/// on an existing pod, not raised or removed.
fn active_deadline(old: Option<&Value>, new: Option<&Value>) -> Option<FieldError> {
    const FIELD: &str = "spec.activeDeadlineSeconds";
    let old = old.filter(|v| !v.is_null());
    match new.filter(|v| !v.is_null()) {
        Some(new) => {
            let Some(n) = new
                .as_i64()
                .filter(|n| (0..=i64::from(i32::MAX)).contains(n))
            else {
                return Some(FieldError::invalid(
                    FIELD,
                    Bad::raw(new.to_string()),
                    "must be between 0 and 2147483647, inclusive",
                ));
            };
            match old.and_then(Value::as_i64) {
                Some(o) if o < n => Some(FieldError::invalid(
                    FIELD,
                    Bad::plain(n),
                    "must be less than or equal to previous value",
                )),
                _ => None,
            }
        }
        None if old.is_some() => Some(FieldError::invalid(
            FIELD,
            Bad::str("null"),
            "must not update from a positive integer to nil value",
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn messages(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn invalid_pods_are_named_as_upstream() {
        let defaults = |c: Value| {
            let mut c = c;
            c["terminationMessagePolicy"] = "File".into();
            c
        };
        let ok = json!({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst"});
        let with = |containers: Vec<Value>| {
            let mut spec = ok.clone();
            spec["containers"] = containers.into_iter().map(defaults).collect();
            pod(spec)
        };
        assert_eq!(
            messages(create_now(&with(vec![]))),
            ["spec.containers: Required value"]
        );
        assert_eq!(
            messages(create_now(&with(vec![json!({"name": "c"})]))),
            ["spec.containers[0].image: Required value"]
        );
        assert_eq!(
            messages(create_now(&with(vec![
                json!({"name": "x", "image": "i"}),
                json!({"name": "x", "image": "i"})
            ]))),
            ["spec.containers[1].name: Duplicate value: \"x\""]
        );
        let mut bad = with(vec![json!({"name": "x", "image": "i"})]);
        bad["spec"]["restartPolicy"] = "Sometimes".into();
        assert_eq!(
            messages(create_now(&bad)),
            [
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
            ]
        );
    }

    /// The checks of kube-apiserver 1.36.
    fn create_now(pod: &Value) -> Vec<FieldError> {
        create(pod, Version::NEWEST)
    }

    #[test]
    fn before_1_35_only_init_containers_restart_on_their_own_and_only_sidecars_have_probes() {
        let spec = json!({
            "restartPolicy": "Never",
            "dnsPolicy": "ClusterFirst",
            "initContainers": [
                {"name": "sidecar", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "Always", "startupProbe": {"exec": {"command": ["true"]}}},
                {"name": "init", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "Never", "readinessProbe": {"exec": {"command": ["true"]}}},
            ],
            "containers": [
                {"name": "app", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "Always"},
            ],
        });
        assert_eq!(
            messages(create(&pod(spec), Version::V1_28)),
            [
                "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
                "spec.initContainers[1].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "spec.initContainers[1].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            ]
        );
    }

    #[test]
    fn from_1_35_every_container_may_have_restart_rules() {
        let rule = |action: &str, codes: Value| json!({"action": action, "exitCodes": codes});
        let spec = json!({
            "restartPolicy": "Never",
            "dnsPolicy": "ClusterFirst",
            "initContainers": [
                {"name": "init", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "OnFailure"},
                {"name": "ruled", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicyRules": [rule("Restart", json!({"operator": "In", "values": [1]}))]},
            ],
            "containers": [
                {"name": "app", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "Never",
                 "restartPolicyRules": [
                    rule("Restart", json!({"operator": "In", "values": [42]})),
                    rule("RestartAllContainers", json!({"operator": "NotIn", "values": [0]})),
                    rule("Retry", json!({"operator": "Some", "values": []})),
                    json!({"action": "Restart"}),
                 ]},
                {"name": "app2", "image": "i", "terminationMessagePolicy": "File",
                 "restartPolicy": "Sometimes"},
            ],
        });
        assert_eq!(
            messages(create_now(&pod(spec))),
            [
                "spec.containers[0].restartPolicyRules[2].action: Unsupported value: \"Retry\": supported values: \"Restart\", \"RestartAllContainers\"",
                "spec.containers[0].restartPolicyRules[2].exitCodes.operator: Unsupported value: \"Some\": supported values: \"In\", \"NotIn\"",
                "spec.containers[0].restartPolicyRules[3].exitCodes: Required value: must be specified",
                "spec.containers[1].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\"",
                "spec.initContainers[1].restartPolicy: Required value: must specify restartPolicy when restart rules are used",
            ]
        );
    }

    #[test]
    fn hostname_override_is_a_subdomain_without_fqdn_or_host_network() {
        let spec = |extra: Value| {
            let mut spec = json!({"restartPolicy": "Never", "dnsPolicy": "ClusterFirst",
                "containers": [{"name": "c", "image": "i", "terminationMessagePolicy": "File"}]});
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            pod(spec)
        };
        assert!(create_now(&spec(json!({"hostnameOverride": "override.example.host"}))).is_empty());
        assert_eq!(
            messages(create_now(&spec(
                json!({"hostnameOverride": "override-host",
                "setHostnameAsFQDN": true, "hostNetwork": true})
            ))),
            [
                "spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true",
                "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true",
            ]
        );
        assert_eq!(
            messages(create_now(&spec(
                json!({"hostnameOverride": "Not-RFC1123"})
            ))),
            [
                "spec.hostnameOverride: Invalid value: \"Not-RFC1123\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        let long = "a".repeat(65);
        assert_eq!(
            messages(create_now(&spec(json!({"hostnameOverride": long})))),
            ["spec.hostnameOverride: Too long: may not be more than 64 bytes"]
        );
    }

    #[test]
    fn a_sidecar_may_run_again_in_a_pod_that_restarts_nothing() {
        let spec = json!({"restartPolicy": "Never",
            "initContainers": [{"name": "s", "restartPolicy": "Always"}, {"name": "i"}],
            "containers": [{"name": "c"}]});
        let status = |state: Value| {
            json!({"spec": spec, "status": {"initContainerStatuses": [
                {"name": "s", "state": state.clone()}, {"name": "i", "state": state}]}})
        };
        let exited = status(json!({"terminated": {"exitCode": 0}}));
        let running = status(json!({"running": {}}));
        assert_eq!(
            messages(status_update(&exited, &running)),
            [
                "status.initContainerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state"
            ],
            "only the regular init container may not run again"
        );
    }

    #[test]
    fn updates_change_only_what_upstream_allows() {
        let old = pod(
            json!({"containers": [{"name": "c", "image": "a"}], "tolerations": [{"key": "k"}]}),
        );
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = "b".into();
        new["spec"]["tolerations"] = json!([{"key": "k"}, {"key": "l"}]);
        assert!(update(&old, &new).is_empty());
        new["spec"]["nodeName"] = "n".into();
        let e = update(&old, &new);
        assert!(
            e[0].to_string()
                .starts_with(&format!("spec: Forbidden: {UPDATABLE}\n")),
            "{e:?}"
        );
        let mut added = old.clone();
        added["spec"]["containers"] =
            json!([{"name": "c", "image": "a"}, {"name": "d", "image": "a"}]);
        assert_eq!(
            messages(update(&old, &added)),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        let mut removed = old.clone();
        removed["spec"]["tolerations"] = json!([]);
        assert_eq!(update(&old, &removed).len(), 1);
    }

    #[test]
    fn active_deadline_may_be_set_or_lowered_only() {
        let check = |o: Option<Value>, n: Option<Value>| {
            active_deadline(o.as_ref(), n.as_ref()).map(|e| e.to_string())
        };
        assert_eq!(check(None, Some(json!(30))), None);
        assert_eq!(check(Some(json!(30)), Some(json!(5))), None);
        assert_eq!(
            check(Some(json!(5)), Some(json!(6))).as_deref(),
            Some(
                "spec.activeDeadlineSeconds: Invalid value: 6: must be less than or equal to previous value"
            )
        );
        assert_eq!(
            check(Some(json!(5)), None).as_deref(),
            Some(
                "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"
            )
        );
        assert_eq!(
            check(Some(json!(5)), Some(json!(-1))).as_deref(),
            Some(
                "spec.activeDeadlineSeconds: Invalid value: -1: must be between 0 and 2147483647, inclusive"
            )
        );
    }
}

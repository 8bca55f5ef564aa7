//! The pod strategy's own rules: the QoS class and status a new pod gets, and how its
//! `generation` and `observedGeneration` follow updates.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Part;
use crate::defaults;
use crate::meta;
use crate::quantity::{self, Quantity};
use crate::status::{Error, Result};

/// `ComputePodQOS`: only cpu and memory count, zero quantities are ignored, and a pod is
/// `Guaranteed` when every container limits both and the pod's summed requests equal its
/// summed limits; a pod with pod-level resources is judged by those alone. A resource value that is not a quantity is a 400, as upstream's decoder
/// rejects it.
pub(crate) fn qos_class(spec: &Map<String, Value>) -> Result<&'static str> {
    let mut requests: BTreeMap<&'static str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&'static str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    // Pod-level resources, where the pod has them, decide alone (`PodLevelResources`).
    let owners: Vec<&Value> = match spec.get("resources").filter(|r| r.is_object()) {
        Some(pod_level) => vec![pod_level],
        None => ["containers", "initContainers"]
            .into_iter()
            .filter_map(|list| spec.get(list).and_then(Value::as_array))
            .flatten()
            .map(|c| c.get("resources").unwrap_or(&Value::Null))
            .collect(),
    };
    for resources in owners {
        let add = |kind: &str, sums: &mut BTreeMap<&'static str, Quantity>| {
            let mut found = Vec::new();
            let Some(list) = resources.get(kind).and_then(Value::as_object) else {
                return Ok(found);
            };
            for (name, value) in list {
                let q = value
                    .as_str()
                    .and_then(Quantity::parse)
                    .or_else(|| value.as_i64().and_then(|n| Quantity::parse(&n.to_string())))
                    .ok_or_else(|| {
                        Error::bad_request(format!(
                            "Pod in version \"v1\" cannot be handled as a Pod: {}",
                            quantity::SYNTAX
                        ))
                    })?;
                let Some(name) = ["cpu", "memory"].into_iter().find(|r| r == name) else {
                    continue;
                };
                if q.is_positive() {
                    let sum = sums.entry(name).or_insert(Quantity::ZERO);
                    *sum = sum.saturating_add(q);
                    found.push(name);
                }
            }
            Ok::<_, Error>(found)
        };
        add("requests", &mut requests)?;
        let limited = add("limits", &mut limits)?;
        if !(limited.contains(&"cpu") && limited.contains(&"memory")) {
            guaranteed = false;
        }
    }
    Ok(if requests.is_empty() && limits.is_empty() {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    })
}

/// A new pod: the admission plugins' fields and its create-time status.
pub(super) fn create(pod: &mut Value) -> Result<()> {
    let empty = Map::new();
    let qos = qos_class(pod.get("spec").and_then(Value::as_object).unwrap_or(&empty))?;
    defaults::admit_pod(pod);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    Ok(())
}

/// `dropNonResizeUpdates` (`podResizeStrategy`): the stored pod with the request's
/// container resources and resize policies and its pod-level resources; the metadata
/// `ResetObjectMetaForStatus` resets (labels, annotations, finalizers, owners) and the
/// status stay as stored. A request that adds, removes, renames or moves a container is
/// kept whole for validation to refuse.
pub(super) fn resize(old: &Value, mut new: Value) -> Value {
    let null = Value::Null;
    let (old_spec, new_spec) = (
        old.get("spec").unwrap_or(&null),
        new.get("spec").unwrap_or(&null),
    );
    let mut spec = old_spec.clone();
    for key in ["containers", "initContainers"] {
        let empty = Vec::new();
        let olds = old_spec
            .get(key)
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let news = new_spec
            .get(key)
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let same = olds.len() == news.len()
            && olds
                .iter()
                .zip(news)
                .all(|(o, n)| o.get("name") == n.get("name"));
        if !same {
            return new;
        }
        let Some(merged) = spec.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for (c, n) in merged.iter_mut().zip(news) {
            let Some(c) = c.as_object_mut() else { continue };
            for field in ["resources", "resizePolicy"] {
                match n.get(field) {
                    Some(v) => c.insert(field.into(), v.clone()),
                    None => c.remove(field),
                };
            }
        }
    }
    if let Some(s) = spec.as_object_mut() {
        match new_spec.get("resources") {
            Some(r) => s.insert("resources".into(), r.clone()),
            None => s.remove("resources"),
        };
    }
    new["spec"] = spec;
    match old.get("status") {
        Some(status) => new["status"] = status.clone(),
        None => {
            if let Some(m) = new.as_object_mut() {
                m.remove("status");
            }
        }
    }
    let m = meta::metadata_mut(&mut new);
    for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(v) => m.insert(field.into(), v.clone()),
            None => m.remove(field),
        };
    }
    new
}

/// `updatePodGeneration` and `preserveOldObservedGeneration`: a spec change bumps the
/// pod's `generation`; a status write that leaves `observedGeneration` out, in the status
/// or in a condition, keeps the stored value (conditions matched by type, in order).
pub(super) fn generation(old: &Value, new: &mut Value, part: Part) {
    if part != Part::Status && old.get("spec") != new.get("spec") {
        let generation = new
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta::set(new, "generation", generation + 1);
    }
    if part != Part::Status {
        return;
    }
    let observed = |v: &Value| {
        v.get("observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let old_status = old.get("status").unwrap_or(&Value::Null);
    let unset = status
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .is_none_or(|g| g == 0);
    if unset && observed(old_status) != 0 {
        status.insert("observedGeneration".into(), observed(old_status).into());
    }
    let mut old_conditions: Vec<&Value> = old_status
        .get("conditions")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    for condition in status
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let type_ = condition.get("type").cloned();
        let Some(i) = old_conditions
            .iter()
            .position(|c| c.get("type") == type_.as_ref())
        else {
            continue;
        };
        let was = observed(old_conditions.remove(i));
        if observed(condition) == 0
            && was != 0
            && let Some(c) = condition.as_object_mut()
        {
            c.insert("observedGeneration".into(), was.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{Part, prepare_for_create, prepare_for_update};
    use crate::managed_fields::Writer;
    use crate::resources::PODS;
    use crate::version::Version;

    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    fn qos(containers: Value) -> std::result::Result<(String, Value), u16> {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": containers}});
        let p = prepare_for_create(&PODS, pod, "ns", &Writer::storage(), Version::NEWEST)
            .map_err(|e| e.code())?;
        let class = p["status"]["qosClass"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok((class, p["spec"]["containers"][0]["resources"].clone()))
    }

    #[test]
    fn qos_class_like_compute_pod_qos() {
        let c = |resources: Value| json!([{"name": "c", "image": "i", "resources": resources}]);
        let class = |resources: Value| qos(c(resources)).map(|(class, _)| class);
        // Only cpu and memory count, and zero is no request.
        assert_eq!(
            class(json!({"requests": {"ephemeral-storage": "1Gi"}})),
            Ok("BestEffort".into())
        );
        assert_eq!(
            class(json!({"requests": {"cpu": "0", "memory": "0"}})),
            Ok("BestEffort".into())
        );
        assert_eq!(
            class(json!({"requests": {"cpu": "100m"}})),
            Ok("Burstable".into())
        );
        // Requests equal limits in value, whatever the spelling.
        let equal = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1073741824"}});
        assert_eq!(class(equal), Ok("Guaranteed".into()));
        let lower = json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(class(lower), Ok("Burstable".into()));
        let cpu_only = json!({"limits": {"cpu": "1"}});
        assert_eq!(class(cpu_only), Ok("Burstable".into()));
        // A limit without a request becomes the request (`SetDefaults_Pod`).
        let (class, resources) = qos(c(json!({"limits": {"cpu": "1", "memory": "64Mi"}}))).unwrap();
        assert_eq!(class, "Guaranteed");
        assert_eq!(resources["requests"], json!({"cpu": "1", "memory": "64Mi"}));
        // Pod-level resources decide alone.
        let pod_level = |resources: Value| {
            let mut p = pod();
            p["spec"]["resources"] = resources;
            prepare_for_create(&PODS, p, "ns", &Writer::storage(), Version::NEWEST)
                .map(|p| p["status"]["qosClass"].clone())
                .map_err(|e| e.code())
        };
        let both = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            pod_level(json!({"requests": both, "limits": both})),
            Ok(json!("Guaranteed"))
        );
        assert_eq!(
            pod_level(json!({"requests": {"cpu": "1"}})),
            Ok(json!("Burstable"))
        );
        // Not a quantity: the decoder's 400.
        assert_eq!(qos(c(json!({"limits": {"cpu": "lots"}}))), Err(400));
    }

    #[test]
    fn pod_generation_follows_the_spec_and_status_writes_keep_the_observed_one() {
        let v1 =
            prepare_for_create(&PODS, pod(), "ns", &Writer::storage(), Version::NEWEST).unwrap();
        let update = |old: &Value, new: Value, part| {
            prepare_for_update(&PODS, old, new, part, &Writer::storage(), Version::NEWEST).unwrap()
        };
        let mut new = v1.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        let same = update(&v1, new, Part::Main);
        assert_eq!(same["metadata"]["generation"], 1, "metadata is not spec");
        let mut new = same.clone();
        new["spec"]["containers"][0]["image"] = "busybox:2".into();
        let v2 = update(&same, new, Part::Main);
        assert_eq!(v2["metadata"]["generation"], 2);
        let mut observed = v2.clone();
        observed["status"] = json!({"phase": "Running", "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]});
        let observed = update(&v2, observed, Part::Status);
        let mut blind = observed.clone();
        blind["status"] = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}]});
        let kept = update(&observed, blind, Part::Status);
        assert_eq!(kept["status"]["observedGeneration"], 2);
        assert_eq!(kept["status"]["conditions"][0]["observedGeneration"], 2);
        assert_eq!(
            kept["status"]["conditions"][1].get("observedGeneration"),
            None
        );
        assert_eq!(
            kept["metadata"]["generation"], 2,
            "status writes never bump"
        );
    }
}

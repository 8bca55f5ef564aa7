//! A container's resources as the downward API reads them (the kubelet's
//! `pkg/api/v1/resource/helpers.go` and `kubelet_resources.go`).
//!
//! [`container_value`] is `ExtractContainerResourceValue`: `limits.cpu`,
//! `requests.memory`, … of a container, divided by the selector's `divisor`
//! (default 1) and rounded up, as `env` values and downward-API files carry
//! them (`cpu: 1250m` → `2`; with divisor `1m` → `1250`). Before reading, the
//! kubelet fills the limits a container does not set from the node's
//! allocatable ([`default_limits`], `MergeContainerResourceLimits`), so a
//! container without limits sees the node's CPUs and memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodeconform_resource::pod;

pub use nodeconform_resource::pod::List;

/// The resources whose missing (or zero) limits default to the node's
/// allocatable; hugepages never do (they are never overcommitted).
const DEFAULTED: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// `MergeContainerResourceLimits`: `container` with each of CPU, memory and
/// ephemeral storage that it does not limit (or limits to zero) limited to
/// the node's `allocatable`.
pub fn default_limits(container: &Container, allocatable: &List) -> Container {
    let mut out = container.clone();
    let resources = out.resources.get_or_insert_with(Default::default);
    let limits = resources.limits.get_or_insert_with(Default::default);
    for name in DEFAULTED {
        let unset = limits.get(name).is_none_or(is_zero);
        if unset && let Some(cap) = allocatable.get(name) {
            limits.insert(name.to_owned(), cap.clone());
        }
    }
    out
}

/// The value of `selector` for `container` of `pod` (`containerResourceRuntimeValue`
/// after `defaultPodLimitsForDownwardAPI`): the named container when the selector
/// names one (app containers, then init containers), else `container`; limits it
/// does not set are the node's `allocatable`. `Err` is the kubelet's message.
pub fn runtime_value(
    selector: &ResourceFieldSelector,
    pod: &Pod,
    container: &Container,
    allocatable: &List,
) -> Result<String, String> {
    let target = match selector.container_name.as_deref() {
        None | Some("") => container,
        Some(name) => find_container(pod, name)?,
    };
    container_value(selector, &default_limits(target, allocatable))
}

/// `findContainerInPod`: app containers first, then init containers.
fn find_container<'a>(pod: &'a Pod, name: &str) -> Result<&'a Container, String> {
    let spec = pod.spec.as_ref();
    let apps = spec.map(|s| s.containers.iter()).into_iter().flatten();
    let inits = spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten();
    apps.chain(inits)
        .find(|c| c.name == name)
        .ok_or_else(|| format!("container {name} not found"))
}

/// `ExtractContainerResourceValue`: `limits.<r>` or `requests.<r>` of
/// `container` for CPU (in millicores over the divisor's), memory, ephemeral
/// storage and `hugepages-*` (in units over the divisor's), rounded up; an
/// absent resource is 0.
pub fn container_value(
    selector: &ResourceFieldSelector,
    container: &Container,
) -> Result<String, String> {
    let unsupported = || format!("unsupported container resource : {}", selector.resource);
    let divisor = match &selector.divisor {
        Some(q) if !is_zero(q) => parse(q)?,
        _ => nodeconform_resource::Quantity::ONE,
    };
    let (list, name) = if let Some(name) = selector.resource.strip_prefix("limits.") {
        (
            container.resources.as_ref().and_then(|r| r.limits.as_ref()),
            name,
        )
    } else if let Some(name) = selector.resource.strip_prefix("requests.") {
        let requests = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref());
        (requests, name)
    } else {
        return Err(unsupported());
    };
    let quantity = list.and_then(|l| l.get(name));
    let amount = match quantity {
        Some(q) => parse(q)?,
        None => nodeconform_resource::Quantity::ZERO,
    };
    // `math.Ceil(float64(x) / float64(divisor))`, as upstream computes it.
    let ceil_div = |x: i128, d: i128| (x as f64 / d as f64).ceil() as i64;
    match name {
        "cpu" => Ok(ceil_div(amount.milli_value(), divisor.milli_value()).to_string()),
        "memory" | "ephemeral-storage" => Ok(ceil_div(amount.value(), divisor.value()).to_string()),
        _ if name.starts_with("hugepages-") => {
            Ok(ceil_div(amount.value(), divisor.value()).to_string())
        }
        _ => Err(unsupported()),
    }
}

/// `PodRequests` in the scheduler's units: CPU in millicores, everything else in units.
pub fn pod_requests(pod: &Pod) -> BTreeMap<String, i64> {
    amounts(&pod::requests(pod))
}

/// A node's `allocatable` in the units of [`pod_requests`].
pub fn amounts(list: &List) -> BTreeMap<String, i64> {
    list.iter()
        .map(|(name, q)| (name.clone(), amount_of(name, q)))
        .collect()
}

/// A quantity of `name` as the scheduler counts it: CPU in millicores, every
/// other resource in units; an unparsable quantity (the API server validates
/// them) counts as 0.
pub(crate) fn amount_of(name: &str, q: &Quantity) -> i64 {
    let amount = parse(q).unwrap_or(nodeconform_resource::Quantity::ZERO);
    let value = if name == "cpu" {
        amount.milli_value()
    } else {
        amount.value()
    };
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn is_zero(q: &Quantity) -> bool {
    parse(q).is_ok_and(|a| a == nodeconform_resource::Quantity::ZERO)
}

/// Parses a quantity; `Err` is the decoder's message.
fn parse(q: &Quantity) -> Result<nodeconform_resource::Quantity, String> {
    nodeconform_resource::Quantity::parse(q.0.trim())
        .ok_or_else(|| format!("quantities must match the regular expression: {:?}", q.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    fn list(items: &[(&str, &str)]) -> List {
        items.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect()
    }

    fn selector(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            resource: resource.to_owned(),
            divisor: divisor.map(q),
            container_name: None,
        }
    }

    /// The container of the downward API env test: requests 250m / 32Mi, limits 1250m / 64Mi.
    fn dapi_container() -> Container {
        Container {
            name: "dapi-container".into(),
            resources: Some(ResourceRequirements {
                requests: Some(list(&[("cpu", "250m"), ("memory", "32Mi")])),
                limits: Some(list(&[("cpu", "1250m"), ("memory", "64Mi")])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn values_round_up_over_the_divisor() {
        let c = dapi_container();
        let value = |r: &str, d: Option<&str>| container_value(&selector(r, d), &c).unwrap();
        // The upstream test's expectations.
        assert_eq!(value("limits.cpu", None), "2");
        assert_eq!(value("limits.memory", None), "67108864");
        assert_eq!(value("requests.cpu", None), "1");
        assert_eq!(value("requests.memory", None), "33554432");
        // Divisors; "0" means 1.
        assert_eq!(value("limits.cpu", Some("1m")), "1250");
        assert_eq!(value("limits.cpu", Some("0")), "2");
        assert_eq!(value("limits.memory", Some("1Mi")), "64");
        assert_eq!(value("requests.memory", Some("1M")), "34");
        // Absent resources are 0; unknown ones are errors.
        assert_eq!(value("limits.ephemeral-storage", None), "0");
        assert_eq!(value("requests.hugepages-2Mi", None), "0");
        let err = container_value(&selector("limits.gpu", None), &c).unwrap_err();
        assert_eq!(err, "unsupported container resource : limits.gpu");
        let err = container_value(&selector("cpu", None), &c).unwrap_err();
        assert_eq!(err, "unsupported container resource : cpu");
    }

    #[test]
    fn missing_and_zero_limits_default_to_allocatable() {
        let allocatable = list(&[
            ("cpu", "2"),
            ("memory", "4026532Ki"),
            ("pods", "110"),
            ("hugepages-2Mi", "0"),
        ]);
        let bare = Container::default();
        let defaulted = default_limits(&bare, &allocatable);
        let limits = defaulted.resources.unwrap().limits.unwrap();
        assert_eq!(limits, list(&[("cpu", "2"), ("memory", "4026532Ki")]));

        let mut zero = dapi_container();
        let resources = zero.resources.as_mut().unwrap();
        resources.limits = Some(list(&[("cpu", "0"), ("memory", "64Mi")]));
        let limits = default_limits(&zero, &allocatable)
            .resources
            .unwrap()
            .limits;
        assert_eq!(limits.unwrap(), list(&[("cpu", "2"), ("memory", "64Mi")]));
    }

    #[test]
    fn runtime_value_reads_the_named_container() {
        let allocatable = list(&[("cpu", "4"), ("memory", "1Gi")]);
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![dapi_container(), Container::default()],
                init_containers: Some(vec![Container {
                    name: "init".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let me = &pod.spec.as_ref().unwrap().containers[1];
        let mut s = selector("limits.cpu", None);
        assert_eq!(runtime_value(&s, &pod, me, &allocatable).unwrap(), "4");
        s.container_name = Some("dapi-container".into());
        assert_eq!(runtime_value(&s, &pod, me, &allocatable).unwrap(), "2");
        s.container_name = Some("init".into());
        s.resource = "limits.memory".into();
        assert_eq!(
            runtime_value(&s, &pod, me, &allocatable).unwrap(),
            "1073741824"
        );
        s.container_name = Some("nope".into());
        let err = runtime_value(&s, &pod, me, &allocatable).unwrap_err();
        assert_eq!(err, "container nope not found");
    }
}

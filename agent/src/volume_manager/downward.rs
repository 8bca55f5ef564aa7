//! The files of a downward-API volume (`pkg/volume/downwardapi`): pod fields by
//! `fieldRef`, and a container's resources by `resourceFieldRef` as
//! `pkg/api/v1/resource/helpers.go` computes them (divided by the `divisor`, default
//! `1`, rounded up; an unset limit is the node's allocatable).

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, ResourceFieldSelector};

use super::atomic_writer::{File, Payload};
use super::{file_mode, relative};
use crate::env::{self, Downward};

/// The node's allocatable CPU (in millicores) and memory (in bytes), as the node
/// status reports them: the defaults of unset limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    /// Millicores.
    pub cpu_milli: u128,
    /// Bytes.
    pub memory: u128,
}

impl Allocatable {
    /// This node's, as `node_status` computes its capacity.
    pub fn of_node() -> Self {
        Self {
            cpu_milli: 1000 * crate::node_status::cpus() as u128,
            memory: 1024 * u128::from(crate::node_status::memory_kib()),
        }
    }
}

/// The payload of a downward-API volume (or projection) with `default_mode`.
pub(super) fn files(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    downward: Downward<'_>,
    default_mode: Option<i32>,
) -> Result<Payload, String> {
    let mut files = Payload::new();
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            let map = match field.field_path.as_str() {
                "metadata.labels" => Some(pod.metadata.labels.clone().unwrap_or_default()),
                "metadata.annotations" => {
                    Some(pod.metadata.annotations.clone().unwrap_or_default())
                }
                _ => None,
            };
            match map {
                // `fieldpath.FormatMap`: sorted `key="value"` lines, values quoted like Go's %q.
                Some(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                None => env::field_value(pod, &field.field_path, downward)
                    .ok_or_else(|| format!("unsupported fieldPath: {}", field.field_path))?,
            }
        } else if let Some(resource) = &item.resource_field_ref {
            resource_value(pod, resource, Allocatable::of_node())?
        } else {
            return Err(format!(
                "downward API volume file {:?}: neither fieldRef nor resourceFieldRef",
                item.path
            ));
        };
        files.insert(
            relative(&item.path)?,
            File {
                content: value.into_bytes(),
                mode: file_mode(item.mode, default_mode),
            },
        );
    }
    Ok(files)
}

/// `ExtractResourceValueByContainerNameAndNodeAllocatable`: a container's resource,
/// its limits defaulted from the node's allocatable.
pub fn resource_value(
    pod: &Pod,
    field: &ResourceFieldSelector,
    node: Allocatable,
) -> Result<String, String> {
    let name = field.container_name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let container = spec
        .into_iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .find(|c| c.name == name)
        .ok_or_else(|| format!("container {name:?} not found in pod"))?;
    let resources = container.resources.as_ref();
    let get = |which: &str, key: &str| -> Result<Option<Ratio>, String> {
        let map = match which {
            "limits" => resources.and_then(|r| r.limits.as_ref()),
            _ => resources.and_then(|r| r.requests.as_ref()),
        };
        map.and_then(|m| m.get(key))
            .map(|q| parse(&q.0))
            .transpose()
    };
    // A zero divisor (the API's default, `0`) means 1.
    let divisor = match &field.divisor {
        Some(q) if !q.0.is_empty() => Some(parse(&q.0)?).filter(|d| d.num != 0),
        _ => None,
    }
    .unwrap_or(Ratio::ONE);
    let (which, key) = field
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported container resource: {}", field.resource))?;
    let value = match (which, key) {
        ("limits", "cpu") => get(which, key)?.unwrap_or(Ratio::milli(node.cpu_milli)),
        ("limits", "memory") => get(which, key)?.unwrap_or(Ratio::whole(node.memory)),
        ("requests", "cpu" | "memory") => get(which, key)?.unwrap_or(Ratio::ZERO),
        _ => {
            return Err(format!(
                "unsupported container resource: {}",
                field.resource
            ));
        }
    };
    // CPU compares milli-values (`convertResourceCPUToString`), memory whole values.
    let (v, d) = if key == "cpu" {
        (value.ceil_scaled(1000), divisor.ceil_scaled(1000))
    } else {
        (value.ceil_scaled(1), divisor.ceil_scaled(1))
    };
    Ok(v.div_ceil(d.max(1)).to_string())
}

/// A non-negative quantity as an exact fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ratio {
    num: u128,
    den: u128,
}

impl Ratio {
    const ZERO: Self = Self { num: 0, den: 1 };
    const ONE: Self = Self { num: 1, den: 1 };

    fn whole(n: u128) -> Self {
        Self { num: n, den: 1 }
    }

    fn milli(n: u128) -> Self {
        Self { num: n, den: 1000 }
    }

    /// `⌈self × scale⌉` (`Value()` for 1, `MilliValue()` for 1000).
    fn ceil_scaled(self, scale: u128) -> u128 {
        (self.num * scale).div_ceil(self.den)
    }
}

/// A `resource.Quantity` string: decimal number, then a decimal SI suffix, a binary
/// suffix (`Ki` … `Ei`) or an exponent (`e3`).
fn parse(s: &str) -> Result<Ratio, String> {
    let bad = || format!("quantities must match the regular expression: {s:?}");
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let number = number.trim_start_matches('+');
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    let digits = format!("{int}{frac}");
    let mut num: u128 = digits.parse().map_err(|_| bad())?;
    let mut den: u128 = 10u128.pow(frac.len() as u32);
    let pow10 = |e: i32| 10u128.pow(e.unsigned_abs());
    let (mul, div): (u128, u128) = match suffix {
        "" => (1, 1),
        "n" => (1, pow10(9)),
        "u" => (1, pow10(6)),
        "m" => (1, 1000),
        "k" => (1000, 1),
        "M" => (pow10(6), 1),
        "G" => (pow10(9), 1),
        "T" => (pow10(12), 1),
        "P" => (pow10(15), 1),
        "E" => (pow10(18), 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| bad())?;
            if exp.abs() > 18 {
                return Err(bad());
            }
            if exp >= 0 {
                (pow10(exp), 1)
            } else {
                (1, pow10(exp))
            }
        }
        _ => return Err(bad()),
    };
    num *= mul;
    den *= div;
    Ok(Ratio { num, den })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Pod {
        let map = |kv: &[(&str, &str)]| {
            Some(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        limits: map(limits),
                        requests: map(requests),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn value(pod: &Pod, resource: &str, divisor: Option<&str>) -> Result<String, String> {
        let field = ResourceFieldSelector {
            container_name: Some("c".into()),
            resource: resource.into(),
            divisor: divisor.map(|d| Quantity(d.into())),
        };
        let node = Allocatable {
            cpu_milli: 4000,
            memory: 8 << 30,
        };
        resource_value(pod, &field, node)
    }

    #[test]
    fn quantities_parse_exactly() {
        assert_eq!(parse("1250m").unwrap().ceil_scaled(1000), 1250);
        assert_eq!(parse("64Mi").unwrap().ceil_scaled(1), 64 << 20);
        assert_eq!(parse("0.5").unwrap().ceil_scaled(1000), 500);
        assert_eq!(parse("1e3").unwrap().ceil_scaled(1), 1000);
        assert_eq!(parse("2k").unwrap().ceil_scaled(1), 2000);
        assert!(parse("x").is_err() && parse("1Q").is_err());
    }

    #[test]
    fn resources_are_divided_and_rounded_up_with_limits_from_the_node() {
        // The upstream pod: requests 250m/32Mi, limits 1250m/64Mi.
        let p = pod(
            &[("cpu", "1250m"), ("memory", "64Mi")],
            &[("cpu", "250m"), ("memory", "32Mi")],
        );
        assert_eq!(value(&p, "limits.cpu", None).unwrap(), "2");
        assert_eq!(value(&p, "limits.cpu", Some("0")).unwrap(), "2");
        assert_eq!(value(&p, "requests.cpu", Some("1m")).unwrap(), "250");
        assert_eq!(value(&p, "limits.memory", None).unwrap(), "67108864");
        assert_eq!(value(&p, "requests.memory", Some("1Mi")).unwrap(), "32");
        let none = pod(&[], &[]);
        assert_eq!(value(&none, "limits.cpu", None).unwrap(), "4");
        assert_eq!(value(&none, "limits.memory", Some("1Gi")).unwrap(), "8");
        assert_eq!(value(&none, "requests.cpu", None).unwrap(), "0");
        assert!(value(&none, "limits.gpu", None).is_err());
    }
}

//! The Pod a kubelet creates for a static pod (its mirror pod), and any other
//! client's protobuf Pod, mapped to its JSON.
//!
//! Every message is taken apart with an exhaustive pattern, so a field k8s-pb
//! knows cannot be dropped by accident: each is either mapped or, when set,
//! refused with a 415 that names it (the parts a node's pods rarely carry:
//! affinity, topology spread, dynamic resources, the in-tree network volumes,
//! SELinux and Windows options, …). Go's JSON drops zero values of its plain
//! (non-pointer) `omitempty` fields; protobuf carries them, so they are dropped
//! here too ([`Obj::bool_omitempty`], [`Obj::int_omitempty`]). The status a
//! client sends on create is ignored, as kube-apiserver resets it.

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

use super::{MEDIA_TYPE, object_meta, put, strings};

mod container;
mod volume;

use crate::status::{Error, Result};
use container::container;
use volume::volume;

/// A field this mapping does not read, when it is set.
pub(super) fn refuse(field: &str) -> Error {
    Error::UnsupportedMediaType {
        content_type: format!("{MEDIA_TYPE} (v1, Kind=Pod: {field} is not read from protobuf)"),
        accepted: &[],
    }
}

/// Refuses `field` if `set`.
pub(super) fn none(set: bool, field: &str) -> Result<()> {
    if set { Err(refuse(field)) } else { Ok(()) }
}

/// A JSON object built field by field, leaving out what Go's JSON leaves out.
#[derive(Default)]
pub(super) struct Obj(pub(super) Map<String, Value>);

impl Obj {
    pub(super) fn string(mut self, key: &str, v: Option<String>) -> Self {
        put(&mut self.0, key, v.map_or(Value::Null, Value::from));
        self
    }
    pub(super) fn strings(mut self, key: &str, v: Vec<String>) -> Self {
        put(&mut self.0, key, v.into());
        self
    }
    /// A `*bool`: kept when set, `false` included.
    pub(super) fn bool(mut self, key: &str, v: Option<bool>) -> Self {
        if let Some(v) = v {
            self.0.insert(key.into(), v.into());
        }
        self
    }
    /// A plain `bool` with `omitempty`: `false` is left out.
    pub(super) fn bool_omitempty(self, key: &str, v: Option<bool>) -> Self {
        self.bool(key, v.filter(|b| *b))
    }
    /// A pointer integer: kept when set, 0 included.
    pub(super) fn int(mut self, key: &str, v: Option<i64>) -> Self {
        if let Some(v) = v {
            self.0.insert(key.into(), v.into());
        }
        self
    }
    /// A plain integer with `omitempty`: 0 is left out.
    pub(super) fn int_omitempty(self, key: &str, v: Option<i64>) -> Self {
        self.int(key, v.filter(|n| *n != 0))
    }
    pub(super) fn value(mut self, key: &str, v: Value) -> Self {
        put(&mut self.0, key, v);
        self
    }
    pub(super) fn done(self) -> Value {
        Value::Object(self.0)
    }
}

pub(super) fn list<T>(items: Vec<T>, f: impl FnMut(T) -> Result<Value>) -> Result<Value> {
    Ok(Value::Array(
        items.into_iter().map(f).collect::<Result<Vec<_>>>()?,
    ))
}

pub(super) fn quantity(q: Option<Quantity>) -> Value {
    q.and_then(|q| q.string).map_or(Value::Null, Value::from)
}

pub(super) fn quantities(map: std::collections::BTreeMap<String, Quantity>) -> Value {
    Value::Object(
        map.into_iter()
            .map(|(k, q)| (k, q.string.unwrap_or_default().into()))
            .collect(),
    )
}

/// An `IntOrString`: type 0 is the integer, 1 the string.
pub(super) fn int_or_string(v: Option<IntOrString>) -> Value {
    match v {
        None => Value::Null,
        Some(v) if v.r#type == Some(1) => v.str_val.unwrap_or_default().into(),
        Some(v) => v.int_val.unwrap_or(0).into(),
    }
}

pub(super) fn name_of(r: Option<core::LocalObjectReference>) -> Option<String> {
    r.and_then(|r| r.name)
}

/// A protobuf Pod as JSON (metadata and spec).
pub fn pod(pod: core::Pod) -> Result<Map<String, Value>> {
    let core::Pod {
        metadata,
        spec,
        status: _,
    } = pod;
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(metadata));
    if let Some(spec) = spec {
        out.insert("spec".into(), pod_spec(spec)?);
    }
    Ok(out)
}

fn pod_spec(spec: core::PodSpec) -> Result<Value> {
    let core::PodSpec {
        volumes,
        init_containers,
        containers,
        ephemeral_containers,
        restart_policy,
        termination_grace_period_seconds,
        active_deadline_seconds,
        dns_policy,
        node_selector,
        service_account_name,
        service_account,
        automount_service_account_token,
        node_name,
        host_network,
        host_pid,
        host_ipc,
        share_process_namespace,
        security_context,
        image_pull_secrets,
        hostname,
        subdomain,
        affinity,
        scheduler_name,
        tolerations,
        host_aliases,
        priority_class_name,
        priority,
        dns_config,
        readiness_gates,
        runtime_class_name,
        enable_service_links,
        preemption_policy,
        overhead,
        topology_spread_constraints,
        set_hostname_as_fqdn,
        os,
        host_users,
        scheduling_gates,
        resource_claims,
        resources,
        hostname_override,
        workload_ref,
    } = spec;
    none(!ephemeral_containers.is_empty(), "spec.ephemeralContainers")?;
    none(affinity.is_some(), "spec.affinity")?;
    none(
        !topology_spread_constraints.is_empty(),
        "spec.topologySpreadConstraints",
    )?;
    none(!resource_claims.is_empty(), "spec.resourceClaims")?;
    none(resources.is_some(), "spec.resources")?;
    none(workload_ref.is_some(), "spec.workloadRef")?;
    let security = match security_context {
        Some(sc) => pod_security_context(sc)?,
        None => Value::Null,
    };
    Ok(Obj::default()
        .value("volumes", list(volumes, volume)?)
        .value("initContainers", list(init_containers, container)?)
        .value("containers", list(containers, container)?)
        .string("restartPolicy", restart_policy)
        .int(
            "terminationGracePeriodSeconds",
            termination_grace_period_seconds,
        )
        .int("activeDeadlineSeconds", active_deadline_seconds)
        .string("dnsPolicy", dns_policy)
        .value("nodeSelector", strings(node_selector.into_iter().collect()))
        .string("serviceAccountName", service_account_name)
        .string("serviceAccount", service_account)
        .bool(
            "automountServiceAccountToken",
            automount_service_account_token,
        )
        .string("nodeName", node_name)
        .bool_omitempty("hostNetwork", host_network)
        .bool_omitempty("hostPID", host_pid)
        .bool_omitempty("hostIPC", host_ipc)
        .bool("shareProcessNamespace", share_process_namespace)
        .value("securityContext", security)
        .value(
            "imagePullSecrets",
            list(image_pull_secrets, |r| {
                Ok(Obj::default().string("name", r.name).done())
            })?,
        )
        .string("hostname", hostname)
        .string("subdomain", subdomain)
        .string("schedulerName", scheduler_name)
        .value("tolerations", list(tolerations, toleration)?)
        .value(
            "hostAliases",
            list(host_aliases, |a| {
                Ok(Obj::default()
                    .string("ip", a.ip)
                    .strings("hostnames", a.hostnames)
                    .done())
            })?,
        )
        .string("priorityClassName", priority_class_name)
        .int("priority", priority.map(i64::from))
        .value("dnsConfig", dns_config.map_or(Value::Null, pod_dns_config))
        .value(
            "readinessGates",
            list(readiness_gates, |g| {
                Ok(Obj::default()
                    .string("conditionType", g.condition_type)
                    .done())
            })?,
        )
        .string("runtimeClassName", runtime_class_name)
        .bool("enableServiceLinks", enable_service_links)
        .string("preemptionPolicy", preemption_policy)
        .value("overhead", quantities(overhead))
        .bool("setHostnameAsFQDN", set_hostname_as_fqdn)
        .value(
            "os",
            os.map_or(Value::Null, |os| {
                Obj::default().string("name", os.name).done()
            }),
        )
        .bool("hostUsers", host_users)
        .value(
            "schedulingGates",
            list(scheduling_gates, |g| {
                Ok(Obj::default().string("name", g.name).done())
            })?,
        )
        .string("hostnameOverride", hostname_override)
        .done())
}

fn pod_dns_config(c: core::PodDnsConfig) -> Value {
    let options: Vec<Value> = c
        .options
        .into_iter()
        .map(|o| {
            Obj::default()
                .string("name", o.name)
                .string("value", o.value)
                .done()
        })
        .collect();
    Obj::default()
        .strings("nameservers", c.nameservers)
        .strings("searches", c.searches)
        .value("options", options.into())
        .done()
}

fn toleration(t: core::Toleration) -> Result<Value> {
    let core::Toleration {
        key,
        operator,
        value,
        effect,
        toleration_seconds,
    } = t;
    Ok(Obj::default()
        .string("key", key)
        .string("operator", operator)
        .string("value", value)
        .string("effect", effect)
        .int("tolerationSeconds", toleration_seconds)
        .done())
}

pub(super) fn seccomp(p: Option<core::SeccompProfile>) -> Value {
    p.map_or(Value::Null, |p| {
        Obj::default()
            .string("type", p.r#type)
            .string("localhostProfile", p.localhost_profile)
            .done()
    })
}

fn pod_security_context(sc: core::PodSecurityContext) -> Result<Value> {
    let core::PodSecurityContext {
        se_linux_options,
        windows_options,
        run_as_user,
        run_as_group,
        run_as_non_root,
        supplemental_groups,
        supplemental_groups_policy,
        fs_group,
        sysctls,
        fs_group_change_policy,
        seccomp_profile,
        app_armor_profile,
        se_linux_change_policy,
    } = sc;
    none(
        se_linux_options.is_some(),
        "spec.securityContext.seLinuxOptions",
    )?;
    none(
        windows_options.is_some(),
        "spec.securityContext.windowsOptions",
    )?;
    none(
        app_armor_profile.is_some(),
        "spec.securityContext.appArmorProfile",
    )?;
    Ok(Obj::default()
        .int("runAsUser", run_as_user)
        .int("runAsGroup", run_as_group)
        .bool("runAsNonRoot", run_as_non_root)
        .value("supplementalGroups", supplemental_groups.into())
        .string("supplementalGroupsPolicy", supplemental_groups_policy)
        .int("fsGroup", fs_group)
        .value(
            "sysctls",
            list(sysctls, |s| {
                Ok(Obj::default()
                    .string("name", s.name)
                    .string("value", s.value)
                    .done())
            })?,
        )
        .string("fsGroupChangePolicy", fs_group_change_policy)
        .value("seccompProfile", seccomp(seccomp_profile))
        .string("seLinuxChangePolicy", se_linux_change_policy)
        .done())
}

pub(super) fn field_selector(f: Option<core::ObjectFieldSelector>) -> Value {
    f.map_or(Value::Null, |f| {
        Obj::default()
            .string("apiVersion", f.api_version)
            .string("fieldPath", f.field_path)
            .done()
    })
}

pub(super) fn resource_selector(r: Option<core::ResourceFieldSelector>) -> Value {
    r.map_or(Value::Null, |r| {
        Obj::default()
            .string("containerName", r.container_name)
            .string("resource", r.resource)
            .value("divisor", quantity(r.divisor))
            .done()
    })
}

#[cfg(test)]
mod tests {
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use serde_json::json;

    use super::*;

    fn container() -> core::Container {
        core::Container {
            name: Some("c".into()),
            image: Some("busybox".into()),
            stdin: Some(false),
            ports: vec![core::ContainerPort {
                name: Some("http".into()),
                host_port: Some(0),
                container_port: Some(8080),
                protocol: Some("TCP".into()),
                host_ip: Some(String::new()),
            }],
            readiness_probe: Some(core::Probe {
                handler: Some(core::ProbeHandler {
                    http_get: Some(core::HttpGetAction {
                        path: Some("/ready".into()),
                        port: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: Some("http".into()),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                initial_delay_seconds: Some(0),
                period_seconds: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_mirror_pod_reads_as_kube_apiserver_stores_it() {
        let pod = core::Pod {
            metadata: Some(meta::ObjectMeta {
                name: Some("web-node".into()),
                ..Default::default()
            }),
            spec: Some(core::PodSpec {
                containers: vec![container()],
                host_network: Some(false),
                share_process_namespace: Some(false),
                volumes: vec![core::Volume {
                    name: Some("scratch".into()),
                    volume_source: Some(core::VolumeSource {
                        empty_dir: Some(core::EmptyDirVolumeSource::default()),
                        ..Default::default()
                    }),
                }],
                ..Default::default()
            }),
            status: Some(core::PodStatus::default()),
        };
        let json = Value::Object(super::pod(pod).unwrap());
        assert_eq!(
            json,
            json!({
                "metadata": {"name": "web-node"},
                "spec": {
                    "containers": [{
                        "name": "c",
                        "image": "busybox",
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "readinessProbe": {
                            "httpGet": {"path": "/ready", "port": "http"},
                            "periodSeconds": 10
                        }
                    }],
                    "shareProcessNamespace": false,
                    "volumes": [{"name": "scratch", "emptyDir": {}}]
                }
            }),
            "zero values of plain Go fields are left out, pointers kept"
        );
    }

    #[test]
    fn fields_not_read_are_refused_by_name() {
        let pod = core::Pod {
            spec: Some(core::PodSpec {
                containers: vec![container()],
                affinity: Some(core::Affinity::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let error = super::pod(pod).unwrap_err();
        assert_eq!(error.code(), 415);
        assert!(
            error.to_string().contains("spec.affinity is not read"),
            "{error}"
        );
    }
}

//! A container of a protobuf Pod: ports, environment, resources, mounts,
//! probes, lifecycle hooks and security context.

use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value};

use super::{
    Obj, field_selector, int_or_string, list, name_of, none, quantities, resource_selector, seccomp,
};
use crate::status::Result;

pub(super) fn container(c: core::Container) -> Result<Value> {
    let core::Container {
        name,
        image,
        command,
        args,
        working_dir,
        ports,
        env_from,
        env,
        resources,
        resize_policy,
        restart_policy,
        restart_policy_rules,
        volume_mounts,
        volume_devices,
        liveness_probe,
        readiness_probe,
        startup_probe,
        lifecycle,
        termination_message_path,
        termination_message_policy,
        image_pull_policy,
        security_context,
        stdin,
        stdin_once,
        tty,
    } = c;
    none(!resize_policy.is_empty(), "containers[].resizePolicy")?;
    none(
        !restart_policy_rules.is_empty(),
        "containers[].restartPolicyRules",
    )?;
    none(!volume_devices.is_empty(), "containers[].volumeDevices")?;
    let resources = match resources {
        Some(r) => {
            none(!r.claims.is_empty(), "containers[].resources.claims")?;
            Obj::default()
                .value("limits", quantities(r.limits))
                .value("requests", quantities(r.requests))
                .done()
        }
        None => Value::Null,
    };
    let probe = |p: Option<core::Probe>| p.map_or(Ok(Value::Null), probe);
    Ok(Obj::default()
        .string("name", name)
        .string("image", image)
        .strings("command", command)
        .strings("args", args)
        .string("workingDir", working_dir)
        .value(
            "ports",
            list(ports, |p| {
                Ok(Obj::default()
                    .string("name", p.name)
                    .int_omitempty("hostPort", p.host_port.map(i64::from))
                    .int("containerPort", p.container_port.map(i64::from))
                    .string("protocol", p.protocol)
                    .string("hostIP", p.host_ip)
                    .done())
            })?,
        )
        .value("envFrom", list(env_from, env_from_source)?)
        .value("env", list(env, env_var)?)
        .value("resources", resources)
        .string("restartPolicy", restart_policy)
        .value("volumeMounts", list(volume_mounts, volume_mount)?)
        .value("livenessProbe", probe(liveness_probe)?)
        .value("readinessProbe", probe(readiness_probe)?)
        .value("startupProbe", probe(startup_probe)?)
        .value(
            "lifecycle",
            lifecycle.map_or(Ok(Value::Null), container_lifecycle)?,
        )
        .string("terminationMessagePath", termination_message_path)
        .string("terminationMessagePolicy", termination_message_policy)
        .string("imagePullPolicy", image_pull_policy)
        .value(
            "securityContext",
            security_context.map_or(Ok(Value::Null), security_context_json)?,
        )
        .bool_omitempty("stdin", stdin)
        .bool_omitempty("stdinOnce", stdin_once)
        .bool_omitempty("tty", tty)
        .done())
}

fn env_from_source(e: core::EnvFromSource) -> Result<Value> {
    let reference = |name: Option<String>, optional: Option<bool>| {
        Obj::default()
            .string("name", name)
            .bool("optional", optional)
            .done()
    };
    Ok(Obj::default()
        .string("prefix", e.prefix)
        .value(
            "configMapRef",
            e.config_map_ref.map_or(Value::Null, |r| {
                reference(name_of(r.local_object_reference), r.optional)
            }),
        )
        .value(
            "secretRef",
            e.secret_ref.map_or(Value::Null, |r| {
                reference(name_of(r.local_object_reference), r.optional)
            }),
        )
        .done())
}

fn env_var(e: core::EnvVar) -> Result<Value> {
    let value_from = match e.value_from {
        None => Value::Null,
        Some(core::EnvVarSource {
            field_ref,
            resource_field_ref,
            config_map_key_ref,
            secret_key_ref,
            file_key_ref,
        }) => {
            none(file_key_ref.is_some(), "env[].valueFrom.fileKeyRef")?;
            let key_ref = |name: Option<String>, key: Option<String>, optional: Option<bool>| {
                Obj::default()
                    .string("name", name)
                    .string("key", key)
                    .bool("optional", optional)
                    .done()
            };
            Obj::default()
                .value("fieldRef", field_selector(field_ref))
                .value("resourceFieldRef", resource_selector(resource_field_ref))
                .value(
                    "configMapKeyRef",
                    config_map_key_ref.map_or(Value::Null, |r| {
                        key_ref(name_of(r.local_object_reference), r.key, r.optional)
                    }),
                )
                .value(
                    "secretKeyRef",
                    secret_key_ref.map_or(Value::Null, |r| {
                        key_ref(name_of(r.local_object_reference), r.key, r.optional)
                    }),
                )
                .done()
        }
    };
    // An empty value is kept: `value: ""` and no value differ to a container.
    let mut obj = Obj::default().string("name", e.name);
    if let Some(value) = e.value.filter(|v| !v.is_empty()) {
        obj = obj.value("value", value.into());
    }
    Ok(obj.value("valueFrom", value_from).done())
}

fn volume_mount(m: core::VolumeMount) -> Result<Value> {
    let core::VolumeMount {
        name,
        read_only,
        recursive_read_only,
        mount_path,
        sub_path,
        mount_propagation,
        sub_path_expr,
    } = m;
    Ok(Obj::default()
        .string("name", name)
        .bool_omitempty("readOnly", read_only)
        .string("recursiveReadOnly", recursive_read_only)
        .string("mountPath", mount_path)
        .string("subPath", sub_path)
        .string("mountPropagation", mount_propagation)
        .string("subPathExpr", sub_path_expr)
        .done())
}

fn exec(e: Option<core::ExecAction>) -> Value {
    e.map_or(Value::Null, |e| {
        Obj::default().strings("command", e.command).done()
    })
}

fn http_get(h: Option<core::HttpGetAction>) -> Value {
    h.map_or(Value::Null, |h| {
        let headers: Vec<Value> = h
            .http_headers
            .into_iter()
            .map(|x| {
                // A header's value may be empty; its name and value are both required.
                let mut o = Map::new();
                o.insert("name".into(), x.name.unwrap_or_default().into());
                o.insert("value".into(), x.value.unwrap_or_default().into());
                Value::Object(o)
            })
            .collect();
        Obj::default()
            .string("path", h.path)
            .value("port", int_or_string(h.port))
            .string("host", h.host)
            .string("scheme", h.scheme)
            .value("httpHeaders", headers.into())
            .done()
    })
}

fn tcp_socket(t: Option<core::TcpSocketAction>) -> Value {
    t.map_or(Value::Null, |t| {
        Obj::default()
            .value("port", int_or_string(t.port))
            .string("host", t.host)
            .done()
    })
}

fn probe(p: core::Probe) -> Result<Value> {
    let core::Probe {
        handler,
        initial_delay_seconds,
        timeout_seconds,
        period_seconds,
        success_threshold,
        failure_threshold,
        termination_grace_period_seconds,
    } = p;
    let mut obj = Obj::default();
    if let Some(core::ProbeHandler {
        exec: e,
        http_get: h,
        tcp_socket: t,
        grpc,
    }) = handler
    {
        obj = obj
            .value("exec", exec(e))
            .value("httpGet", http_get(h))
            .value("tcpSocket", tcp_socket(t))
            .value(
                "grpc",
                grpc.map_or(Value::Null, |g| {
                    let mut o = Map::new();
                    o.insert("port".into(), g.port.unwrap_or(0).into());
                    if let Some(service) = g.service {
                        o.insert("service".into(), service.into());
                    }
                    Value::Object(o)
                }),
            );
    }
    let int = |v: Option<i32>| v.map(i64::from);
    Ok(obj
        .int_omitempty("initialDelaySeconds", int(initial_delay_seconds))
        .int_omitempty("timeoutSeconds", int(timeout_seconds))
        .int_omitempty("periodSeconds", int(period_seconds))
        .int_omitempty("successThreshold", int(success_threshold))
        .int_omitempty("failureThreshold", int(failure_threshold))
        .int(
            "terminationGracePeriodSeconds",
            termination_grace_period_seconds,
        )
        .done())
}

fn container_lifecycle(l: core::Lifecycle) -> Result<Value> {
    let core::Lifecycle {
        post_start,
        pre_stop,
        stop_signal,
    } = l;
    none(stop_signal.is_some(), "containers[].lifecycle.stopSignal")?;
    let handler = |h: Option<core::LifecycleHandler>| {
        h.map_or(Value::Null, |h| {
            Obj::default()
                .value("exec", exec(h.exec))
                .value("httpGet", http_get(h.http_get))
                .value("tcpSocket", tcp_socket(h.tcp_socket))
                .value(
                    "sleep",
                    h.sleep.map_or(Value::Null, |s| {
                        let mut o = Map::new();
                        o.insert("seconds".into(), s.seconds.unwrap_or(0).into());
                        Value::Object(o)
                    }),
                )
                .done()
        })
    };
    Ok(Obj::default()
        .value("postStart", handler(post_start))
        .value("preStop", handler(pre_stop))
        .done())
}

fn security_context_json(sc: core::SecurityContext) -> Result<Value> {
    let core::SecurityContext {
        capabilities,
        privileged,
        se_linux_options,
        windows_options,
        run_as_user,
        run_as_group,
        run_as_non_root,
        read_only_root_filesystem,
        allow_privilege_escalation,
        proc_mount,
        seccomp_profile,
        app_armor_profile,
    } = sc;
    none(
        se_linux_options.is_some(),
        "containers[].securityContext.seLinuxOptions",
    )?;
    none(
        windows_options.is_some(),
        "containers[].securityContext.windowsOptions",
    )?;
    none(
        app_armor_profile.is_some(),
        "containers[].securityContext.appArmorProfile",
    )?;
    Ok(Obj::default()
        .value(
            "capabilities",
            capabilities.map_or(Value::Null, |c| {
                Obj::default()
                    .strings("add", c.add)
                    .strings("drop", c.drop)
                    .done()
            }),
        )
        .bool("privileged", privileged)
        .int("runAsUser", run_as_user)
        .int("runAsGroup", run_as_group)
        .bool("runAsNonRoot", run_as_non_root)
        .bool("readOnlyRootFilesystem", read_only_root_filesystem)
        .bool("allowPrivilegeEscalation", allow_privilege_escalation)
        .string("procMount", proc_mount)
        .value("seccompProfile", seccomp(seccomp_profile))
        .done())
}

//! `validateContainers` and `validateInitContainers`: what each container of a pod must be.

use std::collections::BTreeSet;

use serde_json::Value;

use super::json::{list, one_of, str_of};
use super::object_meta::dns_label_errors;
use crate::field::{Error as FieldError, Value as Bad};
use crate::version::Version;

const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const MESSAGE_POLICIES: [&str; 2] = ["File", "FallbackToLogsOnError"];
/// `supportedContainerRestartPolicies`, sorted as upstream lists them.
const CONTAINER_RESTART_POLICIES: [&str; 3] = ["Always", "Never", "OnFailure"];

/// A container's own fields: name, image, policies, ports and volume mounts (which must
/// name one of the pod's `volumes`).
pub(super) fn container(
    c: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    out: &mut Vec<FieldError>,
) {
    let name = str_of(c, "name");
    if name.is_empty() {
        out.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for message in dns_label_errors(name) {
            out.push(FieldError::invalid(
                format!("{path}.name"),
                Bad::str(name),
                message,
            ));
        }
    }
    if str_of(c, "image").is_empty() {
        out.push(FieldError::required(format!("{path}.image"), ""));
    }
    one_of(
        out,
        &format!("{path}.terminationMessagePolicy"),
        str_of(c, "terminationMessagePolicy"),
        &MESSAGE_POLICIES,
    );
    let pull = str_of(c, "imagePullPolicy");
    if !pull.is_empty() && !PULL_POLICIES.contains(&pull) {
        out.push(FieldError::not_supported(
            format!("{path}.imagePullPolicy"),
            Bad::str(pull),
            &PULL_POLICIES,
        ));
    }
    for (i, port) in list(c, "ports").iter().enumerate() {
        let n = port
            .get("containerPort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if !(1..=65535).contains(&n) {
            out.push(FieldError::invalid(
                format!("{path}.ports[{i}].containerPort"),
                Bad::plain(n),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    for (i, mount) in list(c, "volumeMounts").iter().enumerate() {
        let name = str_of(mount, "name");
        let at = format!("{path}.volumeMounts[{i}]");
        if name.is_empty() {
            out.push(FieldError::required(format!("{at}.name"), ""));
        } else if !volumes.contains(name) {
            out.push(FieldError {
                kind: crate::field::Kind::NotFound,
                field: format!("{at}.name"),
                value: Some(Bad::str(name)),
                detail: String::new(),
            });
        }
        if str_of(mount, "mountPath").is_empty() {
            out.push(FieldError::required(format!("{at}.mountPath"), ""));
        }
    }
}

/// A container's own `restartPolicy` and `restartPolicyRules`. Before 1.35
/// (`ContainerRestartRules` off) only an init container may set a policy, only `Always` (a
/// sidecar); from 1.35 any container may (`validateContainerRestartPolicy`), with rules
/// that restart it on given exit codes, except a sidecar, which has no rules before 1.36
/// (`RestartAllContainersOnContainerExits`). An init container that is not a sidecar has no
/// probes and no lifecycle hooks.
pub(super) fn restart_policy(
    c: &Value,
    path: &str,
    init: bool,
    version: Version,
    out: &mut Vec<FieldError>,
) {
    let policy = c.get("restartPolicy").and_then(Value::as_str);
    let rules = list(c, "restartPolicyRules");
    if version.container_restart_rules() {
        match (init, policy) {
            (true, None) if !rules.is_empty() => out.push(FieldError::required(
                format!("{path}.restartPolicy"),
                "must specify restartPolicy when restart rules are used",
            )),
            (true, None) => {}
            (true, Some("Always")) if !version.restart_all_containers() => {
                if !rules.is_empty() {
                    out.push(FieldError::forbidden(
                        format!("{path}.restartPolicyRules"),
                        "restartPolicyRules are not allowed for init containers with restart policy Always",
                    ));
                }
            }
            _ => restart_rules(policy, rules, path, version, out),
        }
    } else {
        match (init, policy) {
            (_, None) | (true, Some("Always")) => {}
            (true, Some(other)) => out.push(FieldError::not_supported(
                format!("{path}.restartPolicy"),
                Bad::str(other),
                &["Always"],
            )),
            (false, Some(_)) => out.push(FieldError::forbidden(
                format!("{path}.restartPolicy"),
                "may not be set for non-init containers",
            )),
        }
    }
    if init && policy != Some("Always") {
        for key in [
            "lifecycle",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
        ] {
            if c.get(key).is_some_and(|v| !v.is_null()) {
                out.push(FieldError::forbidden(
                    format!("{path}.{key}"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
        }
    }
}

/// `validateContainerRestartPolicy`: a policy upstream knows, at most 20 rules, each with a
/// known action and exit codes (`In` or `NotIn`, at most 255 values).
fn restart_rules(
    policy: Option<&str>,
    rules: &[Value],
    path: &str,
    version: Version,
    out: &mut Vec<FieldError>,
) {
    match policy {
        None if !rules.is_empty() => out.push(FieldError::required(
            format!("{path}.restartPolicy"),
            "must specify restartPolicy when restart rules are used",
        )),
        Some(p) if !CONTAINER_RESTART_POLICIES.contains(&p) => out.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            Bad::str(p),
            &CONTAINER_RESTART_POLICIES,
        )),
        _ => {}
    }
    if rules.len() > 20 {
        out.push(FieldError::too_many(
            format!("{path}.restartPolicyRules"),
            rules.len(),
            20,
        ));
    }
    let actions: &[&str] = if version.restart_all_containers() {
        &["Restart", "RestartAllContainers"]
    } else {
        &["Restart"]
    };
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{path}.restartPolicyRules[{i}]");
        let action = str_of(rule, "action");
        if !actions.contains(&action) {
            out.push(FieldError::not_supported(
                format!("{at}.action"),
                Bad::str(action),
                actions,
            ));
        }
        let Some(codes) = rule.get("exitCodes").filter(|v| !v.is_null()) else {
            out.push(FieldError::required(
                format!("{at}.exitCodes"),
                "must be specified",
            ));
            continue;
        };
        let operator = str_of(codes, "operator");
        if !["In", "NotIn"].contains(&operator) {
            out.push(FieldError::not_supported(
                format!("{at}.exitCodes.operator"),
                Bad::str(operator),
                &["In", "NotIn"],
            ));
        }
        let values = list(codes, "values").len();
        if values > 255 {
            out.push(FieldError::too_many(
                format!("{at}.exitCodes.values"),
                values,
                255,
            ));
        }
    }
}

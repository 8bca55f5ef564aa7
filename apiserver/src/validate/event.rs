//! `ValidateEventCreate`: the legacy checks every event gets, and the strict ones of
//! events created through `events.k8s.io/v1`. Events are stored in their core/v1 shape,
//! so the fields are named as there (`involvedObject`, `message`).

use serde_json::Value;

use crate::field::{Error as FieldError, Value as Bad};
use crate::meta;

use super::object_meta::dns_subdomain_errors;

/// Which API the event was created through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// `v1` (`/api/v1/…/events`): the legacy checks only.
    Core,
    /// `events.k8s.io/v1`: the legacy checks and the strict ones.
    EventsV1,
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn is_set(obj: &Value, pointer: &str) -> bool {
    !str_at(obj, pointer).is_empty()
}

/// The checks of a new event.
pub(super) fn create(obj: &Value, api: Api) -> Vec<FieldError> {
    let mut out = legacy(obj, api);
    if api == Api::Core {
        return out;
    }
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            out.push(FieldError::invalid(
                "series.count",
                Bad::str(""),
                "should be at least 2",
            ));
        }
        if !is_set(series, "/lastObservedTime") {
            out.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    if !is_set(obj, "/eventTime") {
        out.push(FieldError::required("eventTime", ""));
    }
    let kind = str_at(obj, "/type");
    if kind != "Normal" && kind != "Warning" {
        out.push(FieldError::invalid(
            "type",
            Bad::str(""),
            format!("has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if is_set(obj, &format!("/{field}")) {
            out.push(FieldError::invalid(
                field,
                Bad::str(""),
                "needs to be unset",
            ));
        }
    }
    if obj.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        out.push(FieldError::invalid(
            "count",
            Bad::str(""),
            "needs to be unset",
        ));
    }
    if is_set(obj, "/source/component") || is_set(obj, "/source/host") {
        out.push(FieldError::invalid(
            "source",
            Bad::str(""),
            "needs to be unset",
        ));
    }
    out
}

/// `legacyValidateEvent`.
fn legacy(obj: &Value, api: Api) -> Vec<FieldError> {
    let mut out = Vec::new();
    let namespace = meta::str_field(obj, "namespace");
    let involved = str_at(obj, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            Bad::str(involved),
            "does not match event.namespace",
        )
    };
    if !is_set(obj, "/eventTime") {
        if involved.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                out.push(mismatch());
            }
        } else if namespace != involved {
            out.push(mismatch());
        }
    } else {
        if involved.is_empty() && namespace != "default" && namespace != "kube-system" {
            out.push(mismatch());
        }
        let controller = match api {
            Api::Core => "reportingComponent",
            Api::EventsV1 => "reportingController",
        };
        if !is_set(obj, "/reportingComponent") {
            out.push(FieldError::required(controller, ""));
        }
        if !is_set(obj, "/reportingInstance") {
            out.push(FieldError::required("reportingInstance", ""));
        }
        if !is_set(obj, "/action") {
            out.push(FieldError::required("action", ""));
        }
        if !is_set(obj, "/reason") {
            out.push(FieldError::required("reason", ""));
        }
        for (field, limit) in [
            ("reportingInstance", 128),
            ("action", 128),
            ("reason", 128),
            ("message", 1024),
        ] {
            if str_at(obj, &format!("/{field}")).len() > limit {
                out.push(FieldError::invalid(
                    field,
                    Bad::str(""),
                    format!("can have at most {limit} characters"),
                ));
            }
        }
    }
    for message in dns_subdomain_errors(namespace) {
        out.push(FieldError::invalid(
            "namespace",
            Bad::str(namespace),
            message,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bare_v1_event_fails_as_upstreams() {
        let e = json!({"metadata": {"name": "e2", "namespace": "ns"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "X"});
        let errors: Vec<String> = create(&e, Api::EventsV1)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
                "eventTime: Required value",
                "type: Invalid value: \"\": has invalid value: ",
            ]
        );
        assert_eq!(create(&e, Api::Core).len(), 1);
    }
}

//! Peers: pods a case runs beside its pod, as upstream's tests run a handler
//! pod for HTTP hooks to call, and the references to them in the pod's
//! manifest. A string in the pod's manifest may hold `{{peers.NAME.podIP}}`:
//! the `create` step starts the peers, waits until they are Running and
//! Ready (upstream's `CreateSync`), and writes their addresses in before it
//! creates the pod.

use std::collections::HashMap;

use super::locate::{Anchor, Problem, problem};
use super::model::{Case, Step};

/// The fields of a peer a reference can name.
const FIELDS: &[&str] = &["podIP"];

/// One `{{…}}` in a string: `peers.NAME.FIELD`, or what is written instead.
fn references(text: &str) -> Vec<Result<(&str, &str), &str>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            found.push(Err(&rest[open..]));
            break;
        };
        let inner = after[..close].trim();
        let parsed = inner
            .strip_prefix("peers.")
            .and_then(|r| r.rsplit_once('.'))
            .filter(|(name, field)| !name.is_empty() && FIELDS.contains(field));
        found.push(parsed.ok_or(inner));
        rest = &after[close + 2..];
    }
    found
}

/// Every string in `value`, for checking or rewriting.
fn strings_mut(value: &mut serde_json::Value, visit: &mut dyn FnMut(&mut String)) {
    match value {
        serde_json::Value::String(s) => visit(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| strings_mut(v, visit)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| strings_mut(v, visit)),
        _ => {}
    }
}

/// Writes the peers' `values` (`NAME.FIELD` → value) into every reference in
/// `manifest`. The references were checked when the case was loaded.
pub fn substitute(manifest: &mut serde_json::Value, values: &HashMap<String, String>) {
    strings_mut(manifest, &mut |s| {
        if !s.contains("{{") {
            return;
        }
        let mut out = String::new();
        let mut rest = s.as_str();
        while let (Some(open), Some(close)) = (rest.find("{{"), rest.find("}}")) {
            let inner = rest[open + 2..close].trim();
            let key = inner.strip_prefix("peers.").unwrap_or(inner);
            out.push_str(&rest[..open]);
            out.push_str(values.get(key).map_or(inner, String::as_str));
            rest = &rest[close + 2..];
        }
        out.push_str(rest);
        *s = out;
    });
}

/// Checks the peers and the references to them.
pub(super) fn check(case: &Case, out: &mut Vec<Problem>) {
    let here = || Anchor::TopKey("peers");
    let mut names = Vec::new();
    for peer in &case.peers {
        let name = peer.metadata.name.as_deref().unwrap_or_default();
        if name.is_empty() || name == case.pod_name() || names.contains(&name) {
            out.push(problem(
                here(),
                format!(
                    "peer `{name}`: expected a name of its own (not the pod's, not another peer's)"
                ),
            ));
        }
        names.push(name);
        let spec = peer.spec.as_ref();
        if spec.is_none_or(|s| s.containers.is_empty()) {
            out.push(problem(here(), format!("peer `{name}` has no containers")));
        }
        if spec.is_some_and(|s| s.node_name.is_some()) || peer.metadata.namespace.is_some() {
            out.push(problem(
                here(),
                format!("peer `{name}` sets nodeName or namespace: the harness sets them"),
            ));
        }
    }
    if !case.peers.is_empty() && !case.steps.iter().any(|s| matches!(s, Step::Create)) {
        out.push(problem(
            here(),
            "peers without a `create` step: nothing starts them",
        ));
    }
    let Ok(mut manifest) = serde_json::to_value(&case.pod) else {
        return;
    };
    strings_mut(&mut manifest, &mut |s| {
        for reference in references(s) {
            let message = match reference {
                Ok((name, _)) if names.contains(&name) => continue,
                Ok((name, _)) => format!(
                    "`{{{{peers.{name}…}}}}`: no peer `{name}`; expected one of: {}",
                    names.join(", ")
                ),
                Err(written) => format!(
                    "`{{{{{written}}}}}`: expected `{{{{peers.NAME.FIELD}}}}` with FIELD one of {}",
                    FIELDS.join(", ")
                ),
            };
            out.push(problem(Anchor::TopKey("pod"), message));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_and_replaced() {
        assert_eq!(
            references("curl http://{{peers.handler.podIP}}:8080/ {{ peers.b.podIP }}"),
            [Ok(("handler", "podIP")), Ok(("b", "podIP"))]
        );
        assert_eq!(
            references("{{peers.a.hostIP}} {{x"),
            [Err("peers.a.hostIP"), Err("{{x")]
        );
        let mut manifest = serde_json::json!({
            "host": "{{peers.handler.podIP}}",
            "command": ["sh", "-c", "curl http://{{ peers.handler.podIP }}:8080/echo"],
        });
        let values = HashMap::from([("handler.podIP".to_owned(), "127.0.0.9".to_owned())]);
        substitute(&mut manifest, &values);
        assert_eq!(
            manifest,
            serde_json::json!({
                "host": "127.0.0.9",
                "command": ["sh", "-c", "curl http://127.0.0.9:8080/echo"],
            })
        );
    }
}

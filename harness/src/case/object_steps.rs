//! Steps that change objects while a case runs: `apply`, `patch`, `deleteObject`.

use std::fmt;

use serde::de::MapAccess;
use serde::{Deserialize, Serialize};

use super::tagged::{TaggedEnum, tagged_deserialize};

/// `patch`: a patch of the case's pod (or one of its ConfigMaps or Secrets).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchStep {
    /// What to patch: `pod` (default), `configMap/NAME` or `secret/NAME`.
    #[serde(default)]
    pub object: Target,
    /// The patch type (default `strategic`, as `kubectl patch`).
    #[serde(default, rename = "type")]
    pub patch_type: PatchType,
    /// Patch a subresource of the pod instead of the object: `status` (a readiness gate's
    /// condition) or `resize` (its containers' resources, in place).
    #[serde(default)]
    pub subresource: Option<Subresource>,
    /// The patch document: a mapping, or for `json` a list of operations.
    pub patch: serde_json::Value,
}

/// The patch types the API accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PatchType {
    /// `application/strategic-merge-patch+json`.
    #[default]
    Strategic,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// Not a patch: read the object (through the subresource), merge the document into it
    /// (RFC 7386) and write it back whole with `PUT`, as a client's get-modify-update does.
    Update,
}

/// A subresource a patch can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Subresource {
    /// `…/status`.
    Status,
    /// `pods/…/resize`: only the containers' resources and resize policies change.
    Resize,
}

impl Subresource {
    /// The URL's last segment.
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Resize => "resize",
        }
    }
}

/// An object of the case: its pod, or a ConfigMap or Secret in its namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Target {
    /// The case's pod.
    #[default]
    Pod,
    /// A ConfigMap, by name.
    ConfigMap(String),
    /// A Secret, by name.
    Secret(String),
}

impl TryFrom<String> for Target {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let expected = "expected `pod`, `configMap/NAME` or `secret/NAME`";
        match text.split_once('/') {
            None if text == "pod" => Ok(Target::Pod),
            Some(("configMap", name)) if !name.is_empty() => Ok(Target::ConfigMap(name.into())),
            Some(("secret", name)) if !name.is_empty() => Ok(Target::Secret(name.into())),
            _ => Err(format!("object `{text}`: {expected}")),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Pod => f.write_str("pod"),
            Target::ConfigMap(name) => write!(f, "configmap/{name}"),
            Target::Secret(name) => write!(f, "secret/{name}"),
        }
    }
}

/// `deleteObject`: a ConfigMap or Secret of the case, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteObject {
    /// `deleteObject: {configMap: NAME}`.
    ConfigMap(String),
    /// `deleteObject: {secret: NAME}`.
    Secret(String),
}

impl DeleteObject {
    /// The object as a [`Target`].
    pub fn target(&self) -> Target {
        match self {
            DeleteObject::ConfigMap(name) => Target::ConfigMap(name.clone()),
            DeleteObject::Secret(name) => Target::Secret(name.clone()),
        }
    }
}

impl TaggedEnum for DeleteObject {
    const WHAT: &'static str = "an object to delete";
    const TAGS: &'static [&'static str] = &["configMap", "secret"];
    fn unit(_: &str) -> Option<Self> {
        None
    }
    fn with_value<'de, A: MapAccess<'de>>(
        tag: &str,
        map: &mut A,
    ) -> Result<Option<Self>, A::Error> {
        Ok(match tag {
            "configMap" => Some(DeleteObject::ConfigMap(map.next_value()?)),
            "secret" => Some(DeleteObject::Secret(map.next_value()?)),
            _ => None,
        })
    }
}
tagged_deserialize!(DeleteObject);

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::case::Step;
    use crate::case::load::parse_str;

    const CASE: &str = r#"name: steps
description: "object steps"
pod:
  metadata:
    name: p
  spec:
    containers:
      - name: c
        image: busybox:1.36
        command: [sh, -c, "echo hello; sleep 600"]
steps:
  - apply: {configMap: {metadata: {name: cfg}, data: {a: "1"}}}
  - create
  - patch: {patch: {spec: {activeDeadlineSeconds: 5}}}
  - patch: {object: configMap/cfg, type: merge, patch: {data: {a: "2"}}}
  - patch: {subresource: status, type: json, patch: [{op: add, path: /status/conditions/-, value: {type: x, status: "True"}}]}
  - deleteObject: {configMap: cfg}
  - expectEvents: {events: [{reason: Pulled, type: Normal}], never: [{reason: Failed}]}
  - expectLogs: {contains: hello, matches: "^hello"}
"#;

    fn errors(text: &str) -> String {
        parse_str(Path::new("cases/x/steps.yaml"), text, "steps")
            .expect_err("must be rejected")
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn every_object_step_parses() {
        let case = parse_str(Path::new("cases/x/steps.yaml"), CASE, "steps").expect("valid");
        let kinds: Vec<_> = case.steps.iter().map(Step::kind).collect();
        assert_eq!(
            kinds,
            [
                "apply",
                "create",
                "patch",
                "patch",
                "patch",
                "deleteObject",
                "expectEvents",
                "expectLogs"
            ]
        );
        assert_eq!(case.created_objects().len(), 1);
    }

    #[test]
    fn bad_object_steps_are_located_and_explained() {
        let bad_target = errors(&CASE.replace("object: configMap/cfg", "object: deployment/x"));
        assert!(
            bad_target.starts_with("cases/x/steps.yaml:15:")
                && bad_target.contains("expected `pod`, `configMap/NAME` or `secret/NAME`"),
            "{bad_target}"
        );
        let json = errors(&CASE.replace(
            r#"patch: [{op: add, path: /status/conditions/-, value: {type: x, status: "True"}}]"#,
            "patch: {a: 1}",
        ));
        assert!(
            json.contains("a list of operations for `type: json`"),
            "{json}"
        );
        let status = errors(&CASE.replace(
            "{object: configMap/cfg, type: merge",
            "{object: configMap/cfg, subresource: status, type: merge",
        ));
        assert!(
            status.contains("configmap/cfg has no status subresource"),
            "{status}"
        );
        let container =
            errors(&CASE.replace("{contains: hello,", "{container: d, contains: hello,"));
        assert!(
            container.starts_with("cases/x/steps.yaml:19:3:")
                && container.contains("no container `d` in the pod: expected one of [c]"),
            "{container}"
        );
        let regex = errors(&CASE.replace("matches: \"^hello\"", "matches: \"(\""));
        assert!(
            regex.contains("matches: invalid regular expression"),
            "{regex}"
        );
        let nothing =
            errors(&CASE.replace("{contains: hello, matches: \"^hello\"}", "{previous: true}"));
        assert!(nothing.contains("`expectLogs` checks nothing"), "{nothing}");
        let early = errors(&CASE.replace("  - create\n", "").replace(
            "  - apply:",
            "  - patch: {patch: {}}\n  - create\n  - apply:",
        ));
        assert!(
            early.contains("`patch` of the pod before `create`"),
            "{early}"
        );
        let delete =
            errors(&CASE.replace("deleteObject: {configMap: cfg}", "deleteObject: {pod: p}"));
        assert!(delete.contains("unknown variant `pod`"), "{delete}");
    }
}

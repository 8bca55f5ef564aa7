//! Reading case files: parse, validate, and report every broken file with `file:line:column`.

use std::fmt;
use std::path::{Path, PathBuf};

use super::model::{Case, Fault, Requirement, Step};
use super::pattern::{ContainerPattern, PodPattern};

/// The name of a case in reports and test names: `area::case`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaseId {
    /// The directory under `cases/` (e.g. `deletion`).
    pub area: String,
    /// The file stem (e.g. `graceful-term-trap`).
    pub name: String,
}

impl fmt::Display for CaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.area, self.name)
    }
}

/// A case read from its file.
#[derive(Debug, Clone)]
pub struct LoadedCase {
    /// `area::name`.
    pub id: CaseId,
    /// The file it came from.
    pub path: PathBuf,
    /// The parsed case.
    pub case: Case,
}

/// A problem with a case file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file or directory could not be read.
    #[error("{}: cannot read", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid case; names the place and what was expected.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The case file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// All cases of a directory (`<dir>/<area>/<name>.yaml`), sorted by id, and every file that failed.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Valid cases, sorted by `area::name`.
    pub cases: Vec<LoadedCase>,
    /// One error per broken file (several per file when several independent checks fail).
    pub errors: Vec<Error>,
}

/// Loads every `*.yaml` (and `*.yml`) under `dir/<area>/`; never stops at the first broken file.
pub fn load_dir(dir: &Path) -> Loaded {
    let mut loaded = Loaded::default();
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(areas) => {
            for area in areas.flatten() {
                let area_path = area.path();
                if !area_path.is_dir() {
                    continue;
                }
                match std::fs::read_dir(&area_path) {
                    Ok(entries) => {
                        for entry in entries.flatten() {
                            let p = entry.path();
                            let ext = p.extension().and_then(|e| e.to_str());
                            if p.is_file() && matches!(ext, Some("yaml" | "yml")) {
                                files.push(p);
                            }
                        }
                    }
                    Err(source) => loaded.errors.push(Error::Read {
                        path: area_path,
                        source,
                    }),
                }
            }
        }
        Err(source) => loaded.errors.push(Error::Read {
            path: dir.to_path_buf(),
            source,
        }),
    }
    files.sort();
    for file in files {
        match load_file(&file) {
            Ok(case) => loaded.cases.push(case),
            Err(errors) => loaded.errors.extend(errors),
        }
    }
    loaded.cases.sort_by(|a, b| a.id.cmp(&b.id));
    loaded
}

/// Loads one case file; its area is its parent directory's name.
pub fn load_file(path: &Path) -> Result<LoadedCase, Vec<Error>> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![Error::Read {
            path: path.to_path_buf(),
            source,
        }]
    })?;
    let area = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("cases")
        .to_string();
    let stem = path
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let case = parse_str(path, &text, &stem)?;
    Ok(LoadedCase {
        id: CaseId { area, name: stem },
        path: path.to_path_buf(),
        case,
    })
}

/// Parses and validates case text; `stem` is the file stem the `name` must equal.
pub fn parse_str(path: &Path, text: &str, stem: &str) -> Result<Case, Vec<Error>> {
    let case: Case = serde_yaml::from_str(text).map_err(|e| vec![from_yaml(path, &e)])?;
    let mut problems = validate(&case, stem);
    problems.extend(unknown_manifest_fields(text, &case));
    if problems.is_empty() {
        return Ok(case);
    }
    Err(problems
        .into_iter()
        .map(|p| {
            let (line, column) = p.anchor.locate(text);
            Error::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                message: p.message,
            }
        })
        .collect())
}

fn from_yaml(path: &Path, e: &serde_yaml::Error) -> Error {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    let mut message = e.to_string();
    // serde_yaml appends " at line L column C"; the prefix already says where.
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    if message.starts_with("missing field") || message.contains(": missing field") {
        message.push_str(" (see cases/README.md for the case format)");
    }
    Error::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// Fields of the pod manifest that the Kubernetes types do not know (k8s-openapi ignores them
/// silently, so `restartPolcy: Never` would quietly run with `Always`).
fn unknown_manifest_fields(text: &str, case: &Case) -> Vec<Problem> {
    let Ok(raw) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let Some(raw_pod) = raw.get("pod") else {
        return Vec::new();
    };
    let Ok(raw_pod) = serde_json::to_value(raw_pod) else {
        return Vec::new();
    };
    let Ok(typed) = serde_json::to_value(&*case.pod) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    diff_keys(&raw_pod, &typed, "pod", &mut unknown);
    unknown
        .into_iter()
        .map(|(path, key)| {
            problem(
                Anchor::Key(key.clone()),
                format!("{path}: unknown field `{key}` in the Pod manifest (a typo? Kubernetes would ignore it)"),
            )
        })
        .collect()
}

fn diff_keys(
    raw: &serde_json::Value,
    typed: &serde_json::Value,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, v) in r {
                if v.is_null() {
                    continue;
                }
                match t.get(k) {
                    Some(tv) => diff_keys(v, tv, &format!("{path}.{k}"), out),
                    // Free-form maps (labels, annotations) come back whole, so a missing key is unknown.
                    None => out.push((path.to_string(), k.clone())),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, (rv, tv)) in r.iter().zip(t.iter()).enumerate() {
                diff_keys(rv, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Where in the text a semantic problem is reported.
enum Anchor {
    /// The first line where `key:` is written.
    Key(String),
    /// A top-level key (`name:`, `pod:`).
    TopKey(&'static str),
    /// The n-th item of the top-level `steps:` list.
    Step(usize),
}

impl Anchor {
    fn locate(&self, text: &str) -> (usize, usize) {
        match self {
            Anchor::Key(key) => text
                .lines()
                .enumerate()
                .find_map(|(i, l)| {
                    let trimmed = l.trim_start().trim_start_matches("- ");
                    trimmed
                        .starts_with(&format!("{key}:"))
                        .then(|| (i + 1, l.len() - trimmed.len() + 1))
                })
                .unwrap_or((1, 1)),
            Anchor::TopKey(key) => text
                .lines()
                .position(|l| l.starts_with(&format!("{key}:")))
                .map(|i| (i + 1, 1))
                .unwrap_or((1, 1)),
            Anchor::Step(n) => {
                let lines: Vec<&str> = text.lines().collect();
                let Some(start) = lines.iter().position(|l| l.starts_with("steps:")) else {
                    return (1, 1);
                };
                let mut indent = None;
                let mut seen = 0;
                for (i, line) in lines.iter().enumerate().skip(start + 1) {
                    let trimmed = line.trim_start();
                    if trimmed.is_empty() || trimmed.starts_with('#') {
                        continue;
                    }
                    let this_indent = line.len() - trimmed.len();
                    if this_indent == 0 && !trimmed.starts_with('-') {
                        break;
                    }
                    if trimmed.starts_with('-') && indent.is_none_or(|ind| ind == this_indent) {
                        indent = Some(this_indent);
                        if seen == *n {
                            return (i + 1, this_indent + 1);
                        }
                        seen += 1;
                    }
                }
                (start + 1, 1)
            }
        }
    }
}

struct Problem {
    anchor: Anchor,
    message: String,
}

fn problem(anchor: Anchor, message: impl Into<String>) -> Problem {
    Problem {
        anchor,
        message: message.into(),
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn validate(case: &Case, stem: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    if case.name != stem {
        out.push(problem(
            Anchor::TopKey("name"),
            format!(
                "name `{}` differs from the file name: expected `{stem}` (cases are named by their file)",
                case.name
            ),
        ));
    }
    if case.description.trim().is_empty() {
        out.push(problem(
            Anchor::TopKey("description"),
            "description is empty: expected the upstream test or behaviour the case mirrors",
        ));
    }
    let pod_name = case.pod.metadata.name.as_deref().unwrap_or_default();
    if !is_dns_label(pod_name) {
        out.push(problem(
            Anchor::TopKey("pod"),
            format!(
                "pod.metadata.name `{pod_name}`: expected a DNS label (lowercase letters, digits, `-`, at most 63)"
            ),
        ));
    }
    if case.pod.metadata.namespace.is_some() {
        out.push(problem(
            Anchor::TopKey("pod"),
            "pod.metadata.namespace is set: expected none, the harness gives each case its own namespace",
        ));
    }
    let spec = case.pod.spec.as_ref();
    let containers: Vec<&str> = spec
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let init_containers: Vec<&str> = spec
        .and_then(|s| s.init_containers.as_ref())
        .map(|v| v.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    match spec {
        None => out.push(problem(
            Anchor::TopKey("pod"),
            "pod.spec is missing: expected a pod spec with at least one container",
        )),
        Some(spec) => {
            if spec.containers.is_empty() {
                out.push(problem(
                    Anchor::TopKey("pod"),
                    "pod.spec.containers is empty: expected at least one container",
                ));
            }
            if spec.node_name.is_some() {
                out.push(problem(
                    Anchor::TopKey("pod"),
                    "pod.spec.nodeName is set: expected none, the harness binds the pod to the node under test",
                ));
            }
            for c in spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
            {
                if c.image.as_deref().unwrap_or_default().is_empty() {
                    out.push(problem(
                        Anchor::TopKey("pod"),
                        format!(
                            "container `{}` has no image: expected e.g. `image: busybox:1.36`",
                            c.name
                        ),
                    ));
                }
            }
        }
    }
    for object in &case.objects {
        let meta = match object {
            super::model::Object::ConfigMap(c) => &c.metadata,
            super::model::Object::Secret(s) => &s.metadata,
        };
        if !meta.name.as_deref().is_some_and(is_dns_label) {
            out.push(problem(
                Anchor::TopKey("objects"),
                format!("{}: expected metadata.name, a DNS label", object.describe()),
            ));
        }
        if meta.namespace.is_some() {
            out.push(problem(
                Anchor::TopKey("objects"),
                format!(
                    "{}: metadata.namespace is set: expected none, the harness sets it",
                    object.describe()
                ),
            ));
        }
    }
    let mut created = false;
    for (i, step) in case.steps.iter().enumerate() {
        let here = || Anchor::Step(i);
        match step {
            Step::Create => {
                if created {
                    out.push(problem(here(), "a second `create`: expected one per case"));
                }
                created = true;
            }
            Step::Delete(d) => {
                if !created {
                    out.push(problem(here(), "`delete` before `create`"));
                }
                if d.grace_period_seconds.is_some_and(|g| g < 0) {
                    out.push(problem(here(), "gracePeriodSeconds: expected 0 or more"));
                }
            }
            Step::RemoveFinalizers => {
                if !created {
                    out.push(problem(here(), "`removeFinalizers` before `create`"));
                }
            }
            Step::Fault(fault) => {
                if !case.requires.contains(&Requirement::RuntimeControl) {
                    out.push(problem(
                        here(),
                        "a `fault` step needs `requires: [runtime-control]` (setups without runtime control ignore the case)",
                    ));
                }
                if let Fault::Kill(kill) = fault
                    && !containers.contains(&kill.container.as_str())
                    && !init_containers.contains(&kill.container.as_str())
                {
                    out.push(problem(
                        here(),
                        format!(
                            "kill: no container `{}` in the pod: expected one of {}",
                            kill.container,
                            containers.join(", ")
                        ),
                    ));
                }
            }
            Step::Wait(_) | Step::ExpectNode(_) => {}
            Step::ExpectRuntime(_) => {
                if !case.requires.contains(&Requirement::RuntimeControl) {
                    out.push(problem(
                        here(),
                        "an `expectRuntime` step needs `requires: [runtime-control]`",
                    ));
                }
            }
            Step::Expect(expect) => {
                if !created {
                    out.push(problem(
                        here(),
                        "`expect` before `create`: expected a `create` step first",
                    ));
                }
                if expect.states.is_empty() && expect.never.is_empty() {
                    out.push(problem(
                        here(),
                        "`expect` with neither `states` nor `never`",
                    ));
                }
                if !expect.never.is_empty() && expect.states.is_empty() && expect.hold.is_none() {
                    out.push(problem(
                        here(),
                        "`never` without `states` needs `hold: <duration>`: how long to watch",
                    ));
                }
                for (j, p) in expect.states.iter().chain(expect.never.iter()).enumerate() {
                    let which = if j < expect.states.len() {
                        format!("states[{j}]")
                    } else {
                        format!("never[{}]", j - expect.states.len())
                    };
                    check_pattern(p, &which, &containers, &init_containers, i, &mut out);
                }
                for (j, p) in expect.never.iter().enumerate() {
                    if p.gone || p.within.is_some() {
                        out.push(problem(
                            here(),
                            format!(
                                "never[{j}]: `gone` and `within` do not apply to `never` patterns"
                            ),
                        ));
                    }
                }
            }
        }
    }
    if !created {
        out.push(problem(
            Anchor::TopKey("steps"),
            "no `create` step: expected one",
        ));
    }
    out
}

fn check_pattern(
    p: &PodPattern,
    which: &str,
    containers: &[&str],
    init_containers: &[&str],
    step: usize,
    out: &mut Vec<Problem>,
) {
    if p.gone && p.checks_fields() {
        out.push(problem(
            Anchor::Step(step),
            format!("{which}: `gone: true` cannot be combined with other fields (a removed pod has no state)"),
        ));
    }
    if !p.gone && !p.checks_fields() {
        out.push(problem(
            Anchor::Step(step),
            format!("{which}: an empty pattern: expected at least one of phase, conditions, containers, initContainers, reason, message, deleting, hasPodIp, gone"),
        ));
    }
    for (names, map, field) in [
        (containers, &p.containers, "containers"),
        (init_containers, &p.init_containers, "initContainers"),
    ] {
        for (name, cp) in map {
            if !names.contains(&name.as_str()) {
                out.push(problem(
                    Anchor::Step(step),
                    format!(
                        "{which}.{field}: no container `{name}` in the pod's {field}: expected one of [{}]",
                        names.join(", ")
                    ),
                ));
            }
            if *cp == ContainerPattern::default() {
                out.push(problem(
                    Anchor::Step(step),
                    format!("{which}.{field}.{name}: an empty container pattern"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"name: good
description: "Container Runtime blackbox: exit code"
tags: [lifecycle]
requires: [runtime-control]
timeout: 30s
pod:
  metadata:
    name: p
  spec:
    restartPolicy: Never
    containers:
      - name: c
        image: busybox:1.36
        command: [sh, -c, "exit 3"]
steps:
  - create
  - expect:
      within: 20s
      states:
        - phase: Failed
          containers:
            c: {state: terminated, exitCode: 3, reason: Error}
      never:
        - phase: Succeeded
  - fault: {kill: {container: c}}
  - delete: {gracePeriodSeconds: 1}
  - wait: 1s
  - expectNode:
      conditions:
        Ready: {status: "True"}
      capacity: [cpu]
  - expect:
      states:
        - gone: true
"#;

    fn parse(text: &str, stem: &str) -> Result<Case, Vec<Error>> {
        parse_str(Path::new("cases/x/case.yaml"), text, stem)
    }

    fn one_error(text: &str, stem: &str) -> String {
        let errors = parse(text, stem).expect_err("case must be rejected");
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn good_case_parses_with_every_step_kind() {
        let case = parse(GOOD, "good").expect("valid");
        let kinds: Vec<_> = case.steps.iter().map(Step::kind).collect();
        assert_eq!(
            kinds,
            [
                "create",
                "expect",
                "fault",
                "delete",
                "wait",
                "expectNode",
                "expect"
            ]
        );
        assert_eq!(case.pod_name(), "p");
    }

    #[test]
    fn unknown_field_names_line_column_and_expected_fields() {
        let text = GOOD.replace("exitCode: 3", "exitCod: 3");
        let msg = one_error(&text, "good");
        assert!(msg.starts_with("cases/x/case.yaml:22:36:"), "{msg}");
        assert!(msg.contains("unknown field `exitCod`"), "{msg}");
        assert!(msg.contains("`exitCode`"), "{msg}");
    }

    #[test]
    fn unknown_step_lists_valid_steps() {
        let text = GOOD.replace("  - create\n", "  - creat\n");
        let msg = one_error(&text, "good");
        assert!(msg.starts_with("cases/x/case.yaml:16:5:"), "{msg}");
        assert!(msg.contains("unknown variant `creat`"), "{msg}");
        assert!(msg.contains("`expectNode`"), "{msg}");
    }

    #[test]
    fn bad_phase_and_duration_are_located() {
        let msg = one_error(&GOOD.replace("phase: Failed", "phase: Done"), "good");
        assert!(
            msg.contains(":20:") && msg.contains("unknown variant `Done`"),
            "{msg}"
        );
        let msg = one_error(&GOOD.replace("within: 20s", "within: 20"), "good");
        assert!(
            msg.contains(":18:") && msg.contains("unit is missing"),
            "{msg}"
        );
    }

    #[test]
    fn step_with_two_keys_is_rejected() {
        let text = GOOD.replace("  - wait: 1s\n", "  - wait: 1s\n    delete: {}\n");
        let msg = one_error(&text, "good");
        assert!(msg.contains("exactly one key"), "{msg}");
    }

    #[test]
    fn semantic_errors_are_all_reported_with_locations() {
        let text = GOOD
            .replace("requires: [runtime-control]\n", "")
            .replace("c: {state: terminated", "cc: {state: terminated")
            .replace("name: good", "name: other");
        let errors = parse(&text, "good").expect_err("invalid");
        let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(all.len(), 3, "{all:#?}");
        assert!(
            all[0].starts_with("cases/x/case.yaml:1:1: name `other`"),
            "{all:#?}"
        );
        assert!(
            all.iter()
                .any(|m| m.contains("no container `cc`") && m.contains(":16:")),
            "{all:#?}"
        );
        assert!(
            all.iter()
                .any(|m| m.contains("requires: [runtime-control]") && m.contains(":24:")),
            "{all:#?}"
        );
    }

    #[test]
    fn gone_with_fields_and_empty_patterns_are_rejected() {
        let text = GOOD.replace(
            "        - gone: true\n",
            "        - gone: true\n          phase: Failed\n",
        );
        assert!(one_error(&text, "good").contains("`gone: true` cannot be combined"));
        let text = GOOD.replace("        - gone: true\n", "        - {}\n");
        assert!(one_error(&text, "good").contains("an empty pattern"));
    }

    #[test]
    fn unknown_pod_manifest_fields_are_reported() {
        let text = GOOD.replace("restartPolicy: Never", "restartPolcy: Never");
        let msg = one_error(&text, "good");
        assert!(
            msg.starts_with("cases/x/case.yaml:10:5: pod.spec: unknown field `restartPolcy`"),
            "{msg}"
        );
        let text = GOOD.replace(
            "        image: busybox:1.36\n",
            "        image: busybox:1.36\n        comand: [x]\n",
        );
        let msg = one_error(&text, "good");
        assert!(
            msg.contains("pod.spec.containers[0]: unknown field `comand`"),
            "{msg}"
        );
    }

    #[test]
    fn objects_need_names() {
        let text = GOOD.replace(
            "steps:\n",
            "objects:\n  - configMap: {data: {k: v}}\n  - secret: {metadata: {name: s}}\nsteps:\n",
        );
        let msg = one_error(&text, "good");
        assert!(
            msg.contains("configmap/<unnamed>: expected metadata.name"),
            "{msg}"
        );
        let text = GOOD.replace(
            "steps:\n",
            "objects:\n  - configMap: {metadata: {name: c}, data: {k: v}}\nsteps:\n",
        );
        assert!(parse(&text, "good").is_ok());
        let text = GOOD.replace("steps:\n", "objects:\n  - configmap: {}\nsteps:\n");
        assert!(
            one_error(&text, "good")
                .contains("unknown variant `configmap`, expected `configMap` or `secret`")
        );
    }

    #[test]
    fn syntax_error_is_located() {
        let msg = one_error("name: x\nsteps: [\n", "x");
        assert!(msg.starts_with("cases/x/case.yaml:3:1:"), "{msg}");
    }

    #[test]
    fn missing_field_is_reported() {
        let msg = one_error("name: x\ndescription: d\nsteps: []\n", "x");
        assert!(msg.contains("missing field `pod`"), "{msg}");
    }

    #[test]
    fn load_dir_reports_every_broken_file() {
        let dir = tempfile::tempdir().unwrap();
        let area = dir.path().join("area");
        std::fs::create_dir(&area).unwrap();
        std::fs::write(area.join("good.yaml"), GOOD).unwrap();
        std::fs::write(
            area.join("bad1.yaml"),
            GOOD.replace("name: good", "name: bad1")
                .replace("- create\n", "- crate\n"),
        )
        .unwrap();
        std::fs::write(area.join("bad2.yaml"), "name: [").unwrap();
        std::fs::write(area.join("notes.txt"), "ignored").unwrap();
        let loaded = load_dir(dir.path());
        assert_eq!(loaded.cases.len(), 1);
        assert_eq!(loaded.cases[0].id.to_string(), "area::good");
        assert_eq!(loaded.errors.len(), 2, "{:?}", loaded.errors);
        assert!(loaded.errors[0].to_string().contains("bad1.yaml:16:5"));
        assert!(loaded.errors[1].to_string().contains("bad2.yaml:1:"));
    }
}

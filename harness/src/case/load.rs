//! Reading case files: parse, validate, and report every broken file with `file:line:column`.

use std::fmt;
use std::path::{Path, PathBuf};

use super::features::{FileError, Taxonomy};
use super::locate::Anchor;
use super::manifest::unknown_manifest_fields;
use super::model::Case;
use super::validate::validate;

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
    /// The feature taxonomy (`features.yaml`) is broken.
    #[error(transparent)]
    Taxonomy(#[from] FileError),
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
    /// The directory's feature taxonomy (`features.yaml`), if it has one.
    pub taxonomy: Option<Taxonomy>,
}

/// Files directly in the cases directory that are not cases.
const NOT_CASES: &[&str] = &["coverage.yaml", super::features::FILE];

/// Loads every `*.yaml` (and `*.yml`) under `dir/<area>/`, and those directly in `dir`
/// (their area from their `area:` field, default `misc`); never stops at the first broken file.
pub fn load_dir(dir: &Path) -> Loaded {
    let mut loaded = Loaded::default();
    let taxonomy = match Taxonomy::load(dir) {
        Ok(taxonomy) => taxonomy,
        Err(error) => {
            loaded.errors.push(Error::Taxonomy(error));
            None
        }
    };
    // (file, the area folder it is in: None directly in `dir`)
    let mut files: Vec<(PathBuf, Option<String>)> = Vec::new();
    let read = |path: &Path, errors: &mut Vec<Error>| match std::fs::read_dir(path) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(source) => {
            errors.push(Error::Read {
                path: path.to_path_buf(),
                source,
            });
            Vec::new()
        }
    };
    for path in read(dir, &mut loaded.errors) {
        if path.is_dir() {
            let area = path.file_name().and_then(|n| n.to_str()).map(str::to_owned);
            for file in read(&path, &mut loaded.errors) {
                if is_case_file(&file) {
                    files.push((file, area.clone()));
                }
            }
        } else if is_case_file(&path)
            && !path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| NOT_CASES.contains(&n))
        {
            files.push((path, None));
        }
    }
    files.sort();
    for (file, folder) in files {
        match load_placed(&file, folder.as_deref(), taxonomy.as_ref()) {
            Ok(case) => loaded.cases.push(case),
            Err(errors) => loaded.errors.extend(errors),
        }
    }
    loaded.cases.sort_by(|a, b| a.id.cmp(&b.id));
    loaded.taxonomy = taxonomy;
    loaded
}

fn is_case_file(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str());
    path.is_file() && matches!(ext, Some("yaml" | "yml"))
}

/// Loads one case file of an area folder; its area is that folder's name.
/// Its features are checked against the taxonomy of the cases directory
/// above the folder, if it has one.
pub fn load_file(path: &Path) -> Result<LoadedCase, Vec<Error>> {
    let folder = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("cases");
    let dir = path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let taxonomy = Taxonomy::load(dir).map_err(|e| vec![Error::Taxonomy(e)])?;
    load_placed(path, Some(folder), taxonomy.as_ref())
}

/// Loads a case file found in the area folder `folder`, or directly in the cases directory (`None`).
fn load_placed(
    path: &Path,
    folder: Option<&str>,
    taxonomy: Option<&Taxonomy>,
) -> Result<LoadedCase, Vec<Error>> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![Error::Read {
            path: path.to_path_buf(),
            source,
        }]
    })?;
    let stem = path
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let case = parse_str(path, &text, &stem)?;
    if let Some(message) = taxonomy.and_then(|t| t.check(&case.features)) {
        let anchor = if case.features.is_empty() {
            "name"
        } else {
            "features"
        };
        let (line, column) = Anchor::TopKey(anchor).locate(&text);
        return Err(vec![Error::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }]);
    }
    let area = match (folder, case.area.as_deref()) {
        (Some(folder), Some(declared)) if folder != declared => {
            let (line, column) = Anchor::TopKey("area").locate(&text);
            return Err(vec![Error::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                message: format!(
                    "area `{declared}` differs from the folder `{folder}`: expected `{folder}` or no `area` (a case's area is its folder)"
                ),
            }]);
        }
        (Some(folder), _) => folder.to_string(),
        (None, declared) => declared.unwrap_or("misc").to_string(),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Step;

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
    fn bounds_from_below_must_leave_time_and_count_from_an_earlier_pattern() {
        let text = GOOD.replace(
            "      within: 20s\n      states:\n        - phase: Failed\n",
            "      within: 20s\n      states:\n        - phase: Failed\n          after: 20s\n          from: 0\n",
        );
        let errors = parse(&text, "good").expect_err("invalid");
        let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(all.len(), 2, "{all:#?}");
        assert!(
            all.iter()
                .any(|m| m.contains("states[0]: `after: 20s` is not less than `within: 20s`")),
            "{all:#?}"
        );
        assert!(
            all.iter()
                .any(|m| m.contains("states[0]: `from: 0`: no pattern comes before it")),
            "{all:#?}"
        );
    }

    #[test]
    fn a_node_wide_fault_needs_a_node_of_its_own() {
        let text = GOOD.replace(
            "  - fault: {kill: {container: c}}\n",
            "  - fault: {runtime: {runtimeReady: false}}\n",
        );
        let msg = one_error(&text, "good");
        assert!(
            msg.starts_with("cases/x/case.yaml:25:3:")
                && msg.contains("needs `requires: [dedicated-node]`"),
            "{msg}"
        );
        let dedicated = text.replace(
            "requires: [runtime-control]",
            "requires: [runtime-control, dedicated-node]",
        );
        parse(&dedicated, "good").expect("valid with a node of its own");
    }

    #[test]
    fn agent_steps_need_the_requirement_and_alternate() {
        let text = GOOD.replace(
            "  - fault: {kill: {container: c}}\n",
            "  - fault: {kill: {container: c}}\n  - agent: start\n",
        );
        let all = one_error(&text, "good");
        assert!(
            all.contains("case.yaml:26:3:") && all.contains("needs `requires: [agent-restart]`"),
            "{all}"
        );
        assert!(
            all.contains("`agent: start` of an agent that runs"),
            "{all}"
        );
        let restart = GOOD
            .replace(
                "requires: [runtime-control]",
                "requires: [runtime-control, agent-restart]",
            )
            .replace(
                "  - fault: {kill: {container: c}}\n",
                "  - fault: {kill: {container: c}}\n  - agent: kill\n  - agent: start\n",
            );
        parse(&restart, "good").expect("valid: kill, then start");
        let twice = restart.replace("  - agent: start\n", "  - agent: kill\n");
        assert!(one_error(&twice, "good").contains("`agent: kill` of an agent killed already"));
        let unknown = restart.replace("  - agent: start\n", "  - agent: reboot\n");
        let msg = one_error(&unknown, "good");
        assert!(
            msg.contains("case.yaml:27:") && msg.contains("reboot"),
            "{msg}"
        );
    }

    #[test]
    fn api_faults_need_their_requirement_and_their_own_fields() {
        let step = |fault: &str| {
            GOOD.replace(
                "  - fault: {kill: {container: c}}\n",
                &format!("  - fault: {{kill: {{container: c}}}}\n  - fault: {{api: {fault}}}\n"),
            )
        };
        let all = one_error(&step("closeWatches"), "good");
        assert!(
            all.contains("case.yaml:26:3:") && all.contains("needs `requires: [api-faults]`"),
            "{all}"
        );
        let with = |fault: &str| {
            step(fault).replace(
                "requires: [runtime-control]",
                "requires: [runtime-control, api-faults]",
            )
        };
        parse(&with("{error: {code: 429, retryAfter: 2s, verb: patch, resource: pods/status, for: 20s}}"), "good")
            .expect("valid: a throttled status write");
        parse(&with("{restart: {down: 5s}}"), "good").expect("valid: a restart");
        let msg = one_error(&with("{delay: {by: 1s, code: 500}}"), "good");
        assert!(msg.contains("`code` belongs to `error` only"), "{msg}");
        let msg = one_error(&with("{error: {code: 200}}"), "good");
        assert!(msg.contains("a `code` from 400 to 599"), "{msg}");
        let msg = one_error(&with("{reset: {verb: gett}}"), "good");
        assert!(
            msg.contains("case.yaml:26:") && msg.contains("gett"),
            "{msg}"
        );
        let msg = one_error(&with("{slow: {}}"), "good");
        assert!(
            msg.contains("unknown variant `slow`, expected one of `error`"),
            "{msg}"
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
    fn peers_are_checked_and_referenced_by_name() {
        let peer = "peers:\n  - metadata: {name: handler}\n    spec:\n      containers: [{name: h, image: agnhost, comand: [x]}]\n";
        let text = GOOD.replace("pod:\n", &format!("{peer}pod:\n")).replace(
            "image: busybox:1.36",
            "image: busybox:1.36\n        args: [\"{{peers.handlr.podIP}}\"]",
        );
        let errors = parse(&text, "good").expect_err("invalid");
        let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(
            all.iter()
                .any(|m| m.contains("peers[0].spec.containers[0]: unknown field `comand`")),
            "{all:#?}"
        );
        assert!(
            all.iter()
                .any(|m| m.contains("no peer `handlr`; expected one of: handler")),
            "{all:#?}"
        );
        let text = text
            .replace(", comand: [x]", "")
            .replace("handlr", "handler");
        let case = parse(&text, "good").expect("valid");
        assert_eq!(case.peers.len(), 1);
        let text = GOOD.replace(
            "  - create\n",
            "  - create\n  - expectLogs: {pod: nobody, contains: x}\n",
        );
        assert!(one_error(&text, "good").contains("expectLogs: no peer `nobody`"));
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
        assert!(one_error(&text, "good").contains(
            "unknown variant `configmap`, expected one of `configMap`, `secret`, `service`"
        ));
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

    #[test]
    fn with_a_taxonomy_every_case_names_known_features() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("features.yaml"),
            "features:\n  - {name: pod.run, description: runs}\n",
        )
        .unwrap();
        let area = dir.path().join("area");
        std::fs::create_dir(&area).unwrap();
        let with = |name: &str, features: &str| {
            GOOD.replace("name: good", &format!("name: {name}"))
                .replace("timeout:", &format!("{features}timeout:"))
        };
        std::fs::write(
            area.join("good.yaml"),
            with("good", "features: [pod.run]\n"),
        )
        .unwrap();
        std::fs::write(area.join("none.yaml"), with("none", "")).unwrap();
        std::fs::write(
            area.join("odd.yaml"),
            with("odd", "features: [pod.run, pod.fly]\n"),
        )
        .unwrap();
        let loaded = load_dir(dir.path());
        assert_eq!(loaded.cases.len(), 1, "{:?}", loaded.errors);
        let errors: Vec<String> = loaded.errors.iter().map(|e| e.to_string()).collect();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("none.yaml:1:1: no `features`")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("odd.yaml:")
                    && e.contains("features not in features.yaml: pod.fly")),
            "{errors:?}"
        );
        std::fs::write(
            dir.path().join("features.yaml"),
            "features:\n  - {name: run, description: x}\n",
        )
        .unwrap();
        let loaded = load_dir(dir.path());
        assert!(
            loaded.errors[0]
                .to_string()
                .contains("features.yaml:2:1: feature `run`: expected `group.what`"),
            "{:?}",
            loaded.errors
        );
    }

    #[test]
    fn files_directly_in_the_cases_dir_are_loaded_with_their_area() {
        let dir = tempfile::tempdir().unwrap();
        let area = dir.path().join("area");
        std::fs::create_dir(&area).unwrap();
        let named = |name: &str| GOOD.replace("name: good", &format!("name: {name}"));
        std::fs::write(dir.path().join("loose.yaml"), named("loose")).unwrap();
        std::fs::write(
            dir.path().join("placed.yaml"),
            named("placed").replace("tags:", "area: extra\ntags:"),
        )
        .unwrap();
        std::fs::write(
            area.join("moved.yaml"),
            named("moved").replace("tags:", "area: other\ntags:"),
        )
        .unwrap();
        std::fs::write(dir.path().join("coverage.yaml"), "not: a case").unwrap();
        let loaded = load_dir(dir.path());
        let ids: Vec<String> = loaded.cases.iter().map(|c| c.id.to_string()).collect();
        assert_eq!(ids, ["extra::placed", "misc::loose"]);
        assert_eq!(loaded.errors.len(), 1, "{:?}", loaded.errors);
        let error = loaded.errors[0].to_string();
        assert!(
            error.contains("moved.yaml:3:1: area `other` differs from the folder `area`"),
            "{error}"
        );
    }
}

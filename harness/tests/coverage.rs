//! Keeps the coverage map honest: `cases/coverage.yaml` lists every upstream Conformance /
//! NodeConformance test of the node and storage e2e suites, in or out of scope; each case names the
//! tests it mirrors in `upstream:`. This test fails when a case cites a test the map does not list
//! or one it calls out of scope, and when the generated table in `cases/README.md` (between
//! `<!-- coverage:begin -->` and `<!-- coverage:end -->`) is stale.
//!
//! `NODECONFORM_UPDATE_COVERAGE=1 cargo test -p nodeconform-harness --test coverage` rewrites that
//! table instead of failing on it (like a golden file's update flag).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nodeconform_harness::case::{self, CaseId};
use serde::Deserialize;

const BEGIN: &str = "<!-- coverage:begin -->";
const END: &str = "<!-- coverage:end -->";
const UPDATE_ENV: &str = "NODECONFORM_UPDATE_COVERAGE";
/// The upstream directories the map covers, in the order the summary lists them.
const AREAS: [&str; 3] = [
    "test/e2e/common/node",
    "test/e2e/common/storage",
    "test/e2e_node",
];

/// `cases/coverage.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Map {
    /// The Kubernetes version the tests were read from.
    source: String,
    tests: Vec<Entry>,
}

/// One upstream test.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// The full Ginkgo name.
    test: String,
    /// Path in the Kubernetes tree.
    file: String,
    /// Line of the `It` in `source`.
    line: u32,
    scope: Scope,
    /// Why it is out of scope.
    #[serde(default)]
    reason: Option<String>,
    /// For an in-scope test: what the test asserts, read from its source, and
    /// how the citing cases hold it (or what they leave out). Required, so a
    /// claim of coverage always says what was compared.
    #[serde(default)]
    checked: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    In,
    Out,
}

/// A case that cites a test, and what of the test it leaves out.
#[derive(Debug, Clone)]
struct Citation {
    case: CaseId,
    partly: Option<String>,
}

/// How far the cases cover one in-scope test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coverage {
    Covered,
    Partly,
    Uncovered,
}

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases")
}

fn load_map(dir: &Path) -> Map {
    let path = dir.join("coverage.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every case's `upstream` entries, by test name.
fn load_citations(dir: &Path) -> BTreeMap<String, Vec<Citation>> {
    let loaded = case::load_dir(dir);
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.is_empty(),
        "broken case files:\n{}",
        errors.join("\n")
    );
    let mut citations: BTreeMap<String, Vec<Citation>> = BTreeMap::new();
    for loaded in &loaded.cases {
        for upstream in &loaded.case.upstream {
            citations
                .entry(upstream.test.clone())
                .or_default()
                .push(Citation {
                    case: loaded.id.clone(),
                    partly: upstream.partly.clone(),
                });
        }
    }
    citations
}

/// Problems with the map itself: order, duplicates, reasons, files.
fn map_problems(map: &Map) -> Vec<String> {
    let mut problems = Vec::new();
    if map.source.is_empty() {
        problems.push("`source` is empty".to_owned());
    }
    let mut names = BTreeSet::new();
    for (i, e) in map.tests.iter().enumerate() {
        if !names.insert(e.test.as_str()) {
            problems.push(format!("tests[{i}]: `{}` is listed twice", e.test));
        }
        if !AREAS.iter().any(|a| e.file.starts_with(&format!("{a}/"))) {
            problems.push(format!(
                "tests[{i}]: file `{}` is not under {}",
                e.file,
                AREAS.join(", ")
            ));
        }
        if e.line == 0 {
            problems.push(format!("tests[{i}]: line 0"));
        }
        match (e.scope, e.reason.as_deref()) {
            (Scope::In, Some(_)) => {
                problems.push(format!("tests[{i}]: in scope but has a `reason`"));
            }
            (Scope::Out, None | Some("")) => {
                problems.push(format!("tests[{i}]: out of scope without a `reason`"));
            }
            _ => {}
        }
        match (e.scope, e.checked.as_deref().map(str::trim)) {
            (Scope::In, None | Some("")) => problems.push(format!(
                "tests[{i}]: in scope without `checked` (what the test asserts and how the cases hold it)"
            )),
            (Scope::Out, Some(_)) => problems.push(format!(
                "tests[{i}]: out of scope but has `checked` (its `reason` says why)"
            )),
            _ => {}
        }
        // Sorted by file then line keeps diffs against a newer upstream reviewable.
        if let Some(prev) = i.checked_sub(1).map(|p| &map.tests[p])
            && (prev.file.as_str(), prev.line, prev.test.as_str())
                > (e.file.as_str(), e.line, e.test.as_str())
        {
            problems.push(format!(
                "tests[{i}]: `{}:{}` comes after `{}:{}` (keep the list sorted by file, then line)",
                e.file, e.line, prev.file, prev.line
            ));
        }
    }
    problems
}

/// Citations of tests the map does not list, or lists as out of scope.
fn citation_problems(map: &Map, citations: &BTreeMap<String, Vec<Citation>>) -> Vec<String> {
    let by_name: BTreeMap<&str, &Entry> = map.tests.iter().map(|e| (e.test.as_str(), e)).collect();
    let mut problems = Vec::new();
    for (test, cited) in citations {
        for c in cited {
            match by_name.get(test.as_str()) {
                None => problems.push(format!(
                    "{}: cites `{test}`, which cases/coverage.yaml does not list (a typo, or not a Conformance/NodeConformance test?)",
                    c.case
                )),
                Some(e) if e.scope == Scope::Out => problems.push(format!(
                    "{}: cites `{test}`, which cases/coverage.yaml lists as out of scope ({})",
                    c.case,
                    e.reason.as_deref().unwrap_or_default()
                )),
                Some(_) => {}
            }
            if c.partly.as_deref() == Some("") {
                problems.push(format!("{}: `partly` is empty for `{test}`", c.case));
            }
        }
    }
    problems
}

fn coverage(cited: Option<&Vec<Citation>>) -> Coverage {
    match cited {
        None => Coverage::Uncovered,
        Some(c) if c.iter().any(|c| c.partly.is_none()) => Coverage::Covered,
        Some(_) => Coverage::Partly,
    }
}

/// Markdown table cells: `|` ends a cell and `*` starts emphasis (`should *not* be restarted`).
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('*', "\\*")
}

#[derive(Default)]
struct Counts {
    tests: usize,
    in_scope: usize,
    covered: usize,
    partly: usize,
}

impl Counts {
    fn add(&mut self, scope: Scope, coverage: Coverage) {
        self.tests += 1;
        if scope == Scope::In {
            self.in_scope += 1;
            match coverage {
                Coverage::Covered => self.covered += 1,
                Coverage::Partly => self.partly += 1,
                Coverage::Uncovered => {}
            }
        }
    }

    fn row(&self, area: &str) -> String {
        format!(
            "| {area} | {} | {} | {} | {} | {} |\n",
            self.tests,
            self.in_scope,
            self.covered,
            self.partly,
            self.in_scope - self.covered - self.partly
        )
    }
}

/// The README section between the markers (without them).
fn render(map: &Map, citations: &BTreeMap<String, Vec<Citation>>) -> String {
    let mut areas: BTreeMap<&str, Counts> = BTreeMap::new();
    let mut all = Counts::default();
    let mut list = String::new();
    for e in &map.tests {
        let cited = citations.get(&e.test);
        let cov = coverage(cited);
        let area = AREAS
            .iter()
            .find(|a| e.file.starts_with(&format!("{a}/")))
            .copied()
            .unwrap_or("other");
        areas.entry(area).or_default().add(e.scope, cov);
        all.add(e.scope, cov);
        let cases = match (e.scope, cited) {
            (Scope::Out, _) => format!("out: {}", e.reason.as_deref().unwrap_or_default()),
            (Scope::In, None) => "—".to_owned(),
            (Scope::In, Some(cited)) => cited
                .iter()
                .map(|c| match &c.partly {
                    None => format!("`{}`", c.case),
                    Some(p) => format!("`{}` (partly: {p})", c.case),
                })
                .collect::<Vec<_>>()
                .join("; "),
        };
        let _ = writeln!(
            list,
            "| `{}:{}` | {} | {} |",
            e.file,
            e.line,
            cell(&e.test),
            cell(&cases)
        );
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- generated from cases/coverage.yaml and the cases' `upstream:` by `{UPDATE_ENV}=1 cargo test -p nodeconform-harness --test coverage`; do not edit by hand -->"
    );
    let _ = writeln!(
        out,
        "Kubernetes {}: **{} of {} in-scope tests covered by passing cases**, {} more partly; {} of {} tests are out of scope.\n",
        map.source,
        all.covered,
        all.in_scope,
        all.partly,
        all.tests - all.in_scope,
        all.tests
    );
    out.push_str("| area | tests | in scope | covered | partly | uncovered |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|\n");
    for area in AREAS.iter().chain(["other"].iter()) {
        if let Some(c) = areas.get(area) {
            out.push_str(&c.row(&format!("`{area}`")));
        }
    }
    out.push_str(&all.row("**all**"));
    out.push_str("\n| file:line | upstream test | case |\n|---|---|---|\n");
    out.push_str(&list);
    out
}

#[test]
fn map_is_well_formed() {
    let map = load_map(&cases_dir());
    let problems = map_problems(&map);
    assert!(
        problems.is_empty(),
        "cases/coverage.yaml:\n{}",
        problems.join("\n")
    );
}

#[test]
fn cases_cite_listed_in_scope_tests() {
    let dir = cases_dir();
    let problems = citation_problems(&load_map(&dir), &load_citations(&dir));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_table_is_current() {
    let dir = cases_dir();
    let map = load_map(&dir);
    let generated = render(&map, &load_citations(&dir));
    let readme_path = dir.join("README.md");
    let readme = std::fs::read_to_string(&readme_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", readme_path.display()));
    let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("cases/README.md has no `{BEGIN}` … `{END}` section");
    };
    assert!(
        begin < end,
        "cases/README.md: `{END}` comes before `{BEGIN}`"
    );
    let current = readme[begin + BEGIN.len()..end].trim_start_matches('\n');
    if current == generated {
        return;
    }
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        let updated = format!("{}{BEGIN}\n{generated}{}", &readme[..begin], &readme[end..]);
        std::fs::write(&readme_path, updated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", readme_path.display()));
        eprintln!("updated the coverage table in {}", readme_path.display());
        return;
    }
    let first_diff = current
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| current.lines().count().min(generated.lines().count()));
    panic!(
        "the coverage table in cases/README.md is stale (first difference at line {} of the section):\n  README:    {}\n  generated: {}\nrun `{UPDATE_ENV}=1 cargo test -p nodeconform-harness --test coverage` and commit the result",
        first_diff + 1,
        current.lines().nth(first_diff).unwrap_or("<end>"),
        generated.lines().nth(first_diff).unwrap_or("<end>"),
    );
}

#[test]
fn partial_and_full_citations_are_counted_apart() {
    let case = |name: &str| CaseId {
        area: "a".to_owned(),
        name: name.to_owned(),
    };
    let full = Citation {
        case: case("x"),
        partly: None,
    };
    let part = Citation {
        case: case("y"),
        partly: Some("not the Never row".to_owned()),
    };
    assert_eq!(coverage(None), Coverage::Uncovered);
    assert_eq!(coverage(Some(&vec![part.clone()])), Coverage::Partly);
    assert_eq!(coverage(Some(&vec![part, full])), Coverage::Covered);
    assert_eq!(cell("a | *not* b"), "a \\| \\*not\\* b");
}

#[test]
fn in_scope_tests_say_what_was_checked() {
    let map: Map = serde_yaml::from_str(
        r#"
source: v1
tests:
  - {test: a, file: test/e2e/common/node/a.go, line: 1, scope: in}
  - {test: b, file: test/e2e/common/node/a.go, line: 2, scope: in, checked: "  "}
  - {test: c, file: test/e2e/common/node/a.go, line: 3, scope: out, reason: r, checked: x}
  - {test: d, file: test/e2e/common/node/a.go, line: 4, scope: in, checked: "asserts X; the case holds it"}
"#,
    )
    .expect("a well-typed map");
    let problems = map_problems(&map);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("tests[0]: in scope without `checked`"));
    assert!(problems[1].starts_with("tests[1]: in scope without `checked`"));
    assert!(problems[2].starts_with("tests[2]: out of scope but has `checked`"));
    let unknown = serde_yaml::from_str::<Map>(
        "source: v1\ntests:\n  - {test: a, file: f, line: 1, scope: in, cheked: x}\n",
    );
    assert!(unknown.is_err(), "a misspelt key is refused");
}

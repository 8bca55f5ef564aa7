//! Keeps the coverage map honest: `cases/coverage.yaml` lists every upstream Conformance /
//! NodeConformance test of the node and storage e2e suites (the directories in [`AREAS`]) of each
//! Kubernetes version in its `sources`, with where each version has it, in or out of scope; each
//! case names the tests it mirrors in `upstream:`. This test fails when the map is malformed or unsorted, when a case
//! cites a test the map does not list or one it calls out of scope, when an in-scope test's
//! `checked` says "Uncovered" while a case cites it (or not while none does), and when the
//! generated table in `cases/README.md` (between `<!-- coverage:begin -->` and
//! `<!-- coverage:end -->`) is stale.
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
/// What `checked` says of an in-scope test no case cites.
const UNCOVERED: &str = "Uncovered";
/// The upstream directories the map covers, in the order the summary lists them.
const AREAS: [&str; 4] = [
    "test/e2e/common/node",
    "test/e2e/common/storage",
    "test/e2e_node",
    "test/e2e/node",
];

/// `cases/coverage.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Map {
    /// The Kubernetes versions the tests were read from, oldest first.
    sources: Vec<String>,
    tests: Vec<Entry>,
}

/// One upstream test, by full name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// The full Ginkgo name.
    test: String,
    /// Each source version that has a spec of exactly this name → its `path:line` (the line of
    /// the `It`/`Entry` call) in the Kubernetes tree.
    at: BTreeMap<String, String>,
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

/// A test's place in one version's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Location<'a> {
    path: &'a str,
    line: u32,
}

impl<'a> Location<'a> {
    /// `path:line` with a path under one of [`AREAS`] and a line above 0.
    fn parse(text: &'a str) -> Result<Self, String> {
        let (path, line) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("`{text}` is not `path:line`"))?;
        let line: u32 = line
            .parse()
            .map_err(|_| format!("`{text}` is not `path:line` (the line is not a number)"))?;
        if line == 0 {
            return Err(format!("`{text}`: line 0"));
        }
        if area(path).is_none() {
            return Err(format!("`{text}` is not under {}", AREAS.join(", ")));
        }
        Ok(Self { path, line })
    }
}

/// The area (one of [`AREAS`]) a path lies under.
fn area(path: &str) -> Option<&'static str> {
    AREAS
        .iter()
        .find(|a| {
            path.strip_prefix(**a)
                .is_some_and(|rest| rest.starts_with('/'))
        })
        .copied()
}

impl Map {
    /// Where the newest version (the last of `sources`) that has the test has it.
    fn newest_location<'a>(&self, e: &'a Entry) -> Option<Location<'a>> {
        self.sources
            .iter()
            .rev()
            .find_map(|v| e.at.get(v))
            .and_then(|at| Location::parse(at).ok())
    }
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

/// Problems with the map itself: sources, locations, order, duplicates, reasons.
fn map_problems(map: &Map) -> Vec<String> {
    let mut problems = Vec::new();
    if map.sources.is_empty() {
        problems.push("`sources` is empty".to_owned());
    }
    let mut versions = BTreeSet::new();
    for v in &map.sources {
        if v.trim().is_empty() {
            problems.push("`sources` has an empty version".to_owned());
        } else if !versions.insert(v.as_str()) {
            problems.push(format!("`sources` lists `{v}` twice"));
        }
    }
    let mut names = BTreeSet::new();
    let mut prev: Option<(Location<'_>, &str)> = None;
    for (i, e) in map.tests.iter().enumerate() {
        if !names.insert(e.test.as_str()) {
            problems.push(format!("tests[{i}]: `{}` is listed twice", e.test));
        }
        if e.at.is_empty() {
            problems.push(format!(
                "tests[{i}]: `at` is empty (which version has `{}`?)",
                e.test
            ));
        }
        for (version, at) in &e.at {
            if !versions.contains(version.as_str()) {
                problems.push(format!(
                    "tests[{i}]: `at` names `{version}`, which `sources` does not list ({})",
                    map.sources.join(", ")
                ));
            }
            if let Err(problem) = Location::parse(at) {
                problems.push(format!("tests[{i}]: at.{version}: {problem}"));
            }
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
        // Sorted by the newest version's path and line, then name, keeps diffs against a newer
        // upstream reviewable.
        if let Some(here) = map.newest_location(e) {
            if let Some((before, before_name)) = prev
                && (before, before_name) > (here, e.test.as_str())
            {
                problems.push(format!(
                    "tests[{i}]: `{}:{}` comes after `{}:{}` (keep the list sorted by the location in the newest version that has the test, then by name)",
                    here.path, here.line, before.path, before.line
                ));
            }
            prev = Some((here, e.test.as_str()));
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
    // `checked` says "Uncovered" exactly while no case cites the test, so it never claims
    // coverage no case gives, nor goes stale when a case starts citing the test.
    for (i, e) in map.tests.iter().enumerate() {
        if e.scope != Scope::In {
            continue;
        }
        let says_uncovered = e.checked.as_deref().unwrap_or_default().contains(UNCOVERED);
        match citations.get(&e.test) {
            Some(cited) if says_uncovered => problems.push(format!(
                "tests[{i}]: cited by {} but `checked` still says \"{UNCOVERED}\" (say how the cases hold `{}`)",
                cited
                    .iter()
                    .map(|c| c.case.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                e.test
            )),
            None if !says_uncovered => problems.push(format!(
                "tests[{i}]: no case cites `{}`, but `checked` does not say \"{UNCOVERED}\" (and what a case would need)",
                e.test
            )),
            _ => {}
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

#[derive(Default, Clone, Copy)]
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

    fn row(&self, area: &str, version: &str) -> String {
        format!(
            "| {area} | {version} | {} | {} | {} | {} | {} |\n",
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
    // (version, area) → counts; a test counts for a version when it has a location there.
    let mut areas: BTreeMap<(&str, &str), Counts> = BTreeMap::new();
    let mut all: BTreeMap<&str, Counts> = BTreeMap::new();
    let mut list = String::new();
    for e in &map.tests {
        let cited = citations.get(&e.test);
        let cov = coverage(cited);
        let mut places = Vec::new();
        for version in &map.sources {
            match e.at.get(version) {
                Some(at) => {
                    let area = area(at.rsplit_once(':').map_or(at.as_str(), |(p, _)| p))
                        .unwrap_or("other");
                    areas
                        .entry((version.as_str(), area))
                        .or_default()
                        .add(e.scope, cov);
                    all.entry(version.as_str()).or_default().add(e.scope, cov);
                    places.push(format!("`{at}`"));
                }
                None => places.push("—".to_owned()),
            }
        }
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
            "| {} | {} | {} |",
            places.join(" | "),
            cell(&e.test),
            cell(&cases)
        );
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- generated from cases/coverage.yaml and the cases' `upstream:` by `{UPDATE_ENV}=1 cargo test -p nodeconform-harness --test coverage`; do not edit by hand -->"
    );
    for version in &map.sources {
        let c = all.get(version.as_str()).copied().unwrap_or_default();
        let _ = writeln!(
            out,
            "Kubernetes {version}: **{} of {} in-scope tests covered by passing cases**, {} more partly; {} of {} tests are out of scope.\n",
            c.covered,
            c.in_scope,
            c.partly,
            c.tests - c.in_scope,
            c.tests
        );
    }
    out.push_str("| area | version | tests | in scope | covered | partly | uncovered |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    for area in AREAS.iter().chain(["other"].iter()) {
        for version in &map.sources {
            if let Some(c) = areas.get(&(version.as_str(), *area)) {
                out.push_str(&c.row(&format!("`{area}`"), version));
            }
        }
    }
    for version in &map.sources {
        if let Some(c) = all.get(version.as_str()) {
            out.push_str(&c.row("**all**", version));
        }
    }
    let _ = write!(out, "\n| ");
    for version in &map.sources {
        let _ = write!(out, "{version} | ");
    }
    out.push_str("upstream test | case |\n|");
    for _ in &map.sources {
        out.push_str("---|");
    }
    out.push_str("---|---|\n");
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
sources: [v1]
tests:
  - {test: a, at: {v1: "test/e2e/common/node/a.go:1"}, scope: in}
  - {test: b, at: {v1: "test/e2e/common/node/a.go:2"}, scope: in, checked: "  "}
  - {test: c, at: {v1: "test/e2e/common/node/a.go:3"}, scope: out, reason: r, checked: x}
  - {test: d, at: {v1: "test/e2e/common/node/a.go:4"}, scope: in, checked: "asserts X; the case holds it"}
"#,
    )
    .expect("a well-typed map");
    let problems = map_problems(&map);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("tests[0]: in scope without `checked`"));
    assert!(problems[1].starts_with("tests[1]: in scope without `checked`"));
    assert!(problems[2].starts_with("tests[2]: out of scope but has `checked`"));
    let unknown = serde_yaml::from_str::<Map>(
        "sources: [v1]\ntests:\n  - {test: a, at: {v1: \"test/e2e_node/a.go:1\"}, scope: in, cheked: x}\n",
    );
    assert!(unknown.is_err(), "a misspelt key is refused");
    let old_format = serde_yaml::from_str::<Map>(
        "source: v1\ntests:\n  - {test: a, file: test/e2e_node/a.go, line: 1, scope: in, checked: x}\n",
    );
    assert!(old_format.is_err(), "the one-version format is refused");
}

#[test]
fn locations_name_listed_versions() {
    let map: Map = serde_yaml::from_str(
        r#"
sources: [v1, v2]
tests:
  - {test: a, at: {v1: "test/e2e_node/a.go:1", v3: "test/e2e_node/a.go:2"}, scope: out, reason: r}
  - {test: b, at: {}, scope: out, reason: r}
  - {test: c, at: {v2: "test/e2e_node/a.go:0"}, scope: out, reason: r}
  - {test: d, at: {v2: "test/e2e/apps/a.go:5"}, scope: out, reason: r}
  - {test: e, at: {v2: "test/e2e_node/a.go"}, scope: out, reason: r}
  - {test: f, at: {v1: "test/e2e_node/b.go:1", v2: "test/e2e_node/b.go:9"}, scope: out, reason: r}
"#,
    )
    .expect("a well-typed map");
    let problems = map_problems(&map);
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(
        problems[0].starts_with("tests[0]: `at` names `v3`, which `sources` does not list"),
        "{problems:#?}"
    );
    assert!(problems[1].starts_with("tests[1]: `at` is empty"));
    assert!(problems[2].starts_with("tests[2]: at.v2: `test/e2e_node/a.go:0`: line 0"));
    assert!(problems[3].starts_with("tests[3]: at.v2: `test/e2e/apps/a.go:5` is not under"));
    assert!(problems[4].starts_with("tests[4]: at.v2: `test/e2e_node/a.go` is not `path:line`"));
}

#[test]
fn areas_are_whole_directories() {
    assert_eq!(area("test/e2e/node/pods.go"), Some("test/e2e/node"));
    assert_eq!(area("test/e2e_node/pods_test.go"), Some("test/e2e_node"));
    assert_eq!(
        area("test/e2e/common/node/pods.go"),
        Some("test/e2e/common/node")
    );
    assert_eq!(area("test/e2e/nodefeature/a.go"), None);
    assert_eq!(area("test/e2e/node"), None);
}

#[test]
fn entries_sort_by_the_newest_location_then_name() {
    let map: Map = serde_yaml::from_str(
        r#"
sources: [v1, v2]
tests:
  - {test: b, at: {v1: "test/e2e_node/a.go:9", v2: "test/e2e_node/a.go:2"}, scope: out, reason: r}
  - {test: a, at: {v2: "test/e2e_node/a.go:2"}, scope: out, reason: r}
  - {test: c, at: {v1: "test/e2e_node/a.go:5"}, scope: out, reason: r}
  - {test: d, at: {v2: "test/e2e_node/a.go:3"}, scope: out, reason: r}
"#,
    )
    .expect("a well-typed map");
    let problems = map_problems(&map);
    // a (v2 :2) sorts before b (v2 :2) by name; c's only place, v1 :5, after d's v2 :3.
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0]
            .starts_with("tests[1]: `test/e2e_node/a.go:2` comes after `test/e2e_node/a.go:2`")
    );
    assert!(
        problems[1]
            .starts_with("tests[3]: `test/e2e_node/a.go:3` comes after `test/e2e_node/a.go:5`")
    );
}

#[test]
fn checked_says_uncovered_exactly_while_no_case_cites_the_test() {
    let map: Map = serde_yaml::from_str(
        r#"
sources: [v1]
tests:
  - {test: a, at: {v1: "test/e2e_node/a.go:1"}, scope: in, checked: "asserts X. Uncovered: a case needs Y."}
  - {test: b, at: {v1: "test/e2e_node/a.go:2"}, scope: in, checked: "asserts X; x::y holds it"}
  - {test: c, at: {v1: "test/e2e_node/a.go:3"}, scope: in, checked: "asserts X. Uncovered: a case needs Y."}
  - {test: d, at: {v1: "test/e2e_node/a.go:4"}, scope: in, checked: "asserts X; x::y holds it"}
  - {test: e, at: {v1: "test/e2e_node/a.go:5"}, scope: out, reason: r}
"#,
    )
    .expect("a well-typed map");
    assert!(map_problems(&map).is_empty());
    let cite = |name: &str| Citation {
        case: CaseId {
            area: "x".to_owned(),
            name: name.to_owned(),
        },
        partly: None,
    };
    let citations: BTreeMap<String, Vec<Citation>> = [
        ("a".to_owned(), vec![cite("y")]),
        ("b".to_owned(), vec![cite("y")]),
        ("e".to_owned(), vec![cite("z")]),
    ]
    .into_iter()
    .collect();
    let problems = citation_problems(&map, &citations);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("x::z: cites `e`, which cases/coverage.yaml lists as out of scope")
    );
    assert!(
        problems[1].starts_with("tests[0]: cited by x::y but `checked` still says \"Uncovered\""),
        "{problems:#?}"
    );
    assert!(
        problems[2]
            .starts_with("tests[3]: no case cites `d`, but `checked` does not say \"Uncovered\"")
    );
}

//! The `nodeconform` binary: `check`, `list`, and `run` output formats.

mod common;

use common::nodeconform;

#[test]
fn check_reports_every_broken_file_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let area = dir.path().join("lifecycle");
    std::fs::create_dir(&area).unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cases/lifecycle/never-fails.yaml"
    ))
    .unwrap();
    let broken = good.replace("phase: Failed", "phase: Faild");
    let typo = good
        .replace("name: never-fails", "name: typo")
        .replace("restartPolicy:", "restartPolcy:");
    std::fs::write(area.join("never-fails.yaml"), &broken).unwrap();
    std::fs::write(area.join("typo.yaml"), &typo).unwrap();
    // line:column of the first `needle` in `text`, 1-based, pointing at what follows `skip`.
    let at = |text: &str, needle: &str, skip: &str| {
        let (line, content) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .expect("needle in the case");
        format!(
            "{}:{}",
            line + 1,
            content.find(needle).unwrap() + skip.len() + 1
        )
    };
    let faild = at(&broken, "phase: Faild", "phase: ");
    let polcy = at(&typo, "restartPolcy", "");
    let cases = dir.path().to_str().unwrap();
    let (code, _, stderr) = nodeconform(&["check", "--cases", cases]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "never-fails.yaml:{faild}: steps[1].expect.states[0].phase: unknown variant `Faild`"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "typo.yaml:{polcy}: pod.spec: unknown field `restartPolcy`"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("2 broken case files"), "{stderr}");

    let (code, stdout, _) = nodeconform(&["check"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("cases OK"), "{stdout}");
}

#[test]
fn list_names_cases_by_area() {
    let (code, stdout, _) = nodeconform(&["list", "deletion"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("deletion::graceful-term-trap"), "{stdout}");
    assert!(!stdout.contains("lifecycle::"), "{stdout}");
}

#[cfg(feature = "embedded")]
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    // As `nodeconform list | head -1` once the reader has gone: every write fails with EPIPE.
    let cases = concat!(env!("CARGO_MANIFEST_DIR"), "/../cases");
    for args in [
        vec!["list", "--cases", cases],
        vec!["check", "--cases", cases],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nodeconform"))
            .args(&args)
            .stdout(writer)
            .output()
            .expect("nodeconform runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
}

#[test]
fn run_on_an_existing_node_ignores_runtime_control_cases_in_junit() {
    let (code, stdout, stderr) = nodeconform(&[
        "run",
        "--node",
        "kind-control-plane",
        "--tag",
        "fault",
        "--format",
        "junit",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report = quick_junit::Report::deserialize_from_str(&stdout).expect("valid JUnit XML");
    assert!(report.tests >= 2);
    assert_eq!(report.failures, 0);
    assert!(stdout.contains("requires runtime-control"), "{stdout}");
    assert!(
        stderr.contains("ignored, requires runtime-control"),
        "{stderr}"
    );
}

/// A case and its expectations say which kubelet versions they apply to: a case for newer
/// kubelets is ignored with the node's version, an expectation for older ones is skipped,
/// and a version written as a YAML number is refused where it is written.
#[cfg(feature = "embedded")]
#[test]
fn versions_select_cases_and_expectations() {
    let dir = tempfile::tempdir().unwrap();
    let area = dir.path().join("lifecycle");
    std::fs::create_dir(&area).unwrap();
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cases/lifecycle/never-fails.yaml"
    ))
    .unwrap();
    let future = base
        .replace("name: never-fails", "name: future")
        .replace("timeout: 90s", "since: \"9.0\"\ntimeout: 90s");
    // An expectation no kubelet before 1.0 meets, were it run: the case passes without it.
    let skipped = base.replace("name: never-fails", "name: skipped").replace(
        "steps:\n  - create\n",
        "steps:\n  - create\n  - expect:\n      until: \"1.0\"\n      within: 1s\n      states:\n        - phase: Succeeded\n",
    );
    std::fs::write(area.join("future.yaml"), &future).unwrap();
    std::fs::write(area.join("skipped.yaml"), &skipped).unwrap();
    let cases = dir.path().to_str().unwrap();
    let (code, stdout, stderr) = nodeconform(&["run", "--cases", cases, "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let outcome = |name: &str| {
        report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let future = outcome("lifecycle::future");
    assert_eq!(future["outcome"], "ignored", "{future}");
    let reason = future["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("applies to kubelet 9.0 and later; the node's kubelet is v1."),
        "{reason}"
    );
    assert_eq!(outcome("lifecycle::skipped")["outcome"], "passed");

    std::fs::write(
        area.join("future.yaml"),
        base.replace("name: never-fails", "name: future")
            .replace("timeout: 90s", "since: 1.30\ntimeout: 90s"),
    )
    .unwrap();
    std::fs::remove_file(area.join("skipped.yaml")).unwrap();
    let (code, _, stderr) = nodeconform(&["check", "--cases", cases]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("future.yaml:"), "{stderr}");
    assert!(stderr.contains("must be quoted"), "{stderr}");
}

/// `--emulate-version` names a release the double answers as, and only where the double is
/// the API server; anything else is refused before a case runs.
#[cfg(feature = "embedded")]
#[test]
fn emulate_version_is_checked_before_anything_runs() {
    let (code, _, stderr) =
        nodeconform(&["run", "--emulate-version", "1.30", "lifecycle::never-fails"]);
    assert_ne!(code, 0);
    assert!(
        stderr
            .contains("unsupported version \"1.30\": the API server double emulates 1.28 and 1.36"),
        "{stderr}"
    );
    let (code, _, stderr) = nodeconform(&[
        "run",
        "--backend",
        "kubeconfig",
        "--emulate-version",
        "1.28",
        "lifecycle::never-fails",
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--emulate-version applies to the embedded backend only"),
        "{stderr}"
    );
    let (code, _, stderr) = nodeconform(&[
        "run",
        "--emulate-version",
        "v1.28.7",
        "lifecycle::never-fails",
    ]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_run_writes_a_bundle_and_the_matrix_puts_bundles_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("reference");
    let (code, _, stderr) = nodeconform(&[
        "run",
        "--out",
        first.to_str().unwrap(),
        "--agent-version",
        "v0-test",
        "pods::runs-a-pod",
        "lifecycle::always-running",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let agent = std::fs::read_to_string(first.join("agent.yaml")).unwrap();
    assert!(
        agent.contains("name: nodeconform reference agent"),
        "{agent}"
    );
    assert!(agent.contains("version: v0-test"), "{agent}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("results.json")).unwrap())
            .unwrap();
    let gate = &results["cases"][1];
    assert_eq!(gate["name"], "pods::runs-a-pod");
    assert_eq!(gate["features"], serde_json::json!(["pod.run"]));
    assert!(first.join("junit.xml").is_file() && first.join("log.txt").is_file());

    // The same results with one case failed, as another agent's.
    let second = dir.path().join("other");
    std::fs::create_dir(&second).unwrap();
    std::fs::write(
        second.join("agent.yaml"),
        agent.replace("nodeconform reference agent", "other agent"),
    )
    .unwrap();
    let mut failed = results.clone();
    failed["cases"][0]["outcome"] = "failed".into();
    std::fs::write(second.join("results.json"), failed.to_string()).unwrap();

    let (code, markdown, stderr) =
        nodeconform(&["matrix", first.to_str().unwrap(), second.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        markdown
            .contains("| feature | nodeconform reference agent v0-test | other agent v0-test |"),
        "{markdown}"
    );
    let row = |name: &str| {
        markdown
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}`")))
            .unwrap_or_else(|| panic!("row {name} in\n{markdown}"))
            .to_owned()
    };
    assert!(
        row("pod.run").ends_with("| ✅ 1 | ✅ 1 |"),
        "{}",
        row("pod.run")
    );
    assert!(
        row("restart.always").ends_with("| ✅ 1 | ❌ 1 of 1: `lifecycle::always-running` |"),
        "{}",
        row("restart.always")
    );

    let (code, _, stderr) = nodeconform(&["matrix", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("agent.yaml"), "{stderr}");

    // --rerun-failed runs only what failed in a bundle.
    let (code, stdout, stderr) = nodeconform(&["run", "--rerun-failed", second.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let ran: Vec<&str> = stdout.lines().filter(|l| l.contains(" ... ")).collect();
    assert_eq!(ran.len(), 1, "{stdout}");
    assert!(
        ran[0].starts_with("test lifecycle::always-running ... ok"),
        "{stdout}"
    );
    let (code, _, stderr) = nodeconform(&["run", "--rerun-failed", first.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(stderr.contains("no case failed in"), "{stderr}");
}

#[test]
fn a_profile_is_checked_against_the_cases_features_and_against_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        "unsupported:\n  - feature: pod.run\n    reason: we say so\n  - feature: pod.flying\n    reason: no wings\n",
    )
    .unwrap();
    let path = profile.to_str().unwrap();
    let (code, _, stderr) = nodeconform(&["run", "--profile", path, "pods::runs-a-pod"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{path}:4:1: feature `pod.flying` is not in the cases' features.yaml"
        )),
        "{stderr}"
    );

    // A declaration the run contradicts is said so.
    std::fs::write(
        &profile,
        "unsupported:\n  - feature: pod.run\n    reason: we say so\n",
    )
    .unwrap();
    let (code, stdout, stderr) = nodeconform(&["run", "--profile", path, "pods::runs-a-pod"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("profile: the profile declares pod.run unsupported, but its 1 case passed"),
        "{stdout}"
    );
}

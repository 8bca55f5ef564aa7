//! The HTML matrix in a real browser: two bundles (a real run, and a copy
//! with one case failed) make one page; headless Chromium renders it, its
//! DOM has the right cell in each place, and a screenshot is taken. Ignored
//! with the reason when no Chromium is installed (`.ci/run` installs
//! Debian's); `NODECONFORM_CHROMIUM` names another binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use common::nodeconform;
use nodeconform_testkit::{Suite, program};

fn main() -> ExitCode {
    Suite::new()
        .test(
            "the_html_matrix_renders_with_the_right_cells",
            chromium(),
            the_html_matrix_renders_with_the_right_cells,
        )
        .run()
}

fn chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("NODECONFORM_CHROMIUM") {
        return Ok(path.into());
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(|name| program(name, "").ok())
        .ok_or_else(|| {
            "no Chromium (install Debian's `chromium`, or set NODECONFORM_CHROMIUM)".to_string()
        })
}

/// Runs headless Chromium on `page` with `args`; its stdout. Nothing leaves
/// the host: the page fetches nothing, and the browser's own traffic goes
/// to a proxy on 127.0.0.1 where nothing listens.
fn browse(browser: &Path, profile: &Path, page: &Path, args: &[&str]) -> String {
    let out = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=http://127.0.0.1:9",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn the_html_matrix_renders_with_the_right_cells(browser: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("reference");
    let (code, _, stderr) = nodeconform(&[
        "run",
        "--out",
        first.to_str().unwrap(),
        "pods::runs-a-pod",
        "lifecycle::always-running",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let second = dir.path().join("other");
    std::fs::create_dir(&second).unwrap();
    let agent = std::fs::read_to_string(first.join("agent.yaml")).unwrap();
    std::fs::write(
        second.join("agent.yaml"),
        agent.replace("nodeconform reference agent", "other agent"),
    )
    .unwrap();
    let mut results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("results.json")).unwrap())
            .unwrap();
    results["cases"][0]["outcome"] = "failed".into();
    results["cases"][0]["failures"] = serde_json::json!(["step 2 (expect): not seen"]);
    results["cases"][0]["timeline"] = serde_json::json!([
        "#0  +  0.100s ADDED    phase=Pending",
        "#1  +  0.300s MODIFIED phase=Running",
    ]);
    std::fs::write(second.join("results.json"), results.to_string()).unwrap();
    let page = dir.path().join("matrix.html");
    let (code, _, stderr) = nodeconform(&[
        "matrix",
        "--format",
        "html",
        "--out",
        page.to_str().unwrap(),
        first.to_str().unwrap(),
        second.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");

    let profile = dir.path().join("profile");
    let dom = browse(&browser, &profile, &page, &["--dump-dom"]);
    let row = |name: &str| {
        let start = dom
            .find(&format!("<tr data-row=\"{name}\">"))
            .unwrap_or_else(|| panic!("row {name} in the rendered page"));
        let end = start + dom[start..].find("</tr>").unwrap();
        dom[start..end].to_owned()
    };
    let verdicts = |name: &str| -> Vec<String> {
        row(name)
            .split("data-verdict=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(verdicts("pod.run"), ["passed", "passed"]);
    assert_eq!(verdicts("restart.always"), ["passed", "failed"]);
    assert_eq!(verdicts("probe.liveness.grpc"), ["absent", "absent"]);
    assert!(
        row("restart.always").contains("href=\"#f1-lifecycle--always-running\""),
        "{}",
        row("restart.always")
    );
    let failure = dom
        .find("id=\"f1-lifecycle--always-running\"")
        .map(|at| &dom[at..])
        .expect("the failing case's section");
    assert!(failure.contains("<svg"), "its timeline is drawn");
    assert!(failure.contains("Pending → Running"));

    let screenshot = dir.path().join("matrix.png");
    browse(
        &browser,
        &profile,
        &page,
        &[
            "--window-size=1200,900",
            &format!("--screenshot={}", screenshot.display()),
        ],
    );
    let png = std::fs::read(&screenshot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (width, height) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((width, height), (1200, 900));
    // A blank page compresses to almost nothing; the matrix does not.
    assert!(png.len() > 20_000, "{} bytes", png.len());
}

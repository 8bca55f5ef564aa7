//! nodeconform harness: runs YAML conformance cases against a Kubernetes node agent.
//!
//! How the parts fit:
//! - [`case`] reads `cases/<area>/<name>.yaml` into typed cases (errors name file:line:column);
//! - [`backend`] starts the cluster (embedded API server double, kind, an existing kubeconfig) and
//!   hands each case a node (reference agent or `--agent-cmd` process with its own fake-cri, or an
//!   existing node such as kind's kubelet);
//! - [`runner`] runs cases in parallel, each in its own namespace: it records every pod state the
//!   watch delivers, executes the steps (faults go to fake-cri's control API through [`control`]),
//!   and cleans up — also after failures and Ctrl-C;
//! - [`expect`] is the pure expectation engine: ordered patterns with time bounds, `never`,
//!   invariants over every watched state, node checks;
//! - [`report`] prints libtest-style lines and a table by area, JUnit XML or JSON;
//! - [`images`] builds the cases' test images from Debian's packages, for a real runtime;
//! - [`up`] keeps the embedded backend running as a single-node cluster for `kubectl`;
//! - [`cli`] is the `nodeconform` command line (`run`, `up`, `list`, `check`).
//!
//! ```no_run
//! # async fn demo() {
//! let loaded = nodeconform_harness::case::load_dir(std::path::Path::new("cases"));
//! for e in &loaded.errors {
//!     eprintln!("{e}"); // cases/deletion/x.yaml:12:9: unknown field `phas`, expected one of …
//! }
//! # }
//! ```

#![warn(missing_docs)]

pub mod api_proxy;
pub mod backend;
pub mod case;
pub mod cli;
pub mod control;
pub mod expect;
pub mod images;
pub mod logs;
pub mod matrix;
pub mod profile;
pub mod report;
pub mod runner;
pub mod up;

/// An error and its sources in one line (`binding 127.0.0.1:80: Permission denied`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Writes `text` to stdout. A write that fails (a pipe closed early, as by `| head`; a full
/// disk) loses only the text: a command's output to a closed pipe ends quietly, as `ls | head`
/// does, and a run still stops its nodes and writes its bundle, where `print!` would panic.
pub(crate) fn out(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

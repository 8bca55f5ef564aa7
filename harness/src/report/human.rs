//! libtest-style output: a line per case as it finishes, failure details, a table by area.

use std::fmt::Write as _;

use super::{CaseReport, Outcome, RunReport};

/// The header printed before the cases run.
pub fn header(count: usize, backend: &str, agent: &str) -> String {
    format!(
        "\nrunning {count} case{} on {backend} with {agent}\n",
        if count == 1 { "" } else { "s" }
    )
}

/// `test area::case ... ok (1.2s)` for one finished case.
pub fn line(case: &CaseReport) -> String {
    match case.outcome {
        Outcome::Passed => format!(
            "test {} ... ok ({:.1}s)",
            case.name,
            case.duration.as_secs_f64()
        ),
        Outcome::Failed => format!(
            "test {} ... FAILED ({:.1}s)",
            case.name,
            case.duration.as_secs_f64()
        ),
        Outcome::Ignored => format!(
            "test {} ... ignored, {}",
            case.name,
            case.reason.as_deref().unwrap_or("")
        ),
        Outcome::Unsupported => format!(
            "test {} ... unsupported, {} ({:.1}s)",
            case.name,
            case.reason.as_deref().unwrap_or(""),
            case.duration.as_secs_f64()
        ),
    }
}

/// A status line on a terminal (stderr), redrawn as cases finish: how many
/// are done of how many, the time so far, the failures so far. Nothing when
/// stderr is not a terminal (CI logs, pipes).
#[derive(Debug)]
pub struct Progress {
    total: usize,
    done: usize,
    failed: usize,
    started: std::time::Instant,
    terminal: bool,
}

impl Progress {
    /// Progress over `total` cases.
    pub fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Self {
            total,
            done: 0,
            failed: 0,
            started: std::time::Instant::now(),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// The status after `case` finished.
    pub fn status(&self) -> String {
        format!(
            "[{}/{}] {:.0}s, {} failed",
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64(),
            self.failed
        )
    }

    /// Counts a finished case and redraws the status line.
    pub fn done(&mut self, case: &CaseReport) {
        self.done += 1;
        self.failed += usize::from(case.outcome == Outcome::Failed);
        if self.terminal {
            eprint!("{}", self.status());
        }
    }

    /// Erases the status line (before other output).
    pub fn clear(&self) {
        if self.terminal {
            // Carriage return, then erase the line.
            eprint!("\r\x1b[2K");
        }
    }
}

/// Failure details, the summary table and the result line.
pub fn footer(report: &RunReport) -> String {
    let mut out = String::new();
    let failed: Vec<&CaseReport> = report
        .cases
        .iter()
        .filter(|c| c.outcome == Outcome::Failed)
        .collect();
    if !failed.is_empty() {
        out.push_str("\nfailures:\n");
        for c in &failed {
            let _ = writeln!(out, "\n---- {} ----", c.name);
            let _ = writeln!(out, "mirrors: {}", c.description.trim());
            if let (Some(node), Some(ns)) = (&c.node, &c.namespace) {
                let _ = writeln!(out, "node {node}, namespace {ns}");
            }
            for f in &c.failures {
                let _ = writeln!(out, "{f}");
            }
            if !c.timeline.is_empty() {
                let _ = writeln!(out, "timeline (watched states, time since case start):");
                for t in &c.timeline {
                    let _ = writeln!(out, "  {t}");
                }
            }
            if !c.agent_log.is_empty() {
                let _ = writeln!(out, "agent log (last {} lines):", c.agent_log.len());
                for l in &c.agent_log {
                    let _ = writeln!(out, "  | {l}");
                }
            }
        }
        out.push_str("\nfailures:\n");
        for c in &failed {
            let _ = writeln!(out, "    {}", c.name);
        }
    }
    for note in &report.profile_notes {
        let _ = writeln!(out, "\nprofile: {note}");
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<16} {:>6} {:>6} {:>7} {:>9}",
        "area", "passed", "failed", "ignored", "time"
    );
    for (area, p, f, i, d) in report.by_area() {
        let _ = writeln!(
            out,
            "{area:<16} {p:>6} {f:>6} {i:>7} {:>8.1}s",
            d.as_secs_f64()
        );
    }
    let (p, f, i) = report.counts();
    let _ = writeln!(
        out,
        "{:<16} {p:>6} {f:>6} {i:>7} {:>8.1}s (wall)",
        "total",
        report.duration.as_secs_f64()
    );
    if report.interrupted {
        out.push_str(
            "\ninterrupted: the remaining cases did not run; everything created was deleted\n",
        );
    }
    let _ = writeln!(
        out,
        "\ntest result: {}. {p} passed; {f} failed; {i} ignored; finished in {:.2}s",
        if report.success() { "ok" } else { "FAILED" },
        report.duration.as_secs_f64()
    );
    out
}

/// The whole human report (header, lines, footer) at once.
pub fn render(report: &RunReport) -> String {
    let mut out = header(report.cases.len(), &report.backend, &report.agent);
    for c in &report.cases {
        out.push_str(&line(c));
        out.push('\n');
    }
    out.push_str(&footer(report));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_cases_and_failures() {
        let report = super::super::sample();
        let mut progress = Progress::new(3);
        progress.terminal = false;
        progress.done(&report.cases[0]);
        progress.done(&report.cases[1]);
        let status = progress.status();
        assert!(status.starts_with("[2/3] "), "{status}");
        assert!(status.ends_with("s, 1 failed"), "{status}");
    }

    #[test]
    fn renders_lines_failures_and_table() {
        let text = render(&super::super::sample());
        assert!(text.contains("running 3 cases on embedded with reference agent"));
        assert!(text.contains("test deletion::graceful ... FAILED (2.5s)"));
        assert!(text.contains("test lifecycle::exit ... ok (1.2s)"));
        assert!(text.contains("test node::runtime-down ... ignored, requires runtime-control"));
        assert!(text.contains("---- deletion::graceful ----"));
        assert!(text.contains("  +  1.000s MODIFIED phase=Running"));
        assert!(text.contains("  | INFO agent: synced pod <p>"));
        assert!(
            text.contains("deletion              0      1       0      2.5s"),
            "{text}"
        );
        assert!(text.contains("test result: FAILED. 1 passed; 1 failed; 1 ignored"));
    }
}

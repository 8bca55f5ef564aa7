//! `--format junit`: JUnit XML (one `testsuite` per area) through `quick-junit`.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::{Outcome, RunReport};

/// Characters XML 1.0 cannot carry at all (control characters such as ANSI escapes) become `?`.
fn xml_safe(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => '?',
            c => c,
        })
        .collect()
}

/// The JUnit XML document.
pub fn render(report: &RunReport) -> String {
    let mut junit = Report::new("nodeconform");
    junit.set_time(report.duration);
    for (area, _, _, _, time) in report.by_area() {
        let mut suite = TestSuite::new(area.clone());
        suite.set_time(time);
        for c in report.cases.iter().filter(|c| c.area == area) {
            let status = match c.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Ignored | Outcome::Unsupported => {
                    let mut s = TestCaseStatus::skipped();
                    if let Some(r) = &c.reason {
                        s.set_message(xml_safe(r));
                    }
                    s
                }
                Outcome::Failed => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    let first = c.failures.first().map(String::as_str).unwrap_or("failed");
                    s.set_message(xml_safe(first.lines().next().unwrap_or(first)));
                    let mut body = c.failures.join("\n");
                    if !c.timeline.is_empty() {
                        body.push_str("\n\ntimeline (watched states, time since case start):\n");
                        body.push_str(&c.timeline.join("\n"));
                    }
                    s.set_description(xml_safe(&body));
                    s.set_type("expectation");
                    s
                }
            };
            let mut tc = TestCase::new(c.name.clone(), status);
            tc.set_classname(format!("nodeconform.{area}"));
            tc.set_time(c.duration);
            if !c.agent_log.is_empty() {
                tc.set_system_out(xml_safe(&c.agent_log.join("\n")));
            }
            suite.add_test_case(tc);
        }
        junit.add_test_suite(suite);
    }
    junit.to_string().unwrap_or_else(|e| {
        format!(
            "<!-- junit serialization failed: {} -->",
            xml_safe(&e.to_string())
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_valid_junit_that_round_trips() {
        let xml = super::render(&super::super::sample());
        assert!(xml.starts_with("<?xml"));
        let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        assert_eq!(parsed.tests, 3);
        assert_eq!(parsed.failures, 1);
        assert_eq!(parsed.test_suites.len(), 3);
        assert!(
            xml.contains("&lt;within&gt; &amp; &quot;quotes&quot;"),
            "{xml}"
        );
        assert!(!xml.contains('\u{1b}'));
    }
}

//! `--format json`: the [`super::RunReport`] as JSON, field names in camelCase.

use super::RunReport;

/// Pretty JSON of the report.
pub fn render(report: &RunReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn has_cases_outcomes_and_timelines() {
        let v: serde_json::Value =
            serde_json::from_str(&super::render(&super::super::sample())).unwrap();
        assert_eq!(v["cases"][0]["outcome"], "failed");
        assert_eq!(v["cases"][0]["durationMs"], 2500);
        assert_eq!(
            v["cases"][0]["timeline"][1],
            "+  1.000s MODIFIED phase=Running"
        );
        assert_eq!(v["cases"][2]["outcome"], "ignored");
        assert!(v["cases"][1].get("failures").is_none());
    }
}

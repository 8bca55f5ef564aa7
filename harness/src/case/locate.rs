//! Where in a case file's text a problem found after parsing is reported.

/// Where in the text a semantic problem is reported.
pub(super) enum Anchor {
    /// The first line where `key:` is written.
    Key(String),
    /// A top-level key (`name:`, `pod:`).
    TopKey(&'static str),
    /// The n-th item of the top-level `steps:` list.
    Step(usize),
}

impl Anchor {
    pub(super) fn locate(&self, text: &str) -> (usize, usize) {
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

/// A semantic problem with a case and where to report it.
pub(super) struct Problem {
    pub(super) anchor: Anchor,
    pub(super) message: String,
}

pub(super) fn problem(anchor: Anchor, message: impl Into<String>) -> Problem {
    Problem {
        anchor,
        message: message.into(),
    }
}

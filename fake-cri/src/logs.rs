//! Container output in the CRI log format, so `kubectl logs` works through a
//! real kubelet: `<RFC3339Nano> <stream> <F|P> <text>`, one entry per line,
//! `P` for a partial line (output that did not end in a newline).

use std::io::Write;
use std::path::PathBuf;

use chrono::{SecondsFormat, Utc};
use tokio::sync::broadcast;

use crate::script::{Output, Stream};

/// Appends a container's output to its log file. The file is opened per
/// write, so a log rotated by the kubelet (`ReopenContainerLog`) is followed.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: Option<PathBuf>,
    attached: Option<broadcast::Sender<(Stream, String)>>,
}

impl LogFile {
    /// A writer to `path`; `None` (no log path in the request) discards output.
    pub(crate) fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            attached: None,
        }
    }

    /// Also hands every write to the clients attached through `attached`.
    pub(crate) fn attached(mut self, attached: broadcast::Sender<(Stream, String)>) -> Self {
        self.attached = Some(attached);
        self
    }

    /// Creates the file (and its directory) empty if it does not exist yet,
    /// as a runtime does when it starts a container.
    pub(crate) fn create(&self) {
        if let Some(path) = &self.path {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(error) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                tracing::warn!(path = %path.display(), %error, "cannot create container log");
            }
        }
    }
}

/// Formats text as CRI log entries.
pub(crate) fn format_entries(stream: Stream, text: &str) -> String {
    let stream = match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    let time = Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true);
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, tag, next) = match rest.find('\n') {
            Some(end) => (&rest[..end], 'F', &rest[end + 1..]),
            None => (rest, 'P', ""),
        };
        out.push_str(&format!("{time} {stream} {tag} {line}\n"));
        rest = next;
    }
    out
}

impl Output for LogFile {
    fn write(&mut self, stream: Stream, text: &str) {
        if let Some(attached) = &self.attached {
            // No receivers is no one attached.
            let _ = attached.send((stream, text.to_owned()));
        }
        let Some(path) = &self.path else { return };
        let entries = format_entries(stream, text);
        let result = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(entries.as_bytes()));
        if let Err(error) = result {
            tracing::warn!(path = %path.display(), %error, "cannot write container log");
        }
    }
}

/// The output of an exec, captured for the `ExecSync` response.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output for Captured {
    fn write(&mut self, stream: Stream, text: &str) {
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(text.as_bytes()),
            Stream::Stderr => self.stderr.extend_from_slice(text.as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_format() {
        let out = format_entries(Stream::Stdout, "a\nb\npartial");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(" stdout F a"), "{}", lines[0]);
        assert!(lines[1].ends_with(" stdout F b"));
        assert!(lines[2].ends_with(" stdout P partial"));
        let time = lines[0].split(' ').next().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok());
        assert_eq!(
            format_entries(Stream::Stderr, "x\n").split(' ').nth(1),
            Some("stderr")
        );
        assert!(format_entries(Stream::Stdout, "").is_empty());
    }
}

//! Container output in the CRI log format, so `kubectl logs` works through a
//! real kubelet: `<RFC3339Nano> <stream> <F|P> <text>`, one entry per line,
//! `P` for a partial line (output that did not end in a newline).

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use chrono::{SecondsFormat, Utc};
use tokio::sync::broadcast;

use crate::script::{Output, Stream};

/// Appends a container's output to its log file. The file is opened per
/// write, so a log rotated by the kubelet (`ReopenContainerLog`) is followed.
#[derive(Debug, Clone)]
pub(crate) struct LogFile {
    path: Option<PathBuf>,
    attached: Option<broadcast::Sender<(Stream, Bytes)>>,
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
    pub(crate) fn attached(mut self, attached: broadcast::Sender<(Stream, Bytes)>) -> Self {
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

/// Formats output as CRI log entries: one per line, the bytes as written.
pub(crate) fn format_entries(stream: Stream, data: &[u8]) -> Vec<u8> {
    let stream = match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    let time = Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true);
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (line, tag, next) = match rest.iter().position(|b| *b == b'\n') {
            Some(end) => (&rest[..end], 'F', &rest[end + 1..]),
            None => (rest, 'P', &[][..]),
        };
        out.extend_from_slice(format!("{time} {stream} {tag} ").as_bytes());
        out.extend_from_slice(line);
        out.push(b'\n');
        rest = next;
    }
    out
}

impl Output for LogFile {
    fn write(&mut self, stream: Stream, data: &[u8]) {
        self.append(stream, data);
    }
}

impl LogFile {
    /// Appends output to the log (and hands it to attached clients): the
    /// main process's and its servers' writes go through here.
    pub(crate) fn append(&self, stream: Stream, data: &[u8]) {
        if let Some(attached) = &self.attached {
            // No receivers is no one attached.
            let _ = attached.send((stream, Bytes::copy_from_slice(data)));
        }
        let Some(path) = &self.path else { return };
        let entries = format_entries(stream, data);
        let result = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(&entries));
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
    fn write(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(data),
            Stream::Stderr => self.stderr.extend_from_slice(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_format() {
        let out = String::from_utf8(format_entries(Stream::Stdout, b"a\nb\npartial")).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(" stdout F a"), "{}", lines[0]);
        assert!(lines[1].ends_with(" stdout F b"));
        assert!(lines[2].ends_with(" stdout P partial"));
        let time = lines[0].split(' ').next().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok());
        assert_eq!(
            String::from_utf8(format_entries(Stream::Stderr, b"x\n"))
                .unwrap()
                .split(' ')
                .nth(1),
            Some("stderr")
        );
        assert!(format_entries(Stream::Stdout, b"").is_empty());
    }
}

//! The CRI log format, read in one place: for `kubectl logs` ([`crate::log_reader`])
//! and for `terminationMessagePolicy: FallbackToLogsOnError` (the kubelet's
//! `readLastStringFromContainerLogs`, the tail of the log).
//!
//! A CRI log line is `<RFC3339Nano> <stdout|stderr> <tag>[:<tag>…] <text>`;
//! the tag `P` marks a partial entry, whose text continues on the next line
//! without a newline; anything else (`F`) ends the line.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use k8s_openapi::jiff::Timestamp;

/// Most log lines a termination message takes (`MaxContainerTerminationMessageLogLines`).
pub const MAX_TERMINATION_MESSAGE_LOG_LINES: usize = 80;
/// Most bytes a termination message takes from the log (`MaxContainerTerminationMessageLogLength`).
pub const MAX_TERMINATION_MESSAGE_LOG_LENGTH: usize = 1024 * 2;

/// How much of the end of the file is read: enough for the last
/// [`MAX_TERMINATION_MESSAGE_LOG_LENGTH`] bytes of content plus the
/// `<time> <stream> <tag> ` prefixes of [`MAX_TERMINATION_MESSAGE_LOG_LINES`] lines.
const TAIL_READ_BYTES: u64 = 8 * MAX_TERMINATION_MESSAGE_LOG_LENGTH as u64;

/// The termination message taken from the log at `path`: the content of its
/// last 80 lines, at most its last 2048 bytes.
pub fn termination_message_from_log(path: &Path) -> io::Result<String> {
    let raw = read_end(path, TAIL_READ_BYTES)?;
    Ok(log_tail_content(
        &raw,
        MAX_TERMINATION_MESSAGE_LOG_LINES,
        MAX_TERMINATION_MESSAGE_LOG_LENGTH,
    ))
}

/// At most this much of a termination-message file is reported
/// (`kubecontainer.MaxContainerTerminationMessageLength`).
pub const MAX_TERMINATION_MESSAGE_LENGTH: u64 = 1024 * 4;

/// The termination message a container wrote to the file mounted at its
/// `terminationMessagePath`: the file's last 4 KiB, as the kubelet reads it.
pub fn termination_message_from_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(
        len.saturating_sub(MAX_TERMINATION_MESSAGE_LENGTH),
    ))?;
    let mut raw = Vec::new();
    file.take(MAX_TERMINATION_MESSAGE_LENGTH)
        .read_to_end(&mut raw)?;
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

/// The last `max` bytes of the file at `path`, starting at a line boundary
/// when the file is longer (the first, cut line is dropped).
fn read_end(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut raw = Vec::new();
    file.take(max).read_to_end(&mut raw)?;
    if start > 0 {
        let cut = raw
            .iter()
            .position(|&b| b == b'\n')
            .map_or(raw.len(), |i| i + 1);
        raw.drain(..cut);
    }
    Ok(raw)
}

/// The content of the last `max_lines` CRI log lines of `raw`, rejoined
/// (full entries end with a newline, partial ones do not), keeping at most
/// the last `max_bytes` bytes. Malformed lines are skipped.
pub fn log_tail_content(raw: &[u8], max_lines: usize, max_bytes: usize) -> String {
    let body = raw.strip_suffix(b"\n").unwrap_or(raw);
    if body.is_empty() {
        return String::new();
    }
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    let mut content = Vec::new();
    for line in &lines[lines.len().saturating_sub(max_lines)..] {
        if let Some(entry) = parse_cri_log_line(line) {
            content.extend_from_slice(entry.text);
            if !entry.partial {
                content.push(b'\n');
            }
        }
    }
    let tail = &content[content.len().saturating_sub(max_bytes)..];
    String::from_utf8_lossy(tail).into_owned()
}

/// The stream a log entry was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
}

/// One parsed CRI log line.
#[derive(Debug, PartialEq, Eq)]
pub struct LogEntry<'a> {
    /// The time as written (`RFC3339Nano`).
    pub time: &'a str,
    /// When it was written.
    pub timestamp: Timestamp,
    /// The stream.
    pub stream: Stream,
    /// The text after the prefix, without the line's newline.
    pub text: &'a [u8],
    /// A partial entry (`P`), continued on the next line.
    pub partial: bool,
}

/// Parses `<RFC3339Nano> <stdout|stderr> <tags> <text>` (without the newline);
/// `None` if the line is malformed.
pub fn parse_cri_log_line(line: &[u8]) -> Option<LogEntry<'_>> {
    let mut parts = line.splitn(4, |&b| b == b' ');
    let time = std::str::from_utf8(parts.next()?).ok()?;
    let timestamp = time.parse::<Timestamp>().ok()?;
    let stream = match parts.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let tags = parts.next()?;
    let text = parts.next()?;
    let partial = tags.split(|&b| b == b':').next() == Some(b"P");
    Some(LogEntry {
        time,
        timestamp,
        stream,
        text,
        partial,
    })
}

/// A CRI log time as Go's `RFC3339Nano` layout prints it after parsing, which
/// is how the kubelet writes `--timestamps`: trailing zeros of the fraction
/// dropped (the dot too when nothing is left), a zero offset written `Z`.
pub fn go_rfc3339_nano(time: &str) -> String {
    let split = time
        .rfind(['Z', 'z', '+', '-'])
        .filter(|&i| i > 10)
        .unwrap_or(time.len());
    let (clock, offset) = time.split_at(split);
    let clock = match clock.split_once('.') {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                whole.to_owned()
            } else {
                format!("{whole}.{fraction}")
            }
        }
        None => clock.to_owned(),
    };
    let offset = match offset {
        "z" | "+00:00" | "-00:00" => "Z",
        other => other,
    };
    format!("{clock}{offset}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-01-02T03:04:05.123456789Z";

    fn line(stream: &str, tag: &str, text: &str) -> String {
        format!("{T} {stream} {tag} {text}\n")
    }

    #[test]
    fn parses_full_and_partial_lines() {
        let line = format!("{T} stdout F hello world");
        let entry = parse_cri_log_line(line.as_bytes()).unwrap();
        assert_eq!(entry.time, T);
        assert_eq!(
            entry.timestamp.to_string(),
            "2026-01-02T03:04:05.123456789Z"
        );
        assert_eq!(entry.stream, Stream::Stdout);
        assert_eq!((entry.text, entry.partial), (&b"hello world"[..], false));
        let line = format!("{T} stderr P part");
        let entry = parse_cri_log_line(line.as_bytes()).unwrap();
        assert_eq!(entry.stream, Stream::Stderr);
        assert_eq!((entry.text, entry.partial), (&b"part"[..], true));
        let line = format!("{T} stdout F ");
        let entry = parse_cri_log_line(line.as_bytes()).unwrap();
        assert_eq!((entry.text, entry.partial), (&b""[..], false));
        let line = format!("{T} stdout P:x later");
        assert!(parse_cri_log_line(line.as_bytes()).unwrap().partial);
    }

    #[test]
    fn times_print_as_go_prints_rfc3339_nano() {
        for (written, printed) in [
            (
                "2026-01-02T03:04:05.123456789Z",
                "2026-01-02T03:04:05.123456789Z",
            ),
            ("2026-01-02T03:04:05.120000000Z", "2026-01-02T03:04:05.12Z"),
            ("2026-01-02T03:04:05.000000000Z", "2026-01-02T03:04:05Z"),
            ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"),
            ("2026-01-02T03:04:05.5+00:00", "2026-01-02T03:04:05.5Z"),
            (
                "2026-01-02T03:04:05.500+02:00",
                "2026-01-02T03:04:05.5+02:00",
            ),
            (
                "2026-01-02T03:04:05.010-07:00",
                "2026-01-02T03:04:05.01-07:00",
            ),
        ] {
            assert_eq!(go_rfc3339_nano(written), printed, "{written}");
        }
    }

    #[test]
    fn rejects_malformed_lines() {
        for bad in [
            "",
            "garbage",
            "not-a-time stdout F text",
            &format!("{T} stdin F text"),
            &format!("{T} stdout F"),
            &format!("{T} stdout"),
        ] {
            assert_eq!(parse_cri_log_line(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_cri_log_line(&[0xff, b' ', 0xfe]), None);
    }

    #[test]
    fn rejoins_content_and_skips_malformed_lines() {
        let raw = [
            line("stdout", "F", "first"),
            "garbage\n".to_owned(),
            line("stderr", "P", "last "),
            line("stdout", "F", "words"),
        ]
        .concat();
        assert_eq!(
            log_tail_content(raw.as_bytes(), 80, 2048),
            "first\nlast words\n"
        );
        assert_eq!(log_tail_content(b"", 80, 2048), "");
        assert_eq!(log_tail_content(b"\n\n", 80, 2048), "");
    }

    #[test]
    fn keeps_the_last_lines_and_bytes() {
        let raw: String = (0..100)
            .map(|i| line("stdout", "F", &format!("l{i}")))
            .collect();
        let content = log_tail_content(raw.as_bytes(), 80, 2048);
        assert!(content.starts_with("l20\n") && content.ends_with("l99\n"));
        assert_eq!(content.lines().count(), 80);

        let long = line("stdout", "F", &"x".repeat(5000));
        let raw = format!("{long}{}", line("stdout", "F", "end"));
        let content = log_tail_content(raw.as_bytes(), 80, 2048);
        assert_eq!(content.len(), 2048);
        assert!(content.ends_with("xx\nend\n"));
    }

    #[test]
    fn reads_only_the_end_of_a_long_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("0.log");
        let mut raw: String = (0..2000)
            .map(|i| line("stdout", "F", &format!("line {i}")))
            .collect();
        raw.push_str(&line("stderr", "F", "last words"));
        std::fs::write(&path, raw).expect("write log");
        let message = termination_message_from_log(&path).expect("read log");
        assert_eq!(message.lines().count(), 80);
        assert!(message.starts_with("line 1921\n"), "{message:?}");
        assert!(message.ends_with("line 1999\nlast words\n"));
        assert!(termination_message_from_log(&dir.path().join("missing.log")).is_err());
    }

    #[test]
    fn termination_file_keeps_its_last_4_kib() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("termination-log");
        std::fs::write(&path, "bye\n").unwrap();
        assert_eq!(termination_message_from_file(&path).unwrap(), "bye\n");
        let long = format!("{}{}", "x".repeat(5000), "y".repeat(4096));
        std::fs::write(&path, &long).unwrap();
        assert_eq!(
            termination_message_from_file(&path).unwrap(),
            "y".repeat(4096)
        );
        assert!(termination_message_from_file(&dir.path().join("missing")).is_err());
    }
}

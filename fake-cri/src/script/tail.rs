//! `tail [-n N] [-f|-F] FILE…`: the last lines of files, and following them.
//!
//! `tail -f /dev/null` is how conformance tests and users keep a container
//! running. As a container's command it is PID 1 (busybox `sh -c` runs its last
//! command with `exec`), so it has no handler for SIGTERM and the kernel drops
//! the signal: the container runs until the stop timeout's SIGKILL, as on
//! containerd + runc. The shell's own PID-1 rule gives exactly that, since
//! following is a wait that signals interrupt like `sleep`.

use std::time::Duration;

use super::forms::Refused;
use super::shell::{Shell, Stream};
use super::signals::Stop;

/// How often a followed file is read again (busybox's `tail -f` sleeps 1 s).
const FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// The parsed form of a `tail` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tail {
    /// `-n N`: how many lines from the end (10 by default).
    pub lines: usize,
    /// `-f` / `-F`: keep reading what is appended.
    pub follow: bool,
    /// The files (none: standard input, without `-f`).
    pub files: Vec<String>,
}

impl Tail {
    /// Parses `tail`'s options and operands.
    pub(super) fn parse(args: &[String]) -> Result<Self, Refused> {
        let mut tail = Self {
            lines: 10,
            follow: false,
            files: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "-f" | "-F" => tail.follow = true,
                "-n" => {
                    let count = args
                        .next()
                        .ok_or_else(|| Refused::new("tail: option requires an argument -- n"))?;
                    tail.lines = line_count(count)?;
                }
                option if option.starts_with("-n") => tail.lines = line_count(&option[2..])?,
                // `tail -5` is `tail -n 5`.
                option if option.len() > 1 && option[1..].chars().all(|c| c.is_ascii_digit()) => {
                    tail.lines = line_count(&option[1..])?;
                }
                option if option.starts_with('-') && option.len() > 1 => {
                    return Err(Refused::new(format!(
                        "tail: option {option} is not interpreted (only -n N, -N, -f and -F)"
                    )));
                }
                file => tail.files.push(file.to_owned()),
            }
        }
        if (tail.follow && tail.files.is_empty()) || tail.files.iter().any(|f| f == "-") {
            return Err(Refused::new(
                "tail: following standard input, and '-', are not interpreted (name a file)",
            ));
        }
        Ok(tail)
    }
}

fn line_count(text: &str) -> Result<usize, Refused> {
    text.parse()
        .map_err(|_| Refused::new(format!("tail: invalid number '{text}'")))
}

/// The last `lines` lines of `content` (a final line without a newline counts).
fn last_lines(content: &[u8], lines: usize) -> &[u8] {
    if lines == 0 {
        return &content[content.len()..];
    }
    // A trailing newline ends the last line; it does not start another.
    let body = content.strip_suffix(b"\n").unwrap_or(content);
    let start = body
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b'\n')
        .nth(lines - 1)
        .map_or(0, |(i, _)| i + 1);
    &content[start..]
}

impl Shell<'_> {
    /// `tail`: prints the last lines of each file; with `-f`, follows them
    /// until a signal ends the process. Messages are busybox's.
    pub(super) async fn tail(&mut self, args: &[String]) -> Result<i32, Stop> {
        let tail = match Tail::parse(args) {
            Ok(tail) => tail,
            Err(refused) => return Ok(self.usage(&refused.0)),
        };
        if tail.files.is_empty() {
            let content = self.read_all().await;
            self.emit_bytes(Stream::Stdout, last_lines(&content, tail.lines));
            return Ok(0);
        }
        let mut status = 0;
        // What was read of each file that could be opened.
        let mut read: Vec<(String, usize)> = Vec::new();
        let headers = tail.files.len() > 1;
        for path in &tail.files {
            if path == "/dev/null" {
                read.push((path.clone(), 0));
                continue;
            }
            match self.context.files.read(path) {
                Ok(content) => {
                    if headers {
                        let gap = if read.is_empty() { "" } else { "\n" };
                        self.emit(Stream::Stdout, &format!("{gap}==> {path} <==\n"));
                    }
                    self.emit_bytes(Stream::Stdout, last_lines(&content, tail.lines));
                    read.push((path.clone(), content.len()));
                }
                Err(error) => status = self.fail(format!("tail: can't open '{path}': {error}")),
            }
        }
        if !tail.follow {
            return Ok(status);
        }
        if read.is_empty() {
            return Ok(self.fail("tail: no files".to_owned()));
        }
        loop {
            self.sleep(FOLLOW_INTERVAL).await?;
            for (path, offset) in &mut read {
                if path == "/dev/null" {
                    continue;
                }
                // A file that went away is read again when it comes back.
                let Ok(content) = self.context.files.read(path) else {
                    continue;
                };
                if content.len() < *offset {
                    // Truncated: busybox starts again from its beginning.
                    *offset = 0;
                }
                if content.len() > *offset {
                    let new = content[*offset..].to_vec();
                    *offset = content.len();
                    self.emit_bytes(Stream::Stdout, &new);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn forms() {
        let tail = Tail::parse(&args("-f /dev/null")).unwrap();
        assert!(tail.follow);
        assert_eq!(tail.files, ["/dev/null"]);
        assert_eq!(Tail::parse(&args("-n 3 /a")).unwrap().lines, 3);
        assert_eq!(Tail::parse(&args("-n3 /a /b")).unwrap().lines, 3);
        for (line, wanted) in [
            ("-c 5 /a", "option -c"),
            ("-n x /a", "invalid number 'x'"),
            ("-f", "standard input"),
            ("-n", "requires an argument"),
        ] {
            let refused = Tail::parse(&args(line)).expect_err(line);
            assert!(refused.0.contains(wanted), "{line}: {}", refused.0);
        }
    }

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\n", 10), b"a\nb\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
        assert_eq!(last_lines(b"", 3), b"");
    }
}

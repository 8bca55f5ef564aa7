//! Reading a container's CRI log for `kubectl logs` (the kubelet's
//! `kuberuntime/logs.ReadLogs`): the last `tailLines` lines, at most
//! `limitBytes` bytes, entries older than `since` skipped, `timestamps`
//! prefixed, and with `follow` the lines written later, until the container
//! has exited and its log is read to the end, the client goes away or the
//! agent stops.
//!
//! [`open`] does everything that can fail with an answer to the client (open
//! the file, find where the tail starts) before the response begins; [`Log::stream`]
//! then sends the content in chunks.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::jiff::Timestamp;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use crate::container_log::{go_rfc3339_nano, parse_cri_log_line};

/// What to read (the kubelet's `LogOptions`, made from a `PodLogOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Only the last this many lines (`tailLines`).
    pub tail: Option<u64>,
    /// At most this many bytes (`limitBytes`).
    pub limit_bytes: Option<u64>,
    /// Skip entries written before this time (`sinceSeconds`/`sinceTime`, the later of both).
    pub since: Option<Timestamp>,
    /// Prefix every line with its time (`timestamps`).
    pub timestamps: bool,
    /// Keep reading what is written later (`follow`).
    pub follow: bool,
}

/// Errors opening a log, worded as the kubelet words them: the text is its answer
/// to the client, so it carries the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be opened.
    #[error("failed to open log file {:?}: {error}", path.display().to_string())]
    Open {
        /// The log file.
        path: PathBuf,
        /// The cause.
        error: io::Error,
    },
    /// The start of the tail cannot be found.
    #[error("failed to tail {lines} lines of log file {:?}: {error}", path.display().to_string())]
    Tail {
        /// How many lines were asked for.
        lines: u64,
        /// The log file.
        path: PathBuf,
        /// The cause.
        error: io::Error,
    },
}

/// An open log, positioned where the output starts.
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    file: tokio::fs::File,
    position: u64,
    options: Options,
}

/// How long a follower waits between looks at the file, and how many looks
/// it takes before it asks the runtime again whether the container still runs
/// (the kubelet waits on fsnotify, at most a second).
const POLL: Duration = Duration::from_millis(100);
const POLLS_PER_STATE_CHECK: u32 = 10;
/// Output is sent in chunks of about this size.
const CHUNK: usize = 32 * 1024;

/// Opens the log at `path` and finds where the output starts.
pub async fn open(path: &Path, options: Options) -> Result<Log, Error> {
    let owned = path.to_path_buf();
    let tail = options.tail;
    let opened = tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::open(&owned).map_err(|error| Error::Open {
            path: owned.clone(),
            error,
        })?;
        let start = match tail {
            Some(lines) => tail_start(&mut file, lines).map_err(|error| Error::Tail {
                lines,
                path: owned.clone(),
                error,
            })?,
            None => 0,
        };
        file.seek(SeekFrom::Start(start))
            .map_err(|error| Error::Tail {
                lines: tail.unwrap_or(0),
                path: owned.clone(),
                error,
            })?;
        Ok((file, start))
    })
    .await
    .unwrap_or_else(|e| {
        Err(Error::Open {
            path: path.to_path_buf(),
            error: io::Error::other(e),
        })
    });
    let (file, position) = opened?;
    Ok(Log {
        path: path.to_path_buf(),
        file: tokio::fs::File::from_std(file),
        position,
        options,
    })
}

/// The offset where the last `lines` lines of `file` start (the kubelet's
/// `tail.FindTailLineStartIndex`): after the `lines + 1`-th newline from the end.
pub fn tail_start(file: &mut std::fs::File, lines: u64) -> io::Result<u64> {
    const BLOCK: u64 = 1024;
    let size = file.seek(SeekFrom::End(0))?;
    let mut right = size;
    let mut newlines = 0u64;
    while right > 0 {
        let left = right.saturating_sub(BLOCK);
        let mut block = vec![0; (right - left) as usize];
        file.seek(SeekFrom::Start(left))?;
        file.read_exact(&mut block)?;
        for (i, &b) in block.iter().enumerate().rev() {
            if b == b'\n' {
                newlines += 1;
                if newlines > lines {
                    return Ok(left + i as u64 + 1);
                }
            }
        }
        right = left;
    }
    Ok(0)
}

/// How the content of one entry is written (the kubelet's `logWriter`).
struct Writer {
    since: Option<Timestamp>,
    timestamps: bool,
    remain: u64,
}

impl Writer {
    /// Appends an entry's output to `out`; `false` once the byte limit is reached.
    fn write(
        &mut self,
        out: &mut Vec<u8>,
        time: &str,
        at: Timestamp,
        content: &[u8],
        new_line: bool,
    ) -> bool {
        if self.since.is_some_and(|since| at < since) {
            return true;
        }
        let mut line = Vec::with_capacity(content.len() + 36);
        if self.timestamps && new_line {
            line.extend_from_slice(go_rfc3339_nano(time).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(content);
        let n = line
            .len()
            .min(usize::try_from(self.remain).unwrap_or(usize::MAX));
        out.extend_from_slice(&line[..n]);
        self.remain -= n as u64;
        self.remain > 0
    }
}

impl Log {
    /// Sends the log to `out` in chunks. Ends when everything asked for is
    /// sent; with `follow`, when the container (asked through `running`) has
    /// exited and its log is read to the end, when `out` is closed (the client
    /// went away) or on `shutdown`. An error reading the file ends the output.
    pub async fn stream<F>(
        self,
        out: mpsc::Sender<Bytes>,
        mut running: impl FnMut() -> F,
        mut shutdown: watch::Receiver<bool>,
    ) where
        F: Future<Output = bool>,
    {
        let Log {
            path,
            file,
            mut position,
            options,
        } = self;
        let mut reader = BufReader::new(file);
        let mut writer = Writer {
            since: options.since,
            timestamps: options.timestamps,
            remain: options.limit_bytes.unwrap_or(u64::MAX),
        };
        let mut lines_left = options.tail.filter(|_| !options.follow);
        let mut pending = Vec::new();
        let mut line = Vec::new();
        let mut new_line = true;
        let mut still_running = true;
        let mut stop = false;
        loop {
            if stop || lines_left == Some(0) {
                break;
            }
            match reader.read_until(b'\n', &mut line).await {
                Ok(n) => position += n as u64,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "reading a container log");
                    break;
                }
            }
            if !line.ends_with(b"\n") {
                // The end of the file, maybe in the middle of a line.
                if !options.follow {
                    stop = true;
                    if line.is_empty() {
                        continue;
                    }
                } else {
                    if !still_running {
                        break;
                    }
                    if !flush(&out, &mut pending, &mut shutdown).await {
                        return;
                    }
                    still_running = running().await;
                    if still_running && !wait_for_growth(&path, position, &out, &mut shutdown).await
                    {
                        return;
                    }
                    // Read on (the rest of a partial line is appended to `line`).
                    continue;
                }
            }
            let had_newline = line.ends_with(b"\n");
            let raw = line.strip_suffix(b"\n").unwrap_or(&line);
            if let Some(entry) = parse_cri_log_line(raw) {
                let mut content = entry.text.to_vec();
                if had_newline && !entry.partial {
                    content.push(b'\n');
                }
                let more = writer.write(
                    &mut pending,
                    entry.time,
                    entry.timestamp,
                    &content,
                    new_line,
                );
                new_line = content.is_empty() || content.ends_with(b"\n");
                if !more {
                    stop = true;
                }
                if let Some(left) = lines_left.as_mut() {
                    *left -= 1;
                }
            }
            line.clear();
            if pending.len() >= CHUNK && !flush(&out, &mut pending, &mut shutdown).await {
                return;
            }
        }
        flush(&out, &mut pending, &mut shutdown).await;
    }
}

/// Sends what is pending; `false` when the client went away or the agent
/// stops (a client that stops reading holds the send, not the agent).
async fn flush(
    out: &mpsc::Sender<Bytes>,
    pending: &mut Vec<u8>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    if pending.is_empty() {
        return true;
    }
    let chunk = Bytes::from(std::mem::take(pending));
    tokio::select! {
        sent = out.send(chunk) => sent.is_ok(),
        () = stopping(shutdown) => false,
    }
}

/// Resolves once the agent stops (never, when nothing can stop it any more).
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Waits until the file grows past `position` or a state check is due;
/// `false` when the client went away or the agent stops.
async fn wait_for_growth(
    path: &Path,
    position: u64,
    out: &mpsc::Sender<Bytes>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    for _ in 0..POLLS_PER_STATE_CHECK {
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = out.closed() => return false,
            () = stopping(shutdown) => return false,
        }
        let len = tokio::fs::metadata(path).await.map_or(0, |m| m.len());
        if len > position {
            return true;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: &str, stream: &str, tag: &str, text: &str) -> String {
        format!("{time} {stream} {tag} {text}\n")
    }

    const T1: &str = "2026-01-02T03:04:05.100000000Z";
    const T2: &str = "2026-01-02T03:04:06.000000000Z";

    fn sample() -> String {
        [
            entry(T1, "stdout", "F", "one"),
            entry(T1, "stderr", "P", "two "),
            entry(T1, "stderr", "F", "halves"),
            "garbage\n".to_owned(),
            entry(T2, "stdout", "F", "three"),
        ]
        .concat()
    }

    async fn read(content: &str, options: Options) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, content).unwrap();
        let log = open(&path, options).await.unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let (_stop, shutdown) = watch::channel(false);
        log.stream(tx, || async { false }, shutdown).await;
        let mut out = Vec::new();
        while let Some(chunk) = rx.recv().await {
            out.extend_from_slice(&chunk);
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn reads_every_entry_and_joins_partial_ones() {
        let all = read(&sample(), Options::default()).await;
        assert_eq!(all, "one\ntwo halves\nthree\n");
    }

    #[tokio::test]
    async fn tail_counts_file_lines_from_the_end() {
        let tail = |n| Options {
            tail: Some(n),
            ..Options::default()
        };
        assert_eq!(read(&sample(), tail(1)).await, "three\n");
        assert_eq!(read(&sample(), tail(0)).await, "");
        assert_eq!(read(&sample(), tail(100)).await, "one\ntwo halves\nthree\n");
        // The partial line is one of the two last lines.
        let two = read(&sample(), tail(3)).await;
        assert_eq!(two, "halves\nthree\n");
    }

    #[tokio::test]
    async fn limit_bytes_cuts_the_output() {
        let limit = Options {
            limit_bytes: Some(6),
            ..Options::default()
        };
        assert_eq!(read(&sample(), limit).await, "one\ntw");
    }

    #[tokio::test]
    async fn timestamps_prefix_lines_not_continuations() {
        let stamped = Options {
            timestamps: true,
            ..Options::default()
        };
        assert_eq!(
            read(&sample(), stamped).await,
            "2026-01-02T03:04:05.1Z one\n2026-01-02T03:04:05.1Z two halves\n2026-01-02T03:04:06Z three\n"
        );
    }

    #[tokio::test]
    async fn since_skips_older_entries() {
        let since = Options {
            since: Some("2026-01-02T03:04:05.5Z".parse().unwrap()),
            ..Options::default()
        };
        assert_eq!(read(&sample(), since).await, "three\n");
    }

    #[tokio::test]
    async fn a_last_line_without_newline_is_read() {
        let content = format!("{}{T1} stdout F cut", entry(T1, "stdout", "F", "a"));
        assert_eq!(read(&content, Options::default()).await, "a\ncut");
    }

    #[tokio::test]
    async fn follow_sends_later_lines_until_the_container_exits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, entry(T1, "stdout", "F", "first")).unwrap();
        let options = Options {
            follow: true,
            ..Options::default()
        };
        let log = open(&path, options).await.unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let (_stop, shutdown) = watch::channel(false);
        let (exited_tx, exited) = watch::channel(false);
        let task = tokio::spawn(log.stream(
            tx,
            move || {
                let exited = exited.clone();
                async move { !*exited.borrow() }
            },
            shutdown,
        ));
        let first = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(first.unwrap().unwrap(), "first\n");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write;
        file.write_all(entry(T2, "stdout", "F", "later").as_bytes())
            .unwrap();
        let later = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(later.unwrap().unwrap(), "later\n");
        file.write_all(entry(T2, "stdout", "F", "last words").as_bytes())
            .unwrap();
        exited_tx.send(true).unwrap();
        let mut rest = Vec::new();
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("the follower ends once the container exited")
        {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(rest, b"last words\n");
        task.await.unwrap();
    }

    #[tokio::test]
    async fn follow_ends_when_the_client_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, "").unwrap();
        let options = Options {
            follow: true,
            ..Options::default()
        };
        let log = open(&path, options).await.unwrap();
        let (tx, rx) = mpsc::channel(4);
        let (_stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(log.stream(tx, || async { true }, shutdown));
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the follower noticed the closed client")
            .unwrap();
    }

    #[tokio::test]
    async fn follow_ends_when_the_agent_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, "").unwrap();
        let options = Options {
            follow: true,
            ..Options::default()
        };
        let log = open(&path, options).await.unwrap();
        let (tx, _rx) = mpsc::channel(4);
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(log.stream(tx, || async { true }, shutdown));
        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the follower stopped with the agent")
            .unwrap();
    }

    #[tokio::test]
    async fn a_missing_file_is_the_kubelets_error() {
        let err = open(Path::new("/nonexistent/0.log"), Options::default())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to open log file \"/nonexistent/0.log\": "),
            "{err}"
        );
    }
}

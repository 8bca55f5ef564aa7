//! Redirections: where descriptors 0, 1 and 2 point during a command, and
//! standard input redirected to bytes (a file, a here-document, a pipe).

use std::sync::{Arc, Mutex};

use super::ast::{Redirect, RedirectTarget};
use super::files::FsError;
use super::shell::{Route, Shell, Stream};
use super::signals::Stop;

/// Bytes read as standard input, shared by the commands that read it (the
/// `read`s of a `while read …; done < FILE` loop take one line each).
#[derive(Debug, Default)]
pub(super) struct Buffer {
    data: Vec<u8>,
    pos: usize,
}

/// A [`Buffer`] shared between the commands of a redirection.
pub(super) type SharedInput = Arc<Mutex<Buffer>>;

/// Standard input made of `data`.
pub(super) fn input(data: Vec<u8>) -> SharedInput {
    Arc::new(Mutex::new(Buffer { data, pos: 0 }))
}

impl Buffer {
    /// The next line with its newline, the rest at the end, `None` once empty.
    pub(super) fn line(&mut self) -> Option<String> {
        if self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.pos += end;
        Some(line)
    }

    /// Everything not read yet.
    pub(super) fn rest(&mut self) -> Vec<u8> {
        let rest = self.data[self.pos.min(self.data.len())..].to_vec();
        self.pos = self.data.len();
        rest
    }
}

/// What redirections replace, to put back after the command.
#[derive(Debug, Clone)]
pub(super) struct Saved {
    routes: [Route; 2],
    input: Option<SharedInput>,
}

impl Shell<'_> {
    /// A file or directory just created gets `mode` less the umask (the
    /// files were made as a process with the default umask makes them).
    pub(super) fn created(&mut self, path: &str, mode: u32) {
        if self.umask != super::shell::DEFAULT_UMASK {
            let _ = self.context.files.chmod(path, mode & !self.umask);
        }
    }

    pub(super) fn save_redirections(&self) -> Saved {
        Saved {
            routes: self.routes.clone(),
            input: self.input.clone(),
        }
    }

    pub(super) fn restore_redirections(&mut self, saved: Saved) {
        self.routes = saved.routes;
        self.input = saved.input;
    }

    /// Points the descriptors where `redirects` say; a file is created (or
    /// truncated by `>`) now, as `sh` opens it. The inner `Err` is a
    /// redirection that failed (busybox's message), the outer one a signal.
    pub(super) async fn redirect(
        &mut self,
        redirects: &[Redirect],
    ) -> Result<Result<(), String>, Stop> {
        for redirect in redirects {
            let fd = redirect.fd;
            match &redirect.target {
                RedirectTarget::Fd(target) => match (fd, target) {
                    // `<&0`, `0>&1`…: descriptor 0 stays what it is.
                    (0, _) | (_, Some(0)) => {}
                    (_, None) => self.routes[usize::from(fd == 2)] = Route::Closed,
                    (_, Some(target)) => {
                        self.routes[usize::from(fd == 2)] =
                            self.routes[usize::from(*target == 2)].clone();
                    }
                },
                RedirectTarget::File { path, append } => {
                    let path = self.expand(path).await?;
                    let route = self.route(&path);
                    let existed = self.context.files.metadata(&path, true).is_ok();
                    if let Route::File(path) = &route
                        && let Err(error) = self.context.files.write(path, &[], *append)
                    {
                        let why = match error {
                            FsError::NotFound => "nonexistent directory".to_owned(),
                            other => other.to_string(),
                        };
                        return Ok(Err(format!("sh: can't create {path}: {why}")));
                    }
                    if !existed && matches!(route, Route::File(_)) {
                        self.created(&path, 0o666);
                    }
                    match fd {
                        0 => self.input = Some(input(Vec::new())),
                        _ => self.routes[usize::from(fd == 2)] = route,
                    }
                }
                RedirectTarget::Input(path) => {
                    let path = self.expand(path).await?;
                    let read = match path.as_str() {
                        "/dev/null" => Ok(Vec::new()),
                        _ => self.context.files.read(&path),
                    };
                    let data = match read {
                        Ok(data) => data,
                        Err(error) => {
                            let why = match error {
                                FsError::NotFound => "no such file".to_owned(),
                                other => other.to_string().to_lowercase(),
                            };
                            return Ok(Err(format!("sh: can't open {path}: {why}")));
                        }
                    };
                    match fd {
                        0 => self.input = Some(input(data)),
                        // `1<F`: reading on an output descriptor writes nothing.
                        _ => self.routes[usize::from(fd == 2)] = Route::Null,
                    }
                }
                RedirectTarget::HereDoc(body) => {
                    let text = self.expand(body).await?;
                    if fd == 0 {
                        self.input = Some(input(text.into_bytes()));
                    }
                }
            }
        }
        Ok(Ok(()))
    }

    /// The next line of standard input (with its newline), `None` at its end.
    pub(super) async fn read_line(&mut self) -> Option<String> {
        if let Some(input) = &self.input {
            return input.lock().unwrap_or_else(|e| e.into_inner()).line();
        }
        match self.stdin.as_deref_mut() {
            Some(stdin) => stdin.line().await,
            None => None,
        }
    }

    /// `cat` of standard input: each chunk as it comes (nothing without one).
    pub(super) async fn cat_stdin(&mut self) -> Result<i32, Stop> {
        if let Some(input) = &self.input {
            let rest = input.lock().unwrap_or_else(|e| e.into_inner()).rest();
            self.emit_bytes(Stream::Stdout, &rest);
            return Ok(0);
        }
        while let Some(chunk) = match self.stdin.as_deref_mut() {
            Some(stdin) => stdin.chunk().await,
            None => None,
        } {
            self.emit_bytes(Stream::Stdout, &chunk);
        }
        Ok(0)
    }

    /// All of standard input that is left.
    pub(super) async fn read_all(&mut self) -> Vec<u8> {
        if let Some(input) = &self.input {
            return input.lock().unwrap_or_else(|e| e.into_inner()).rest();
        }
        let mut all = Vec::new();
        while let Some(chunk) = match self.stdin.as_deref_mut() {
            Some(stdin) => stdin.chunk().await,
            None => None,
        } {
            all.extend_from_slice(&chunk);
        }
        all
    }
}

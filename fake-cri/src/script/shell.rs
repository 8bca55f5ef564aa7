//! The shell: runs a parsed script's control flow (lists, `&&`/`||`, loops,
//! conditionals), expands words and routes output, for a container's main
//! process or an exec. Builtins are in `builtins`, signals and traps in `signals`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Program;
use super::ast::{AndOr, Command, Connector, List, Part, RedirectTarget, Simple, Word};
use super::env::Env;
use super::files::FileSystem;
use super::forms::assignment;
use super::input::Input;
use super::signals::{Outcome, Signal, Stop, Trap};

/// What a container's processes see: their files, environment, host name
/// and user. Built when the container is created; its main process and every
/// exec start from a clone (which shares the files).
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The mounts and the in-memory files.
    pub files: FileSystem,
    /// The exported environment the process starts with.
    pub env: Env,
    /// The sandbox's host name (what `hostname` prints).
    pub hostname: String,
    /// The user id (`id -u`).
    pub uid: i64,
    /// The group id (`id -g`).
    pub gid: i64,
    /// The pod's address: what `localhost` reaches (the servers of the pod's
    /// containers listen there). `None` outside a sandbox (tests).
    pub address: Option<std::net::IpAddr>,
}

/// An output stream of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Where a process's output goes: the container log or an exec's buffers.
///
/// Output is bytes: most commands write text, but `cat` of a binary file and
/// `tar cf -` (what `kubectl cp` runs) write whatever the files hold.
pub trait Output: Send {
    /// Writes bytes to a stream.
    fn write(&mut self, stream: Stream, data: &[u8]);
}

pub(super) type Step<'a> = Pin<Box<dyn Future<Output = Result<i32, Stop>> + Send + 'a>>;

/// Where a descriptor points during one command.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Route {
    Stream(Stream),
    Null,
    File(String),
}

/// Loops that do not sleep still take this long per iteration, so a
/// `while true; do :; done` costs a little time instead of a whole core.
const MIN_ITERATION: Duration = Duration::from_millis(1);

/// An interpreter for one process.
pub struct Shell<'a> {
    pub(super) context: Context,
    /// Variables set by the script and not exported (not in `env`).
    pub(super) vars: HashMap<String, String>,
    pub(super) args: Vec<String>,
    pub(super) output: &'a mut dyn Output,
    pub(super) signals: Option<&'a mut mpsc::UnboundedReceiver<Signal>>,
    /// Standard input, if the process has one.
    pub(super) stdin: Option<&'a mut Input>,
    pub(super) pid1: bool,
    pub(super) term: Trap,
    pub(super) on_exit: Option<List>,
    pub(super) pending_term: bool,
    pub(super) status: i32,
    pub(super) routes: [Route; 2],
    /// The status of the last command substitution of the command being
    /// expanded: the status of a command made only of assignments.
    pub(super) substitution_status: Option<i32>,
}

impl<'a> Shell<'a> {
    /// A shell for a container's main process. `pid1` says whether it is
    /// PID 1 of its own PID namespace (then SIGTERM without a trap is
    /// ignored); `signals` delivers `StopContainer`'s and the control API's
    /// signals.
    pub fn main(
        context: Context,
        output: &'a mut dyn Output,
        signals: &'a mut mpsc::UnboundedReceiver<Signal>,
        pid1: bool,
    ) -> Self {
        Self::new(context, output, Some(signals), pid1)
    }

    /// A shell for an exec: it receives no signals (a timeout ends it).
    pub fn exec(context: Context, output: &'a mut dyn Output) -> Self {
        Self::new(context, output, None, false)
    }

    /// Gives the process a standard input.
    #[must_use]
    pub fn with_stdin(mut self, stdin: &'a mut Input) -> Self {
        self.stdin = Some(stdin);
        self
    }

    pub(super) fn new(
        context: Context,
        output: &'a mut dyn Output,
        signals: Option<&'a mut mpsc::UnboundedReceiver<Signal>>,
        pid1: bool,
    ) -> Self {
        Self {
            context,
            vars: HashMap::new(),
            args: Vec::new(),
            output,
            signals,
            stdin: None,
            pid1,
            term: Trap::Default,
            on_exit: None,
            pending_term: false,
            status: 0,
            routes: [Route::Stream(Stream::Stdout), Route::Stream(Stream::Stderr)],
            substitution_status: None,
        }
    }

    /// Runs a program to its end.
    pub async fn run(mut self, program: &Program) -> Outcome {
        match program {
            Program::Server => match self.serve().await {
                Ok(code) | Err(Stop::Exit(code)) => Outcome::exited(code),
                Err(Stop::Signal(outcome)) => outcome,
            },
            Program::Script { list, args } => {
                self.args = args.clone();
                let result = self.list(list).await;
                let result = self.run_exit_trap(result).await;
                match result {
                    Ok(code) | Err(Stop::Exit(code)) => Outcome::exited(code),
                    Err(Stop::Signal(outcome)) => outcome,
                }
            }
        }
    }

    pub(super) async fn run_exit_trap(&mut self, result: Result<i32, Stop>) -> Result<i32, Stop> {
        let Some(handler) = self.on_exit.take() else {
            return result;
        };
        if let Err(Stop::Signal(outcome)) = result {
            // SIGKILL gives no chance to run anything.
            if outcome.exit_code == 137 {
                return result;
            }
        }
        let code = match &result {
            Ok(code) | Err(Stop::Exit(code)) => *code,
            Err(Stop::Signal(outcome)) => outcome.exit_code,
        };
        self.status = code;
        match self.list(&handler).await {
            Err(stop) => Err(stop),
            Ok(_) => result,
        }
    }

    pub(super) fn list<'s>(&'s mut self, list: &'s List) -> Step<'s> {
        Box::pin(async move {
            let mut status = self.status;
            for and_or in &list.0 {
                status = self.and_or(and_or).await?;
            }
            Ok(status)
        })
    }

    async fn and_or(&mut self, and_or: &AndOr) -> Result<i32, Stop> {
        let mut status = self.command(&and_or.first).await?;
        for (connector, command) in &and_or.rest {
            let run = match connector {
                Connector::And => status == 0,
                Connector::Or => status != 0,
            };
            if run {
                status = self.command(command).await?;
            }
        }
        Ok(status)
    }

    pub(super) fn command<'s>(&'s mut self, command: &'s Command) -> Step<'s> {
        Box::pin(async move {
            let status = match command {
                Command::Simple(simple) => self.simple(simple).await?,
                Command::Group(list) => self.list(list).await?,
                Command::If {
                    branches,
                    otherwise,
                } => {
                    let mut taken = None;
                    for (condition, body) in branches {
                        if self.list(condition).await? == 0 {
                            taken = Some(body);
                            break;
                        }
                    }
                    match taken.or(otherwise.as_ref()) {
                        Some(body) => self.list(body).await?,
                        None => 0,
                    }
                }
                Command::While {
                    until,
                    condition,
                    body,
                } => {
                    let mut status = 0;
                    loop {
                        let started = Instant::now();
                        let holds = self.list(condition).await? == 0;
                        if holds == *until {
                            break;
                        }
                        status = self.list(body).await?;
                        self.pace(started).await?;
                    }
                    status
                }
                Command::For { name, values, body } => {
                    let mut status = 0;
                    for value in values {
                        let started = Instant::now();
                        let value = self.expand(value).await?;
                        self.assign(name, value);
                        status = self.list(body).await?;
                        self.pace(started).await?;
                    }
                    status
                }
            };
            self.status = status;
            Ok(status)
        })
    }

    /// Makes a loop iteration last at least [`MIN_ITERATION`].
    pub(super) async fn pace(&mut self, started: Instant) -> Result<(), Stop> {
        let elapsed = started.elapsed();
        if elapsed < MIN_ITERATION {
            self.sleep(MIN_ITERATION - elapsed).await?;
        }
        Ok(())
    }

    /// Expands a word: variables, `$?` and command substitutions (which may
    /// run for a while, and end with a signal).
    pub(super) async fn expand(&mut self, word: &Word) -> Result<String, Stop> {
        let mut out = String::new();
        for part in &word.0 {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Status => out.push_str(&self.status.to_string()),
                Part::Var(name) => {
                    if let Some(value) = self.lookup(name) {
                        out.push_str(value);
                    }
                }
                Part::Command(list) => {
                    let text = self.substitute(list).await?;
                    out.push_str(&text);
                }
            }
        }
        Ok(out)
    }

    /// A positional parameter, a script variable or an environment variable.
    fn lookup(&self, name: &str) -> Option<&str> {
        match name.parse::<usize>() {
            Ok(index) => self.args.get(index).map(String::as_str),
            Err(_) => self
                .vars
                .get(name)
                .map(String::as_str)
                .or_else(|| self.context.env.get(name)),
        }
    }

    fn route(&self, path: &str) -> Route {
        match path {
            "/dev/null" => Route::Null,
            "/dev/stdout" => Route::Stream(Stream::Stdout),
            "/dev/stderr" => Route::Stream(Stream::Stderr),
            _ => Route::File(path.to_owned()),
        }
    }

    pub(super) fn emit(&mut self, stream: Stream, text: &str) {
        self.emit_bytes(stream, text.as_bytes());
    }

    /// Writes bytes where `stream` points during this command.
    pub(super) fn emit_bytes(&mut self, stream: Stream, data: &[u8]) {
        let route = match stream {
            Stream::Stdout => &self.routes[0],
            Stream::Stderr => &self.routes[1],
        };
        match route {
            Route::Stream(target) => self.output.write(*target, data),
            Route::Null => {}
            Route::File(path) => {
                // The file was opened (and checked) by the redirection; a
                // volume removed since then loses the output, as a closed
                // descriptor would.
                let _ = self.context.files.write(path, data, true);
            }
        }
    }

    /// Runs a simple command as `sh` does: its words are expanded first
    /// (so a substitution's stderr is not redirected), then the redirections
    /// are done, then the assignments or the command.
    async fn simple(&mut self, simple: &Simple) -> Result<i32, Stop> {
        self.substitution_status = None;
        let (assignments, argv) = self.expand_simple(simple).await?;
        let saved = self.routes.clone();
        let result = match self.redirect(simple).await? {
            Ok(()) => self.run_simple(assignments, argv).await,
            Err(message) => {
                self.routes = saved.clone();
                self.emit(Stream::Stderr, &format!("{message}\n"));
                Ok(1)
            }
        };
        self.routes = saved;
        let status = result?;
        self.status = status;
        self.run_pending_trap().await?;
        Ok(status)
    }

    /// Points the descriptors where the command's redirections say; a file
    /// is created (or truncated by `>`) now, as `sh` opens it. The inner
    /// `Err` is a redirection that failed, the outer one a signal.
    async fn redirect(&mut self, simple: &Simple) -> Result<Result<(), String>, Stop> {
        for redirect in &simple.redirects {
            let index = usize::from(redirect.fd == 2);
            self.routes[index] = match &redirect.target {
                RedirectTarget::Fd(fd) => self.routes[usize::from(*fd == 2)].clone(),
                RedirectTarget::File { path, append } => {
                    let path = self.expand(path).await?;
                    let route = self.route(&path);
                    if let Route::File(path) = &route
                        && let Err(error) = self.context.files.write(path, &[], *append)
                    {
                        return Ok(Err(format!("sh: can't create {path}: {error}")));
                    }
                    route
                }
            };
        }
        Ok(Ok(()))
    }

    /// Expands a simple command's words: its leading `NAME=VALUE`
    /// assignments, and the command with its arguments.
    async fn expand_simple(&mut self, simple: &Simple) -> Result<Assignments, Stop> {
        let mut words = simple.words.iter().peekable();
        let mut assignments = Vec::new();
        while let Some(word) = words.peek() {
            let Some(Part::Literal(first)) = word.0.first() else {
                break;
            };
            let Some((name, value)) = assignment(first) else {
                break;
            };
            let mut rest = Word(word.0.clone());
            rest.0[0] = Part::Literal(value.to_owned());
            let name = name.to_owned();
            assignments.push((name, self.expand(&rest).await?));
            words.next();
        }
        let mut argv = Vec::new();
        for word in words {
            argv.push(self.expand(word).await?);
        }
        Ok((assignments, argv))
    }

    /// Runs a simple command's assignments and command: `NAME=VALUE` alone
    /// sets a variable; before a command it is exported to that command only.
    async fn run_simple(
        &mut self,
        assignments: Vec<(String, String)>,
        argv: Vec<String>,
    ) -> Result<i32, Stop> {
        if argv.is_empty() {
            for (name, value) in assignments {
                self.assign(&name, value);
            }
            // As in sh: the status of the last substitution, else 0.
            return Ok(self.substitution_status.take().unwrap_or(0));
        }
        if assignments.is_empty() {
            return self.builtin(&argv).await;
        }
        let saved = self.context.env.clone();
        for (name, value) in &assignments {
            self.context.env.set(name, value);
        }
        let result = self.builtin(&argv).await;
        self.context.env = saved;
        result
    }
}

/// A simple command's expanded assignments and argv.
type Assignments = (Vec<(String, String)>, Vec<String>);

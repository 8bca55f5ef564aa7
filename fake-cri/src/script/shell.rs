//! The shell: runs a parsed script's lists, `&&`/`||`, pipelines and simple
//! commands, and routes output, for a container's main process or an exec.
//! Compound commands are in `compound`, expansions in `expand`, redirections
//! in `redirect`, builtins in `builtins`, signals and traps in `signals`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Program;
use super::ast::{AndOr, Command, Connector, List, Part, Pipeline, Simple, Word};
use super::env::Env;
use super::files::FileSystem;
use super::forms::assignment;
use super::input::Input;
use super::redirect::SharedInput;
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
    /// Closed (`>&-`): a write fails.
    Closed,
}

/// Loops that do not sleep still take this long per iteration, so a
/// `while true; do :; done` costs a little time instead of a whole core.
const MIN_ITERATION: Duration = Duration::from_millis(1);

/// A container process's umask (runc's default).
pub(super) const DEFAULT_UMASK: u32 = 0o022;

/// An interpreter for one process.
pub struct Shell<'a> {
    pub(super) context: Context,
    /// Variables set by the script and not exported (not in `env`).
    pub(super) vars: HashMap<String, String>,
    /// `$0`, `$1`, …
    pub(super) args: Vec<String>,
    /// The functions defined so far.
    pub(super) functions: HashMap<String, Arc<Command>>,
    /// Per function call being run: the variables `local` saved (name, old value).
    pub(super) locals: Vec<Vec<(String, Option<String>)>>,
    /// `set -e`.
    pub(super) errexit: bool,
    /// `set -u`.
    pub(super) nounset: bool,
    /// How many conditions (`if`, `while`, `&&`, `!`…) are being run: `set -e`
    /// does not apply inside them.
    pub(super) conditions: u32,
    /// How many loops are being run (`break` and `continue` need one).
    pub(super) loops: u32,
    /// The line of the command being run, for busybox's messages.
    pub(super) line: usize,
    pub(super) output: &'a mut dyn Output,
    pub(super) signals: Option<&'a mut mpsc::UnboundedReceiver<Signal>>,
    /// Standard input, if the process has one.
    pub(super) stdin: Option<&'a mut Input>,
    /// Standard input redirected (`<`, a here-document, a pipe): read
    /// instead of `stdin` while set.
    pub(super) input: Option<SharedInput>,
    pub(super) pid1: bool,
    pub(super) term: Trap,
    pub(super) on_exit: Option<List>,
    pub(super) pending_term: bool,
    pub(super) status: i32,
    pub(super) routes: [Route; 2],
    /// The status of the last command substitution of the command being
    /// expanded: the status of a command made only of assignments.
    pub(super) substitution_status: Option<i32>,
    /// A builtin wrote to a closed descriptor: it fails.
    pub(super) write_failed: bool,
    /// The process is a shell (`sh -c`): the commands it runs get the
    /// environment as ash passes it (its order, `SHLVL`, `PWD`).
    pub(super) ash: bool,
    /// The file mode creation mask (`umask`).
    pub(super) umask: u32,
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
            args: vec!["sh".to_owned()],
            functions: HashMap::new(),
            locals: Vec::new(),
            errexit: false,
            nounset: false,
            conditions: 0,
            loops: 0,
            line: 1,
            output,
            signals,
            stdin: None,
            input: None,
            pid1,
            term: Trap::Default,
            on_exit: None,
            pending_term: false,
            status: 0,
            routes: [Route::Stream(Stream::Stdout), Route::Stream(Stream::Stderr)],
            substitution_status: None,
            write_failed: false,
            ash: false,
            umask: DEFAULT_UMASK,
        }
    }

    /// Runs a program to its end.
    pub async fn run(mut self, program: &Program) -> Outcome {
        match program {
            Program::Server => match self.serve().await {
                Ok(code) => Outcome::exited(code),
                Err(Stop::Signal(outcome)) => outcome,
                Err(stop) => Outcome::exited(stop.code()),
            },
            Program::Script { list, args } => {
                // A script (`sh -c`) has its `$0`; a builtin run directly has none.
                if !args.is_empty() {
                    self.args = args.clone();
                    self.enter_shell();
                }
                let result = self.list(list).await;
                let result = self.run_exit_trap(result).await;
                match result {
                    Ok(code) => Outcome::exited(code),
                    Err(Stop::Signal(outcome)) => outcome,
                    Err(stop) => Outcome::exited(stop.code()),
                }
            }
        }
    }

    /// What ash does to the environment when it starts: `SHLVL` one more,
    /// `PWD` the working directory (always `/` here).
    pub(super) fn enter_shell(&mut self) {
        let level = self
            .context
            .env
            .get("SHLVL")
            .and_then(|l| l.parse::<i64>().ok())
            .unwrap_or(0);
        self.context.env.set("SHLVL", &(level + 1).to_string());
        if self.context.env.get("PWD").is_none() {
            self.context.env.set("PWD", "/");
        }
        self.ash = true;
    }

    pub(super) async fn run_exit_trap(&mut self, result: Result<i32, Stop>) -> Result<i32, Stop> {
        let Some(handler) = self.on_exit.take() else {
            return result;
        };
        if let Err(Stop::Signal(outcome)) = &result {
            // SIGKILL gives no chance to run anything.
            if outcome.exit_code == 137 {
                return result;
            }
        }
        let code = match &result {
            Ok(code) => *code,
            Err(stop) => stop.code(),
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

    /// Runs a list as a condition (`if`, `while`): `set -e` does not apply.
    pub(super) async fn condition(&mut self, list: &List) -> Result<i32, Stop> {
        self.conditions += 1;
        let result = self.list(list).await;
        self.conditions -= 1;
        result
    }

    async fn and_or(&mut self, and_or: &AndOr) -> Result<i32, Stop> {
        let last = and_or.rest.len();
        let mut status = self.pipeline(&and_or.first, last == 0).await?;
        for (index, (connector, pipeline)) in and_or.rest.iter().enumerate() {
            let run = match connector {
                Connector::And => status == 0,
                Connector::Or => status != 0,
            };
            if run {
                status = self.pipeline(pipeline, index + 1 == last).await?;
            }
        }
        Ok(status)
    }

    /// Runs a pipeline; `last` says whether it ends its `&&`/`||` list (only
    /// then does a failure end the shell under `set -e`).
    async fn pipeline(&mut self, pipeline: &Pipeline, last: bool) -> Result<i32, Stop> {
        let checked = last && !pipeline.negated;
        if !checked {
            self.conditions += 1;
        }
        let result = match pipeline.commands.as_slice() {
            [command] => self.command(command).await,
            commands => self.pipe(commands).await,
        };
        if !checked {
            self.conditions -= 1;
        }
        let mut status = result?;
        if pipeline.negated {
            status = i32::from(status == 0);
        }
        self.status = status;
        if checked && status != 0 && self.errexit && self.conditions == 0 {
            return Err(Stop::Exit(status));
        }
        Ok(status)
    }

    pub(super) fn command<'s>(&'s mut self, command: &'s Command) -> Step<'s> {
        Box::pin(async move {
            let status = match command {
                Command::Simple(simple) => self.simple(simple).await?,
                other => self.compound(other).await?,
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

    /// A positional parameter, a script variable or an environment variable.
    pub(super) fn lookup(&self, name: &str) -> Option<&str> {
        match name.parse::<usize>() {
            Ok(index) => self.args.get(index).map(String::as_str),
            Err(_) => self
                .vars
                .get(name)
                .map(String::as_str)
                .or_else(|| self.context.env.get(name)),
        }
    }

    pub(super) fn route(&self, path: &str) -> Route {
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
            Route::Closed => {
                self.write_failed = true;
                if stream == Stream::Stdout {
                    self.emit(Stream::Stderr, "sh: write error: Bad file descriptor\n");
                }
            }
        }
    }

    /// Runs a simple command as `sh` does: its words are expanded first
    /// (so a substitution's stderr is not redirected), then the redirections
    /// are done, then the assignments or the command.
    async fn simple(&mut self, simple: &Simple) -> Result<i32, Stop> {
        self.substitution_status = None;
        self.line = simple.line;
        let (assignments, argv) = self.expand_simple(simple).await?;
        let saved = self.save_redirections();
        // `exec` without a command: its redirections stay for the rest of the shell.
        let permanent = argv.len() == 1 && argv[0] == "exec";
        let result = match self.redirect(&simple.redirects).await? {
            Ok(()) => self.run_simple(assignments, argv).await,
            Err(message) => {
                self.restore_redirections(saved.clone());
                self.emit(Stream::Stderr, &format!("{message}\n"));
                Ok(1)
            }
        };
        if !permanent {
            self.restore_redirections(saved);
        }
        let mut status = result?;
        if std::mem::take(&mut self.write_failed) && status == 0 {
            status = 1;
        }
        self.status = status;
        self.run_pending_trap().await?;
        Ok(status)
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
            argv.extend(self.expand_fields(word).await?);
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
            return self.call(&argv).await;
        }
        let saved = self.context.env.clone();
        for (name, value) in &assignments {
            self.context.env.set(name, value);
        }
        let result = self.call(&argv).await;
        self.context.env = saved;
        result
    }

    /// Runs a function, or else a builtin.
    async fn call(&mut self, argv: &[String]) -> Result<i32, Stop> {
        let Some(body) = self.functions.get(&argv[0]).cloned() else {
            return self.builtin(argv).await;
        };
        let mut args = vec![self.args[0].clone()];
        args.extend(argv[1..].iter().cloned());
        let saved_args = std::mem::replace(&mut self.args, args);
        self.locals.push(Vec::new());
        let result = self.command(&body).await;
        for (name, value) in self.locals.pop().unwrap_or_default().into_iter().rev() {
            match value {
                Some(value) => self.assign(&name, value),
                None => {
                    self.vars.remove(&name);
                    self.context.env.remove(&name);
                }
            }
        }
        self.args = saved_args;
        match result {
            Err(Stop::Return(code)) => Ok(code),
            other => other,
        }
    }
}

/// A simple command's expanded assignments and argv.
type Assignments = (Vec<(String, String)>, Vec<String>);

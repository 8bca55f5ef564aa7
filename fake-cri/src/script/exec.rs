//! Interprets a parsed script as a container's main process or an exec.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ast::{AndOr, Command, Connector, List, Part, RedirectTarget, Simple, Word};
use super::{Program, basename, parse};

/// A container's in-memory file system: path → content. Shared by the main
/// process and every exec in the container, so an exec probe sees the files
/// the main process created.
pub type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// A signal delivered to a container's main process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, as sent by `StopContainer` before the timeout.
    Term,
    /// SIGKILL: ends the process at once with exit code 137.
    Kill {
        /// The kill is the kernel's OOM killer (reason `OOMKilled`).
        oom: bool,
    },
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code (128 + signal number when a signal ended it).
    pub exit_code: i32,
    /// It was OOM-killed.
    pub oom_killed: bool,
}

impl Outcome {
    const fn exited(exit_code: i32) -> Self {
        Self {
            exit_code,
            oom_killed: false,
        }
    }
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
pub trait Output: Send {
    /// Writes text to a stream.
    fn write(&mut self, stream: Stream, text: &str);
}

/// How `trap` set a signal up.
#[derive(Debug, Clone)]
enum Trap {
    Default,
    Ignore,
    Handler(List),
}

/// Why a script stops before its end.
enum Stop {
    /// `exit N`.
    Exit(i32),
    /// A signal ended the process.
    Signal(Outcome),
}

type Step<'a> = Pin<Box<dyn Future<Output = Result<i32, Stop>> + Send + 'a>>;

/// Where a descriptor points during one command.
#[derive(Debug, Clone, PartialEq)]
enum Route {
    Stream(Stream),
    Null,
    File(String),
}

/// Builtins the interpreter runs; any other command is treated as a server.
const BUILTINS: &[&str] = &[
    "sleep", "exit", "true", "false", ":", "echo", "touch", "rm", "cat", "test", "[", "trap",
    "mkdir", "hostname", "wait", "sh", "bash", "ash", "dash",
];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name)
}

/// Loops that do not sleep still take this long per iteration, so a
/// `while true; do :; done` costs a little time instead of a whole core.
const MIN_ITERATION: Duration = Duration::from_millis(1);

/// An interpreter for one process.
pub struct Shell<'a> {
    files: Files,
    env: HashMap<String, String>,
    args: Vec<String>,
    output: &'a mut dyn Output,
    signals: Option<&'a mut mpsc::UnboundedReceiver<Signal>>,
    pid1: bool,
    term: Trap,
    on_exit: Option<List>,
    pending_term: bool,
    status: i32,
    routes: [Route; 2],
}

impl<'a> Shell<'a> {
    /// A shell for a container's main process. `pid1` says whether it is
    /// PID 1 of its own PID namespace (then SIGTERM without a trap is
    /// ignored); `signals` delivers `StopContainer`'s and the control API's
    /// signals.
    pub fn main(
        files: Files,
        env: HashMap<String, String>,
        output: &'a mut dyn Output,
        signals: &'a mut mpsc::UnboundedReceiver<Signal>,
        pid1: bool,
    ) -> Self {
        Self::new(files, env, output, Some(signals), pid1)
    }

    /// A shell for an exec: it receives no signals (a timeout ends it).
    pub fn exec(files: Files, env: HashMap<String, String>, output: &'a mut dyn Output) -> Self {
        Self::new(files, env, output, None, false)
    }

    fn new(
        files: Files,
        env: HashMap<String, String>,
        output: &'a mut dyn Output,
        signals: Option<&'a mut mpsc::UnboundedReceiver<Signal>>,
        pid1: bool,
    ) -> Self {
        Self {
            files,
            env,
            args: Vec::new(),
            output,
            signals,
            pid1,
            term: Trap::Default,
            on_exit: None,
            pending_term: false,
            status: 0,
            routes: [Route::Stream(Stream::Stdout), Route::Stream(Stream::Stderr)],
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

    async fn run_exit_trap(&mut self, result: Result<i32, Stop>) -> Result<i32, Stop> {
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

    fn list<'s>(&'s mut self, list: &'s List) -> Step<'s> {
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

    fn command<'s>(&'s mut self, command: &'s Command) -> Step<'s> {
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
                        let value = self.expand(value);
                        self.env.insert(name.clone(), value);
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
    async fn pace(&mut self, started: Instant) -> Result<(), Stop> {
        let elapsed = started.elapsed();
        if elapsed < MIN_ITERATION {
            self.sleep(MIN_ITERATION - elapsed).await?;
        }
        Ok(())
    }

    fn expand(&self, word: &Word) -> String {
        let mut out = String::new();
        for part in &word.0 {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Status => out.push_str(&self.status.to_string()),
                Part::Var(name) => {
                    if let Ok(index) = name.parse::<usize>() {
                        if let Some(arg) = self.args.get(index) {
                            out.push_str(arg);
                        }
                    } else if let Some(value) = self.env.get(name) {
                        out.push_str(value);
                    }
                }
            }
        }
        out
    }

    fn route(&self, path: &str) -> Route {
        match path {
            "/dev/null" => Route::Null,
            "/dev/stdout" => Route::Stream(Stream::Stdout),
            "/dev/stderr" => Route::Stream(Stream::Stderr),
            _ => Route::File(path.to_owned()),
        }
    }

    fn emit(&mut self, stream: Stream, text: &str) {
        let route = match stream {
            Stream::Stdout => &self.routes[0],
            Stream::Stderr => &self.routes[1],
        };
        match route {
            Route::Stream(target) => self.output.write(*target, text),
            Route::Null => {}
            Route::File(path) => {
                let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
                files
                    .entry(path.clone())
                    .or_default()
                    .extend_from_slice(text.as_bytes());
            }
        }
    }

    async fn simple(&mut self, simple: &Simple) -> Result<i32, Stop> {
        let saved = self.routes.clone();
        for redirect in &simple.redirects {
            let index = usize::from(redirect.fd == 2);
            self.routes[index] = match &redirect.target {
                RedirectTarget::Fd(fd) => self.routes[usize::from(*fd == 2)].clone(),
                RedirectTarget::File { path, append } => {
                    let path = self.expand(path);
                    let route = self.route(&path);
                    if let Route::File(path) = &route {
                        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
                        let content = files.entry(path.clone()).or_default();
                        if !append {
                            content.clear();
                        }
                    }
                    route
                }
            };
        }
        let argv: Vec<String> = simple.words.iter().map(|w| self.expand(w)).collect();
        let result = match argv.first() {
            Some(_) => self.builtin(&argv).await,
            None => Ok(0),
        };
        self.routes = saved;
        let status = result?;
        self.status = status;
        self.run_pending_trap().await?;
        Ok(status)
    }

    /// Runs the TERM trap if a SIGTERM arrived while the last command ran:
    /// like `sh`, the trap runs only once the command in progress finished.
    async fn run_pending_trap(&mut self) -> Result<(), Stop> {
        if !std::mem::take(&mut self.pending_term) {
            return Ok(());
        }
        if let Trap::Handler(handler) = self.term.clone() {
            let status = self.status;
            self.list(&handler).await?;
            self.status = status;
        }
        Ok(())
    }

    fn on_signal(&mut self, signal: Signal) -> Result<(), Stop> {
        match signal {
            Signal::Kill { oom } => Err(Stop::Signal(Outcome {
                exit_code: 137,
                oom_killed: oom,
            })),
            Signal::Term => match self.term {
                Trap::Handler(_) => {
                    self.pending_term = true;
                    Ok(())
                }
                Trap::Ignore => Ok(()),
                // PID 1 has no default action for SIGTERM: the kernel drops it.
                Trap::Default if self.pid1 => Ok(()),
                Trap::Default => Err(Stop::Signal(Outcome::exited(143))),
            },
        }
    }

    /// Waits for `duration`, handling signals that arrive meanwhile.
    async fn sleep(&mut self, duration: Duration) -> Result<(), Stop> {
        let deadline = Instant::now().checked_add(duration);
        loop {
            let signal = match self.signals.as_deref_mut() {
                Some(signals) => {
                    let wait = async {
                        match deadline {
                            Some(deadline) => tokio::time::sleep_until(deadline).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = wait => return Ok(()),
                        signal = signals.recv() => signal,
                    }
                }
                None => {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                    return Ok(());
                }
            };
            match signal {
                Some(signal) => self.on_signal(signal)?,
                // Nobody can signal us any more: sleep out the rest undisturbed.
                None => self.signals = None,
            }
        }
    }

    /// A command the interpreter does not know: a well-behaved server that
    /// runs until SIGTERM and then exits 0. In an exec it succeeds at once.
    async fn serve(&mut self) -> Result<i32, Stop> {
        let Some(signals) = self.signals.as_deref_mut() else {
            return Ok(0);
        };
        match signals.recv().await {
            Some(Signal::Term) => Ok(0),
            Some(signal @ Signal::Kill { .. }) => self.on_signal(signal).map(|()| 0),
            None => std::future::pending().await,
        }
    }

    async fn builtin(&mut self, argv: &[String]) -> Result<i32, Stop> {
        let name = basename(&argv[0]);
        let args = &argv[1..];
        match name {
            "true" | ":" | "mkdir" | "wait" => Ok(0),
            "false" => Ok(1),
            "sleep" => self.sleep_command(args).await,
            "exit" => Err(Stop::Exit(match args.first() {
                None => self.status,
                Some(code) => match code.parse::<i64>() {
                    Ok(code) => (code & 0xff) as i32,
                    Err(_) => {
                        self.emit(
                            Stream::Stderr,
                            &format!("sh: exit: Illegal number: {code}\n"),
                        );
                        2
                    }
                },
            })),
            "echo" => {
                let (newline, words) = match args.first().map(String::as_str) {
                    Some("-n") => (false, &args[1..]),
                    Some("-e") => (true, &args[1..]),
                    _ => (true, args),
                };
                let mut text = words.join(" ");
                if newline {
                    text.push('\n');
                }
                self.emit(Stream::Stdout, &text);
                Ok(0)
            }
            "hostname" => {
                let name = self.env.get("HOSTNAME").cloned().unwrap_or_default();
                self.emit(Stream::Stdout, &format!("{name}\n"));
                Ok(0)
            }
            "touch" => {
                let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
                for path in args.iter().filter(|a| !a.starts_with('-')) {
                    files.entry(path.clone()).or_default();
                }
                Ok(0)
            }
            "rm" => Ok(self.rm(args)),
            "cat" => Ok(self.cat(args)),
            "test" => Ok(self.test(args)),
            "[" => match args.split_last() {
                Some((last, inner)) if last == "]" => Ok(self.test(inner)),
                _ => {
                    self.emit(Stream::Stderr, "sh: [: missing ]\n");
                    Ok(2)
                }
            },
            "trap" => Ok(self.trap(args)),
            "sh" | "bash" | "ash" | "dash" => self.subshell(args).await,
            _ => self.serve().await,
        }
    }

    async fn sleep_command(&mut self, args: &[String]) -> Result<i32, Stop> {
        if args.is_empty() {
            self.emit(Stream::Stderr, "sleep: missing operand\n");
            return Ok(1);
        }
        let mut total = Some(Duration::ZERO);
        for arg in args {
            match parse_duration(arg) {
                Some(Some(d)) => total = total.and_then(|t| t.checked_add(d)),
                Some(None) => total = None,
                None => {
                    self.emit(Stream::Stderr, &format!("sleep: invalid number '{arg}'\n"));
                    return Ok(1);
                }
            }
        }
        // `None` is `sleep infinity`: Duration::MAX never elapses.
        self.sleep(total.unwrap_or(Duration::MAX)).await?;
        Ok(0)
    }

    fn rm(&mut self, args: &[String]) -> i32 {
        let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
        let mut status = 0;
        for path in args.iter().filter(|a| !a.starts_with('-')) {
            let removed = {
                let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
                let prefix = format!("{}/", path.trim_end_matches('/'));
                let before = files.len();
                files.retain(|name, _| name != path && !name.starts_with(&prefix));
                files.len() != before
            };
            if !removed && !force {
                self.emit(
                    Stream::Stderr,
                    &format!("rm: can't remove '{path}': No such file or directory\n"),
                );
                status = 1;
            }
        }
        status
    }

    fn cat(&mut self, args: &[String]) -> i32 {
        let mut status = 0;
        for path in args {
            let content = self
                .files
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(path)
                .cloned();
            match content {
                Some(content) => self.emit(Stream::Stdout, &String::from_utf8_lossy(&content)),
                None => {
                    self.emit(
                        Stream::Stderr,
                        &format!("cat: can't open '{path}': No such file or directory\n"),
                    );
                    status = 1;
                }
            }
        }
        status
    }

    fn test(&mut self, args: &[String]) -> i32 {
        let (negate, args) = match args.split_first() {
            Some((first, rest)) if first == "!" => (true, rest),
            _ => (false, args),
        };
        let result = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            let exists = |path: &str| files.contains_key(path);
            let is_dir = |path: &str| {
                let prefix = format!("{}/", path.trim_end_matches('/'));
                matches!(path, "/" | "/tmp" | "/dev")
                    || files.keys().any(|k| k.starts_with(&prefix))
            };
            let strs: Vec<&str> = args.iter().map(String::as_str).collect();
            match strs.as_slice() {
                [] => Some(false),
                [s] => Some(!s.is_empty()),
                ["-e", path] => Some(exists(path) || is_dir(path)),
                ["-f", path] => Some(exists(path)),
                ["-d", path] => Some(is_dir(path)),
                ["-s", path] => Some(files.get(*path).is_some_and(|c| !c.is_empty())),
                ["-n", s] => Some(!s.is_empty()),
                ["-z", s] => Some(s.is_empty()),
                [a, "=" | "==", b] => Some(a == b),
                [a, "!=", b] => Some(a != b),
                [a, op @ ("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"), b] => {
                    match (a.parse::<i64>(), b.parse::<i64>()) {
                        (Ok(a), Ok(b)) => Some(match *op {
                            "-eq" => a == b,
                            "-ne" => a != b,
                            "-lt" => a < b,
                            "-le" => a <= b,
                            "-gt" => a > b,
                            _ => a >= b,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        match result {
            Some(result) => i32::from(result == negate),
            None => {
                self.emit(
                    Stream::Stderr,
                    &format!("sh: test: unsupported expression: {}\n", args.join(" ")),
                );
                2
            }
        }
    }

    fn trap(&mut self, args: &[String]) -> i32 {
        let Some((action, signals)) = args.split_first() else {
            return 0;
        };
        let trap = match action.as_str() {
            "-" => Trap::Default,
            "" => Trap::Ignore,
            script => match parse(script) {
                Ok(list) => Trap::Handler(list),
                Err(error) => {
                    self.emit(Stream::Stderr, &format!("sh: trap: {error}\n"));
                    return 1;
                }
            },
        };
        for signal in signals {
            match signal.trim_start_matches("SIG") {
                "TERM" | "15" => self.term = trap.clone(),
                "EXIT" | "0" => {
                    self.on_exit = match &trap {
                        Trap::Handler(list) => Some(list.clone()),
                        Trap::Default | Trap::Ignore => None,
                    }
                }
                // Other signals are never delivered to a simulated container.
                _ => {}
            }
        }
        0
    }

    async fn subshell(&mut self, args: &[String]) -> Result<i32, Stop> {
        if args.first().map(String::as_str) != Some("-c") {
            return self.serve().await;
        }
        let script = args.get(1).map(String::as_str).unwrap_or_default();
        let list = match parse(script) {
            Ok(list) => list,
            Err(error) => {
                self.emit(Stream::Stderr, &format!("sh: {error}\n"));
                return Ok(2);
            }
        };
        let saved_args = std::mem::replace(&mut self.args, args.iter().skip(2).cloned().collect());
        let result = self.list(&list).await;
        self.args = saved_args;
        match result {
            Ok(code) | Err(Stop::Exit(code)) => Ok(code),
            Err(stop @ Stop::Signal(_)) => Err(stop),
        }
    }
}

/// Parses a `sleep` operand: seconds with an optional `s`/`m`/`h`/`d`
/// suffix. `Some(None)` is `infinity`; `None` is not a number.
fn parse_duration(arg: &str) -> Option<Option<Duration>> {
    if arg == "infinity" || arg == "inf" {
        return Some(None);
    }
    let (number, unit) = match arg.char_indices().last()? {
        (i, 's') => (&arg[..i], 1.0),
        (i, 'm') => (&arg[..i], 60.0),
        (i, 'h') => (&arg[..i], 3600.0),
        (i, 'd') => (&arg[..i], 86400.0),
        _ => (arg, 1.0),
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    Some(Duration::try_from_secs_f64(value * unit).ok())
}

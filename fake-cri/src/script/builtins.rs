//! The builtin commands the interpreter runs.

use std::time::Duration;

use super::shell::{Shell, Stream};
use super::signals::Stop;
use super::{applets, basename, parse};

/// Builtins the interpreter runs.
const BUILTINS: &[&str] = &[
    "sleep", "exit", "true", "false", ":", "echo", "touch", "rm", "cat", "test", "[", "trap",
    "mkdir", "hostname", "wait", "sh", "bash", "ash", "dash", "env", "printenv", "ls", "stat",
    "id", "export", "unset", "hexdump", "tar", "curl", "tail", "set", "shift", "local", "return",
    "break", "continue", "eval", "read", "printf", "cd", "pwd", "umask", "chmod", "seq", "wc",
    "head", "tr", "cut", "sort", "grep", "basename", "dirname", "expr", "exec", "command",
];

/// The programs of the test images' own (agnhost, nginx, httpd, pause): a
/// script that runs one gets a well-behaved server, as the container whose
/// command it is does. Any other command a script names and the interpreter
/// does not know is not found, as busybox `sh` says of a program its image
/// does not have.
const IMAGE_PROGRAMS: &[&str] = &["agnhost", "nginx", "httpd", "httpd-foreground", "pause"];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name)
}

impl Shell<'_> {
    pub(super) async fn builtin(&mut self, argv: &[String]) -> Result<i32, Stop> {
        let name = basename(&argv[0]);
        let args = &argv[1..];
        if let Some(status) = Box::pin(self.text_applet(name, args)).await {
            return Ok(status);
        }
        match name {
            "true" | ":" | "wait" => Ok(0),
            "false" => Ok(1),
            "sleep" => self.sleep_command(args).await,
            "exit" => Err(Stop::Exit(match args.first() {
                None => self.status,
                Some(code) => match code.parse::<i64>() {
                    Ok(code) => (code & 0xff) as i32,
                    Err(_) => {
                        let message = format!("Illegal number: {code}");
                        self.builtin_error("exit", &message, 2)
                    }
                },
            })),
            "echo" => Ok(self.echo(args)),
            "printf" => Ok(self.printf(args)),
            "set" => self.set(args),
            "shift" => self.shift(args),
            "local" => self.local(args),
            "return" | "break" | "continue" => self.jump(name, args),
            "eval" => self.eval(args).await,
            "read" => Ok(self.read(args).await),
            "cd" => Ok(self.cd(args)),
            "umask" => Ok(self.umask_command(args)),
            "expr" => Ok(self.expr(args)),
            // `exec CMD`: the command replaces the shell, which ends with its status.
            "exec" if !args.is_empty() => {
                let status = Box::pin(self.builtin(args)).await?;
                Err(Stop::Exit(status))
            }
            "exec" => Ok(0),
            "command" => match args.first().map(String::as_str) {
                Some("-v") => Ok(self.command_v(&args[1..])),
                Some(_) => Box::pin(self.builtin(args)).await,
                None => Ok(0),
            },
            "chmod" => Ok(self.chmod(args)),
            "pwd" => {
                self.emit(Stream::Stdout, "/\n");
                Ok(0)
            }
            "hostname" => Ok(self.hostname(args)),
            "id" => Ok(self.id(args)),
            "env" => Box::pin(self.env_command(args)).await,
            "printenv" => Ok(self.printenv(args)),
            "export" => self.export(args),
            "unset" => self.unset(args),
            "touch" => Ok(self.touch(args)),
            "rm" => Ok(self.rm(args)),
            "mkdir" => Ok(self.mkdir(args)),
            "cat" if args.is_empty() || args == ["-"] => self.cat_stdin().await,
            "cat" => Ok(self.cat(args)),
            "hexdump" => Ok(self.hexdump(args)),
            "tar" => Ok(self.tar(args).await),
            "curl" => Ok(self.curl(args).await),
            "tail" => self.tail(args).await,
            "ls" => Ok(self.ls(args)),
            "stat" => Ok(self.stat(args)),
            "test" => Ok(self.test(args, false)),
            "[" => Ok(self.test(args, true)),
            "trap" => Ok(self.trap(args)),
            "sh" | "bash" | "ash" | "dash" => self.subshell(&argv[0], args).await,
            _ if IMAGE_PROGRAMS.contains(&name) => self.serve().await,
            _ if applets::is_applet(name) => {
                self.emit(
                    Stream::Stderr,
                    &format!("sh: {name}: the busybox applet is not interpreted by fake-cri\n"),
                );
                Ok(127)
            }
            _ => {
                // busybox ash's message names the command as written.
                self.emit(Stream::Stderr, &format!("sh: {}: not found\n", argv[0]));
                Ok(127)
            }
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

    /// `sh -c SCRIPT [NAME ARGS…]`, `sh FILE [ARGS…]`, or a shell reading its
    /// standard input (`sh`, `sh -i`, `sh -s`, `sh -`).
    async fn subshell(&mut self, argv0: &str, args: &[String]) -> Result<i32, Stop> {
        let (script, positional) = match args.first().map(String::as_str) {
            Some("-c") => (
                args.get(1).cloned().unwrap_or_default(),
                args.iter().skip(2).cloned().collect(),
            ),
            None | Some("-i" | "-s" | "-") if args.len() <= 1 => {
                if self.stdin.is_some() {
                    return self.interactive().await;
                }
                // Without an input (a container without `stdin: true`, an
                // exec without `-i`) the shell is at the end of its input at
                // once and exits 0, as busybox's image default `sh` does.
                return Ok(0);
            }
            Some(option) if option.starts_with('-') => {
                self.emit(
                    Stream::Stderr,
                    &format!("sh: option {option} is not interpreted (only -c, -i, -s and -)\n"),
                );
                return Ok(2);
            }
            // `sh FILE ARGS…`: the script is a file of the container's, and
            // `$0` is its name.
            _ => match self.context.files.read(&args[0]) {
                Ok(content) => (
                    String::from_utf8_lossy(&content).into_owned(),
                    args.to_vec(),
                ),
                Err(error) => {
                    self.emit(
                        Stream::Stderr,
                        &format!("sh: can't open '{}': {error}\n", args[0]),
                    );
                    return Ok(2);
                }
            },
        };
        let list = match parse(&script) {
            Ok(list) => list,
            Err(error) => {
                self.emit(Stream::Stderr, &format!("sh: {error}\n"));
                return Ok(2);
            }
        };
        // A new shell: only the environment is shared with this one.
        let saved_args = std::mem::replace(&mut self.args, positional);
        if self.args.is_empty() {
            self.args.push(argv0.to_owned());
        }
        let saved_vars = std::mem::take(&mut self.vars);
        let saved_functions = std::mem::take(&mut self.functions);
        let saved_env = self.context.env.clone();
        let saved_options = (
            self.errexit,
            self.nounset,
            self.ash,
            self.conditions,
            self.loops,
        );
        (self.errexit, self.nounset, self.conditions, self.loops) = (false, false, 0, 0);
        self.enter_shell();
        let result = self.list(&list).await;
        self.args = saved_args;
        self.vars = saved_vars;
        self.functions = saved_functions;
        self.context.env = saved_env;
        (
            self.errexit,
            self.nounset,
            self.ash,
            self.conditions,
            self.loops,
        ) = saved_options;
        match result {
            Ok(code) => Ok(code),
            Err(stop @ Stop::Signal(_)) => Err(stop),
            Err(stop) => Ok(stop.code()),
        }
    }
}

impl Shell<'_> {
    /// `command -v NAME…`: each name ash would run (a function, builtin,
    /// busybox applet or keyword) is printed; status 127 if one is not.
    fn command_v(&mut self, names: &[String]) -> i32 {
        const KEYWORDS: &[&str] = &[
            "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
            "esac", "in", "{", "}", "!",
        ];
        let mut status = 0;
        let mut out = String::new();
        for name in names {
            let known = self.functions.contains_key(name)
                || is_builtin(name)
                || applets::is_applet(name)
                || KEYWORDS.contains(&name.as_str());
            if known {
                out.push_str(name);
                out.push('\n');
            } else {
                status = 127;
            }
        }
        self.emit(Stream::Stdout, &out);
        status
    }

    /// `sh` reading its commands from standard input, a line at a time, until
    /// the input ends (then the last status) or `exit`. A main process still
    /// takes its signals while it waits for a line.
    async fn interactive(&mut self) -> Result<i32, Stop> {
        loop {
            let line = {
                let Some(stdin) = self.stdin.as_deref_mut() else {
                    return Ok(self.status);
                };
                match self.signals.as_deref_mut() {
                    Some(signals) => tokio::select! {
                        line = stdin.line() => line,
                        signal = signals.recv() => {
                            match signal {
                                Some(signal) => self.on_signal(signal)?,
                                None => self.signals = None,
                            }
                            self.run_pending_trap().await?;
                            continue;
                        }
                    },
                    None => stdin.line().await,
                }
            };
            let Some(line) = line else {
                return Ok(self.status);
            };
            match parse(&line) {
                Ok(list) => match self.list(&list).await {
                    Ok(status) => self.status = status,
                    Err(stop @ Stop::Signal(_)) => return Err(stop),
                    Err(stop) => return Ok(stop.code()),
                },
                Err(error) => {
                    self.emit(Stream::Stderr, &format!("sh: {error}\n"));
                    self.status = 2;
                }
            }
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

//! The container command interpreter: a small, documented subset of POSIX `sh`.
//!
//! fake-cri never runs host processes. A container's `command` + `args` are
//! parsed into a [`Program`] when the container is created (so unsupported
//! syntax is a `CreateContainer` error) and interpreted by a [`Shell`] when it
//! starts. The grammar and its limits are specified in `fake-cri/README.md`.

mod archive;
mod ast;
mod builtins;
mod curl;
mod env;
mod file_commands;
mod files;
mod forms;
mod input;
mod lex;
mod mounts;
mod parse;
mod process_info;
mod shell;
mod signals;
mod subst;

pub use ast::{AndOr, Command, Connector, List, Part, Redirect, RedirectTarget, Simple, Word};
pub use env::{DEFAULT_PATH, Env};
pub use files::{FileSystem, Files, FsError, Kind, Meta};
pub use input::Input;
pub use mounts::Mount;
pub use parse::{ParseError, parse};
pub use shell::{Context, Output, Shell, Stream};
pub use signals::{Outcome, Signal};

/// How a container's argv is run.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    /// A script: `sh -c SCRIPT [ARG0 ARGS…]`, or a builtin command run directly
    /// (`["sleep", "10"]`), parsed into a command list.
    Script {
        /// The parsed commands.
        list: List,
        /// `$0`, `$1`, … for `sh -c SCRIPT NAME ARGS…`.
        args: Vec<String>,
    },
    /// A command the interpreter does not know, or no command at all (the
    /// image default): a well-behaved server that runs until SIGTERM and then
    /// exits 0.
    Server,
}

/// Shells whose `-c SCRIPT` form is interpreted.
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash"];

impl Program {
    /// Interprets a container's argv (`command` followed by `args`).
    pub fn from_argv(argv: &[String]) -> Result<Self, ParseError> {
        let Some(first) = argv.first() else {
            return Ok(Self::Server);
        };
        let name = basename(first);
        if SHELLS.contains(&name) {
            return match argv.get(1).map(String::as_str) {
                // An interactive shell: it reads commands from standard input
                // when it has one (`stdin: true`, `exec -i`), and otherwise
                // runs as a server (a container) or ends (an exec), as `sh`
                // does at the end of its input.
                None | Some("-i" | "-s" | "-") if argv.len() <= 2 => Ok(Self::Script {
                    list: List(vec![AndOr {
                        first: Command::Simple(Simple {
                            words: argv
                                .iter()
                                .enumerate()
                                .map(|(i, a)| {
                                    let a = if i == 0 { name.to_owned() } else { a.clone() };
                                    Word(vec![Part::Literal(a)])
                                })
                                .collect(),
                            redirects: Vec::new(),
                        }),
                        rest: Vec::new(),
                    }]),
                    args: Vec::new(),
                }),
                Some("-c") => {
                    let script = argv.get(2).map(String::as_str).unwrap_or_default();
                    let args = argv.iter().skip(3).cloned().collect();
                    Ok(Self::Script {
                        list: parse(script)?,
                        args,
                    })
                }
                // `sh` alone, or `sh FILE`: a script we cannot see. Treat it as
                // a server rather than guessing at its behaviour.
                _ => Ok(Self::Server),
            };
        }
        if builtins::is_builtin(name) {
            let mut checked = argv.to_vec();
            checked[0] = name.to_owned();
            forms::check(&checked).map_err(|message| ParseError::new(message, 1, 1))?;
            let words = argv
                .iter()
                .enumerate()
                .map(|(i, arg)| {
                    let arg = if i == 0 { name.to_owned() } else { arg.clone() };
                    Word(vec![Part::Literal(arg)])
                })
                .collect();
            return Ok(Self::Script {
                list: List(vec![AndOr {
                    first: Command::Simple(Simple {
                        words,
                        redirects: Vec::new(),
                    }),
                    rest: Vec::new(),
                }]),
                args: Vec::new(),
            });
        }
        Ok(Self::Server)
    }
}

/// The last path component of a command name: `/bin/sh` → `sh`.
pub(crate) fn basename(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

//! The container command interpreter: a small, documented subset of POSIX `sh`.
//!
//! fake-cri never runs host processes. A container's `command` + `args` are
//! parsed into a [`Program`] when the container is created (so unsupported
//! syntax is a `CreateContainer` error) and interpreted by a [`Shell`] when it
//! starts. The grammar and its limits are specified in `fake-cri/README.md`.

mod applets;
mod archive;
mod arith;
mod ast;
mod builtins;
mod compound;
mod curl;
mod env;
mod expand;
mod expr;
mod file_commands;
mod files;
mod forms;
mod fs_types;
mod input;
mod lex;
mod mounts;
mod parse;
mod pattern;
mod printf;
mod process_info;
mod redirect;
mod shell;
mod shell_builtins;
mod signals;
mod subst;
mod tail;
mod text_applets;
mod word;

pub use ast::{
    AndOr, Command, Connector, List, Param, ParamOp, Part, Pipeline, Redirect, RedirectTarget,
    Simple, Word,
};
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
    /// A program the interpreter does not know, or no command at all (the
    /// image's default): the image's own program, run as a well-behaved
    /// server that runs until SIGTERM and then exits 0. (Inside a script, a
    /// command the interpreter does not know is not found: exit 127.)
    Server,
}

/// Shells whose `-c SCRIPT` form is interpreted (the other forms are builtins).
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash"];

impl Program {
    /// Interprets a container's argv (`command` followed by `args`).
    pub fn from_argv(argv: &[String]) -> Result<Self, ParseError> {
        let Some(first) = argv.first() else {
            return Ok(Self::Server);
        };
        let name = basename(first);
        if SHELLS.contains(&name) && argv.get(1).map(String::as_str) == Some("-c") {
            let script = argv.get(2).map(String::as_str).unwrap_or_default();
            // `$0` is the first argument after the script, else the shell as named.
            let mut args: Vec<String> = argv.iter().skip(3).cloned().collect();
            if args.is_empty() {
                args.push(first.clone());
            }
            return Ok(Self::Script {
                list: parse(script)?,
                args,
            });
        }
        // Any other builtin (a shell without `-c` among them: it reads its
        // standard input or a script file) is a one-command script.
        if builtins::is_builtin(name) {
            let mut checked = argv.to_vec();
            checked[0] = name.to_owned();
            forms::check(&checked).map_err(|message| ParseError::new(message, 1, 1))?;
            let words = argv
                .iter()
                .enumerate()
                .map(|(i, arg)| {
                    let arg = if i == 0 { name.to_owned() } else { arg.clone() };
                    Word(vec![Part::Quoted(arg)])
                })
                .collect();
            return Ok(Self::Script {
                list: List(vec![AndOr {
                    first: Pipeline {
                        negated: false,
                        commands: vec![Command::Simple(Simple {
                            words,
                            redirects: Vec::new(),
                            line: 1,
                        })],
                    },
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

//! The builtins that work on the shell itself, as busybox ash has them:
//! `set`, `shift`, `local`, `return`, `break`, `continue`, `eval`, `read`,
//! `echo` and `cd`/`pwd` (which only check the directory: every command
//! runs in `/`).

use super::env::is_name;
use super::parse;
use super::shell::{Shell, Stream};
use super::signals::Stop;

impl Shell<'_> {
    /// busybox's message for a builtin's error: `sh: NAME: line N: MESSAGE`
    /// (ash counts the lines of a `-c` script from 0); returns `status`.
    pub(super) fn builtin_error(&mut self, name: &str, message: &str, status: i32) -> i32 {
        let line = self.line.saturating_sub(1);
        self.emit(
            Stream::Stderr,
            &format!("sh: {name}: line {line}: {message}\n"),
        );
        status
    }

    /// An error of a special builtin (`set`, `shift`, `local`, `return`…),
    /// which ends a non-interactive shell with status 2, as in ash.
    pub(super) fn special_error(&mut self, name: &str, message: &str) -> Stop {
        self.builtin_error(name, message, 2);
        Stop::Exit(2)
    }

    /// `set [-eu] [+eu] [-o OPTION] [-- ARGS…]`.
    pub(super) fn set(&mut self, args: &[String]) -> Result<i32, Stop> {
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--" || arg == "-" {
                self.args.truncate(1);
                self.args.extend(rest.cloned());
                return Ok(0);
            }
            let (on, flags) = match (arg.strip_prefix('-'), arg.strip_prefix('+')) {
                (Some(flags), _) => (true, flags),
                (_, Some(flags)) => (false, flags),
                _ => {
                    self.args.truncate(1);
                    self.args.push(arg.clone());
                    self.args.extend(rest.cloned());
                    return Ok(0);
                }
            };
            for flag in flags.chars() {
                match flag {
                    'e' => self.errexit = on,
                    'u' => self.nounset = on,
                    'o' => {
                        let option = rest.next().map(String::as_str).unwrap_or_default();
                        match option {
                            "errexit" => self.errexit = on,
                            "nounset" => self.nounset = on,
                            // One stage's status is the pipeline's anyway when
                            // the others succeed; accepted as ash does.
                            "pipefail" => {}
                            _ => {
                                let message = format!("illegal option -o {option}");
                                return Err(self.special_error("set", &message));
                            }
                        }
                    }
                    _ => {
                        let message = format!("illegal option -{flag}");
                        return Err(self.special_error("set", &message));
                    }
                }
            }
        }
        Ok(0)
    }

    /// `shift [N]`.
    pub(super) fn shift(&mut self, args: &[String]) -> Result<i32, Stop> {
        let n = match args.first() {
            None => 1,
            Some(n) => match n.parse::<usize>() {
                Ok(n) => n,
                Err(_) => {
                    let message = format!("Illegal number: {n}");
                    return Err(self.special_error("shift", &message));
                }
            },
        };
        if n > self.args.len() - 1 {
            return Ok(1);
        }
        self.args.drain(1..=n);
        Ok(0)
    }

    /// `local NAME[=VALUE]…`: saved now, restored when the function returns.
    pub(super) fn local(&mut self, args: &[String]) -> Result<i32, Stop> {
        if self.locals.is_empty() {
            return Err(self.special_error("local", "not in a function"));
        }
        for arg in args {
            let (name, value) = match arg.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            if !is_name(name) {
                let message = format!("{name}: bad variable name");
                return Err(self.special_error("local", &message));
            }
            let old = self.lookup(name).map(str::to_owned);
            if let Some(frame) = self.locals.last_mut()
                && !frame.iter().any(|(saved, _)| saved == name)
            {
                frame.push((name.to_owned(), old));
            }
            if let Some(value) = value {
                self.assign(name, value);
            }
        }
        Ok(0)
    }

    /// `return [N]`, `break [N]`, `continue [N]`.
    pub(super) fn jump(&mut self, name: &str, args: &[String]) -> Result<i32, Stop> {
        let n = match args.first() {
            None => None,
            Some(n) => match n.parse::<i64>() {
                Ok(n) if name == "return" || n > 0 => Some(n),
                _ => {
                    let message = format!("Illegal number: {n}");
                    return Err(self.special_error(name, &message));
                }
            },
        };
        match name {
            "return" => Err(Stop::Return(n.map_or(self.status, |n| (n & 0xff) as i32))),
            // Outside a loop they do nothing, as in ash.
            _ if self.loops == 0 => Ok(0),
            "break" => Err(Stop::Break(n.map_or(1, |n| n as u32).min(self.loops))),
            _ => Err(Stop::Continue(n.map_or(1, |n| n as u32).min(self.loops))),
        }
    }

    /// `eval ARGS…`: the arguments joined by spaces, run as a script.
    pub(super) async fn eval(&mut self, args: &[String]) -> Result<i32, Stop> {
        let script = args.join(" ");
        match parse(&script) {
            Ok(list) => {
                self.status = 0;
                Box::pin(self.list(&list)).await
            }
            Err(error) => Err(self.special_error("eval", &format!("syntax error: {error}"))),
        }
    }

    /// `read [-r] [NAME…]`: a line of standard input split by `IFS` into the
    /// names (the last takes the rest); status 1 at the end of input.
    pub(super) async fn read(&mut self, args: &[String]) -> i32 {
        let mut raw = false;
        let mut names = Vec::new();
        for arg in args {
            match arg.as_str() {
                "-r" if names.is_empty() => raw = true,
                option if option.starts_with('-') && names.is_empty() => {
                    let message = format!("option {option} is not interpreted (only -r)");
                    return self.builtin_error("read", &message, 2);
                }
                name if !is_name(name) => {
                    let message = format!("sh: read: '{name}': bad variable name\n");
                    self.emit(Stream::Stderr, &message);
                    return 1;
                }
                name => names.push(name.to_owned()),
            }
        }
        if names.is_empty() {
            names.push("REPLY".to_owned());
        }
        let mut line = String::new();
        let mut ended = true;
        while let Some(mut piece) = self.read_line().await {
            if piece.ends_with('\n') {
                piece.pop();
                ended = false;
            }
            // Without -r a backslash escapes the next character and a
            // final backslash continues the line.
            if !raw && piece.ends_with('\\') && !ended {
                piece.pop();
                line.push_str(&piece);
                ended = true;
                continue;
            }
            line.push_str(&piece);
            break;
        }
        let line = if raw { line } else { unescape(&line) };
        let ifs = self.lookup("IFS").unwrap_or(" \t\n").to_owned();
        let values = split_read(&line, &ifs, names.len());
        for (index, name) in names.iter().enumerate() {
            let value = values.get(index).cloned().unwrap_or_default();
            self.assign(name, value);
        }
        i32::from(ended)
    }

    /// `echo [-neE] ARGS…`, as busybox's: escapes only with `-e`.
    pub(super) fn echo(&mut self, args: &[String]) -> i32 {
        let mut newline = true;
        let mut escapes = false;
        let mut words = args;
        while let Some(first) = words.first() {
            let Some(flags) = first.strip_prefix('-') else {
                break;
            };
            if flags.is_empty() || !flags.chars().all(|c| matches!(c, 'n' | 'e' | 'E')) {
                break;
            }
            for flag in flags.chars() {
                match flag {
                    'n' => newline = false,
                    'e' => escapes = true,
                    _ => escapes = false,
                }
            }
            words = &words[1..];
        }
        let mut text = words.join(" ");
        if escapes {
            let (expanded, stop) = super::printf::escapes(&text, true);
            text = expanded;
            if stop {
                newline = false;
            }
        }
        if newline {
            text.push('\n');
        }
        self.emit(Stream::Stdout, &text);
        0
    }

    /// `cd [DIR]`: only checks that the directory exists.
    pub(super) fn cd(&mut self, args: &[String]) -> i32 {
        let dir = args.first().map_or("/root", String::as_str);
        match self.context.files.metadata(dir, true) {
            Ok(meta) if meta.kind == super::files::Kind::Dir => 0,
            Ok(_) => {
                let message = format!("can't cd to {dir}: Not a directory");
                self.builtin_error("cd", &message, 2)
            }
            Err(error) => {
                let message = format!("can't cd to {dir}: {error}");
                self.builtin_error("cd", &message, 2)
            }
        }
    }
}

/// `read`'s backslash removal (without `-r`).
fn unescape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits a line read into at most `count` values, the last with the rest
/// (its trailing IFS white space removed).
fn split_read(line: &str, ifs: &str, count: usize) -> Vec<String> {
    let white = |c: char| ifs.contains(c) && c.is_whitespace();
    let mut values = Vec::new();
    let mut rest = line.trim_start_matches(white);
    while values.len() + 1 < count && !rest.is_empty() {
        match rest.find(|c: char| ifs.contains(c)) {
            Some(at) => {
                values.push(rest[..at].to_owned());
                let sep = rest[at..].chars().next().unwrap_or(' ');
                let mut after = rest[at + sep.len_utf8()..].trim_start_matches(white);
                // White space around one other IFS character is one separator.
                if sep.is_whitespace()
                    && let Some(stripped) =
                        after.strip_prefix(|c: char| ifs.contains(c) && !c.is_whitespace())
                {
                    after = stripped.trim_start_matches(white);
                }
                rest = after;
            }
            None => {
                values.push(rest.to_owned());
                rest = "";
            }
        }
    }
    if !rest.is_empty() {
        values.push(rest.trim_end_matches(white).to_owned());
    }
    values
}

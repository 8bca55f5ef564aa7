//! Builtins that work on files: `cat`, `ls`, `stat`, `test`, `touch`, `rm`,
//! `mkdir`, through the container's [`FileSystem`](super::files::FileSystem)
//! (its mounts and its in-memory files). Messages are busybox's.

use super::files::{FsError, Kind, Meta};
use super::forms::{self, Directive, Ls, Stat};
use super::shell::{Shell, Stream};

impl Shell<'_> {
    /// Reports a refused form (exit 2, as `sh` does for a usage error).
    pub(super) fn usage(&mut self, message: &str) -> i32 {
        self.emit(Stream::Stderr, &format!("{message}\n"));
        2
    }

    fn fail(&mut self, message: String) -> i32 {
        self.emit(Stream::Stderr, &format!("{message}\n"));
        1
    }

    pub(super) fn cat(&mut self, args: &[String]) -> i32 {
        let paths = match forms::cat(args) {
            Ok(paths) => paths,
            Err(message) => return self.usage(&message),
        };
        let mut status = 0;
        for path in paths {
            match self.context.files.read(path) {
                Ok(content) => self.emit(Stream::Stdout, &String::from_utf8_lossy(&content)),
                Err(error) => status = self.fail(format!("cat: can't open '{path}': {error}")),
            }
        }
        status
    }

    pub(super) fn ls(&mut self, args: &[String]) -> i32 {
        let ls = match Ls::parse(args) {
            Ok(ls) => ls,
            Err(message) => return self.usage(&message),
        };
        let path = ls.path.as_deref().unwrap_or("/");
        match self.context.files.list(path) {
            // A file operand is printed as given.
            Ok(None) => {
                self.emit(Stream::Stdout, &format!("{path}\n"));
                0
            }
            Ok(Some(names)) => {
                let mut out = String::new();
                if ls.all {
                    out.push_str(".\n..\n");
                }
                for name in names {
                    if name.starts_with('.') && !(ls.all || ls.almost_all) {
                        continue;
                    }
                    out.push_str(&name);
                    out.push('\n');
                }
                self.emit(Stream::Stdout, &out);
                0
            }
            Err(error) => self.fail(format!("ls: {path}: {error}")),
        }
    }

    pub(super) fn stat(&mut self, args: &[String]) -> i32 {
        let stat = match Stat::parse(args) {
            Ok(stat) => stat,
            Err(message) => return self.usage(&message),
        };
        let mut status = 0;
        for path in &stat.files {
            match self.context.files.metadata(path, stat.follow) {
                Ok(meta) => {
                    let line = format_stat(&stat.format, path, meta);
                    self.emit(Stream::Stdout, &format!("{line}\n"));
                }
                Err(error) => {
                    status = self.fail(format!("stat: can't stat '{path}': {error}"));
                }
            }
        }
        status
    }

    pub(super) fn touch(&mut self, args: &[String]) -> i32 {
        let mut status = 0;
        for path in args.iter().filter(|a| !a.starts_with('-')) {
            if let Err(error) = self.context.files.touch(path) {
                status = self.fail(format!("touch: {path}: {error}"));
            }
        }
        status
    }

    pub(super) fn rm(&mut self, args: &[String]) -> i32 {
        let flags: String = args
            .iter()
            .filter(|a| a.starts_with('-'))
            .flat_map(|a| a.chars().skip(1))
            .collect();
        let force = flags.contains('f');
        let recursive = flags.contains('r') || flags.contains('R');
        let mut status = 0;
        for path in args.iter().filter(|a| !a.starts_with('-')) {
            match self.context.files.remove(path, recursive) {
                Ok(()) => {}
                Err(FsError::NotFound) if force => {}
                Err(error) => status = self.fail(format!("rm: can't remove '{path}': {error}")),
            }
        }
        status
    }

    pub(super) fn mkdir(&mut self, args: &[String]) -> i32 {
        let (parents, dirs) = match forms::mkdir(args) {
            Ok(parsed) => parsed,
            Err(message) => return self.usage(&message),
        };
        let mut status = 0;
        for dir in dirs {
            if let Err(error) = self.context.files.mkdir(&dir, parents) {
                status = self.fail(format!("mkdir: can't create directory '{dir}': {error}"));
            }
        }
        status
    }

    pub(super) fn test(&mut self, args: &[String]) -> i32 {
        let (negate, args) = match args.split_first() {
            Some((first, rest)) if first == "!" => (true, rest),
            _ => (false, args),
        };
        let files = &self.context.files;
        let meta = |path: &str, follow: bool| files.metadata(path, follow).ok();
        let is = |path: &str, kind: Kind| meta(path, true).is_some_and(|m| m.kind == kind);
        let strs: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = match strs.as_slice() {
            [] => Some(false),
            [s] => Some(!s.is_empty()),
            ["-e", path] => Some(meta(path, true).is_some()),
            ["-f", path] => Some(is(path, Kind::File)),
            ["-d", path] => Some(is(path, Kind::Dir)),
            ["-h" | "-L", path] => Some(meta(path, false).is_some_and(|m| m.kind == Kind::Symlink)),
            ["-s", path] => {
                Some(meta(path, true).is_some_and(|m| m.kind == Kind::File && m.len > 0))
            }
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
        };
        match result {
            Some(result) => i32::from(result == negate),
            None => self.usage(&format!(
                "sh: test: unsupported expression: {}",
                args.join(" ")
            )),
        }
    }
}

/// One line of `stat -c` output.
fn format_stat(format: &[Directive], path: &str, meta: Meta) -> String {
    let mut out = String::new();
    for directive in format {
        match directive {
            Directive::Text(text) => out.push_str(text),
            Directive::Mode => out.push_str(&format!("{:o}", meta.mode)),
            Directive::Name => out.push_str(path),
            Directive::Size => out.push_str(&meta.len.to_string()),
            Directive::Type => out.push_str(match meta.kind {
                Kind::File if meta.len == 0 => "regular empty file",
                Kind::File => "regular file",
                Kind::Dir => "directory",
                Kind::Symlink => "symbolic link",
            }),
        }
    }
    out
}

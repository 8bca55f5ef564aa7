//! Builtins that work on files: `cat`, `hexdump -C`, `ls`, `stat`, `test`, `touch`, `rm`,
//! `mkdir`, through the container's [`FileSystem`](super::files::FileSystem)
//! (its mounts and its in-memory files). Messages are busybox's.

use super::files::{FsError, Kind, Meta};
use super::forms::{self, Directive, FileTest, IntOp, Ls, Stat, Test};
use super::shell::{Shell, Stream};

impl Shell<'_> {
    /// Reports a refused form (exit 2, as `sh` does for a usage error).
    pub(super) fn usage(&mut self, message: &str) -> i32 {
        self.emit(Stream::Stderr, &format!("{message}\n"));
        2
    }

    /// Reports a failed operation (exit 1).
    pub(super) fn fail(&mut self, message: String) -> i32 {
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
                Ok(content) => self.emit_bytes(Stream::Stdout, &content),
                Err(error) => status = self.fail(format!("cat: can't open '{path}': {error}")),
            }
        }
        status
    }

    /// `hexdump -C FILE…`: the files' bytes in the canonical layout, 16 to a line.
    pub(super) fn hexdump(&mut self, args: &[String]) -> i32 {
        let paths = match forms::hexdump(args) {
            Ok(paths) => paths,
            Err(message) => return self.usage(&message),
        };
        let mut bytes = Vec::new();
        let mut status = 0;
        for path in paths {
            match self.context.files.read(path) {
                Ok(content) => bytes.extend_from_slice(&content),
                Err(error) => status = self.fail(format!("hexdump: {path}: {error}")),
            }
        }
        self.emit(Stream::Stdout, &canonical_hexdump(&bytes));
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

    /// `test` (or `[ … ]` with `bracket`): 0 when the expression holds.
    pub(super) fn test(&mut self, args: &[String], bracket: bool) -> i32 {
        let parsed = if bracket {
            Test::parse_bracket(args)
        } else {
            Test::parse(args)
        };
        let (negate, test) = match parsed {
            Ok(parsed) => parsed,
            Err(message) => return self.usage(&format!("sh: {message}")),
        };
        let files = &self.context.files;
        let holds = match test {
            Test::Nothing => false,
            Test::Length { s, empty } => s.is_empty() == empty,
            Test::File(kind, path) => {
                let follow = kind != FileTest::Symlink;
                files.metadata(&path, follow).is_ok_and(|m| match kind {
                    FileTest::Exists => true,
                    FileTest::File => m.kind == Kind::File,
                    FileTest::Dir => m.kind == Kind::Dir,
                    FileTest::Symlink => m.kind == Kind::Symlink,
                    FileTest::NotEmpty => m.kind == Kind::File && m.len > 0,
                })
            }
            Test::Strings { left, equal, right } => (left == right) == equal,
            Test::Integers { left, op, right } => {
                let (Ok(a), Ok(b)) = (left.parse::<i64>(), right.parse::<i64>()) else {
                    let bad = if left.parse::<i64>().is_err() {
                        left
                    } else {
                        right
                    };
                    return self.usage(&format!("sh: {bad}: bad number"));
                };
                match op {
                    IntOp::Eq => a == b,
                    IntOp::Ne => a != b,
                    IntOp::Lt => a < b,
                    IntOp::Le => a <= b,
                    IntOp::Gt => a > b,
                    IntOp::Ge => a >= b,
                }
            }
        };
        i32::from(holds == negate)
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

/// `hexdump -C`'s layout: the offset, the bytes in two groups of eight, the printable
/// ones between bars; then the length.
fn canonical_hexdump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let mut hex = String::new();
        for (j, b) in line.iter().enumerate() {
            if j == 8 {
                hex.push(' ');
            }
            hex.push_str(&format!("{b:02x} "));
        }
        let text: String = line
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!("{:08x}  {hex:<49} |{text}|\n", i * 16));
    }
    if !bytes.is_empty() {
        out.push_str(&format!("{:08x}\n", bytes.len()));
    }
    out
}

#[cfg(test)]
mod hexdump_tests {
    #[test]
    fn canonical_layout() {
        let out = super::canonical_hexdump(&[0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff]);
        assert_eq!(
            out,
            "00000000  de ca fe ba d0 fe ff                              |.......|\n00000007\n"
        );
        let line = super::canonical_hexdump(b"Hello, world.\n\n\n\n");
        assert!(line.starts_with(
            "00000000  48 65 6c 6c 6f 2c 20 77  6f 72 6c 64 2e 0a 0a 0a  |Hello, world....|\n"
        ));
    }
}

//! Builtins that work on files: `cat`, `hexdump -C`, `ls`, `stat`, `test`, `touch`, `rm`,
//! `mkdir`, through the container's [`FileSystem`](super::files::FileSystem)
//! (its mounts and its in-memory files). Messages are busybox's.

use super::files::{FsError, Kind, Meta};
use super::forms::{self, Directive, FileTest, IntOp, Ls, Stat, Test};
use super::shell::{Shell, Stream};

impl Shell<'_> {
    /// `chmod MODE FILE…`: an octal mode or `[ugoa]*[+-=][rwxst]*`, comma-separated.
    pub(super) fn chmod(&mut self, args: &[String]) -> i32 {
        let Some((mode, files)) = args.split_first().filter(|(_, files)| !files.is_empty()) else {
            return self.fail("chmod: missing operand".to_owned());
        };
        let mut status = 0;
        for path in files {
            let old = match self.context.files.metadata(path, true) {
                Ok(meta) => meta.mode,
                Err(error) => {
                    status = self.fail(format!("chmod: {path}: {error}"));
                    continue;
                }
            };
            let Some(new) = parse_mode(mode, old, self.umask) else {
                return self.fail(format!("chmod: invalid mode '{mode}'"));
            };
            if let Err(error) = self.context.files.chmod(path, new) {
                status = self.fail(format!("chmod: {path}: {error}"));
            }
        }
        status
    }

    /// `umask [-S] [MODE]`.
    pub(super) fn umask_command(&mut self, args: &[String]) -> i32 {
        match args.first().map(String::as_str) {
            None => {
                let text = format!("{:04o}\n", self.umask);
                self.emit(Stream::Stdout, &text);
                0
            }
            Some("-S") => {
                let allowed = !self.umask & 0o777;
                let mut parts = Vec::new();
                for (who, shift) in [("u", 6), ("g", 3), ("o", 0)] {
                    let bits = (allowed >> shift) & 7;
                    let mut part = format!("{who}=");
                    for (bit, c) in [(4, 'r'), (2, 'w'), (1, 'x')] {
                        if bits & bit != 0 {
                            part.push(c);
                        }
                    }
                    parts.push(part);
                }
                let text = format!("{}\n", parts.join(","));
                self.emit(Stream::Stdout, &text);
                0
            }
            Some(mode) => match u32::from_str_radix(mode, 8) {
                Ok(mask) if mask <= 0o777 => {
                    self.umask = mask;
                    0
                }
                _ => {
                    let message = format!("Illegal mode: {mode}");
                    self.builtin_error("umask", &message, 1)
                }
            },
        }
    }

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
            if stat.filesystem {
                match self.context.files.fs_type(path) {
                    Ok(kind) => {
                        let line = format_statfs(&stat.format, path, &kind);
                        self.emit(Stream::Stdout, &format!("{line}\n"));
                    }
                    Err(error) => {
                        status = self.fail(format!(
                            "stat: can't read file system information for '{path}': {error}"
                        ));
                    }
                }
                continue;
            }
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
            let existed = self.context.files.metadata(path, true).is_ok();
            match self.context.files.touch(path) {
                Err(error) => status = self.fail(format!("touch: {path}: {error}")),
                Ok(()) if !existed => self.created(path, 0o666),
                Ok(()) => {}
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
            let existed = self.context.files.metadata(&dir, true).is_ok();
            match self.context.files.mkdir(&dir, parents) {
                Err(error) => {
                    status = self.fail(format!("mkdir: can't create directory '{dir}': {error}"));
                }
                Ok(()) if !existed => self.created(&dir, 0o777),
                Ok(()) => {}
            }
        }
        status
    }

    /// `test` (or `[ … ]` with `bracket`): 0 when the expression holds.
    pub(super) fn test(&mut self, args: &[String], bracket: bool) -> i32 {
        let parsed = if bracket {
            Test::parse_bracket(args)
        } else {
            Test::parse_any(args)
        };
        let alternatives = match parsed {
            Ok(parsed) => parsed,
            Err(message) => return self.usage(&format!("sh: {message}")),
        };
        let mut holds = false;
        for primaries in alternatives {
            let mut all = true;
            for (negate, test) in primaries {
                match self.primary(test) {
                    Ok(value) => all &= value != negate,
                    Err(status) => return status,
                }
            }
            holds |= all;
        }
        i32::from(!holds)
    }

    /// One primary of `test`: whether it holds, or the status of its error.
    fn primary(&mut self, test: Test) -> Result<bool, i32> {
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
                    return Err(self.usage(&format!("sh: {bad}: bad number")));
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
        Ok(holds)
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
            Directive::ModeString => out.push_str(&mode_string(meta)),
            // Refused by the form without -f.
            Directive::FsType => {}
        }
    }
    out
}

/// `stat -f -c FORMAT`'s line (`%T` and `%n`).
fn format_statfs(format: &[Directive], path: &str, kind: &str) -> String {
    let mut out = String::new();
    for directive in format {
        match directive {
            Directive::Text(text) => out.push_str(text),
            Directive::Name => out.push_str(path),
            Directive::FsType => out.push_str(kind),
            _ => {}
        }
    }
    out
}

/// `drwxr-xr-x`: the type, then read/write/execute for user, group and
/// others, with set-id and sticky bits as `s`/`S` and `t`/`T`.
pub(super) fn mode_string(meta: Meta) -> String {
    let mut out = String::from(match meta.kind {
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        Kind::File => '-',
    });
    let mode = meta.mode;
    for (shift, special, set, unset) in [
        (6, 0o4000, 's', 'S'),
        (3, 0o2000, 's', 'S'),
        (0, 0o1000, 't', 'T'),
    ] {
        let bits = (mode >> shift) & 7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => set,
            (false, true) => unset,
            (true, false) => 'x',
            (false, false) => '-',
        });
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

/// A `chmod` mode applied to `old`: octal, or symbolic clauses.
fn parse_mode(mode: &str, old: u32, umask: u32) -> Option<u32> {
    if mode.chars().all(|c| c.is_ascii_digit()) {
        return u32::from_str_radix(mode, 8).ok().filter(|m| *m <= 0o7777);
    }
    let mut mode_bits = old;
    for clause in mode.split(',') {
        let who_end = clause.find(|c| !"ugoa".contains(c))?;
        let (who, rest) = clause.split_at(who_end);
        let mut chars = rest.chars();
        let op = chars.next().filter(|c| "+-=".contains(*c))?;
        let mut perm = 0;
        for c in chars {
            perm |= match c {
                'r' => 0o444,
                'w' => 0o222,
                'x' => 0o111,
                's' => 0o6000,
                't' => 0o1000,
                _ => return None,
            };
        }
        // No `ugoa`: all, less the umask (as chmod(1) does).
        let mask = if who.is_empty() {
            0o7777 & !umask
        } else {
            let mut mask = 0;
            for c in who.chars() {
                mask |= match c {
                    'u' => 0o4700,
                    'g' => 0o2070,
                    'o' => 0o1007,
                    _ => 0o7777,
                };
            }
            mask
        };
        match op {
            '+' => mode_bits |= perm & mask,
            '-' => mode_bits &= !(perm & mask),
            _ => mode_bits = (mode_bits & !mask) | (perm & mask),
        }
    }
    Some(mode_bits)
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

//! The forms of the builtins whose options matter: each command's options
//! and operands are parsed here, when the container is created (for a command
//! written with literal words, so an unsupported form is a `CreateContainer`
//! error) and again when it runs (for words built from variables: exit 2 with
//! the message on stderr). A form outside these is refused, never guessed at.

use super::env::is_name;
use super::parse;

/// A form the interpreter does not interpret, with busybox's wording of why
/// where busybox would refuse it too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct Refused(pub String);

impl Refused {
    pub(super) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// `ls [-1aA] [PATH]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ls {
    /// `-a`: also `.`, `..` and names starting with `.`.
    pub all: bool,
    /// `-A`: names starting with `.`, without `.` and `..`.
    pub almost_all: bool,
    /// The directory or file; the working directory `/` when absent.
    pub path: Option<String>,
}

impl Ls {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        let mut ls = Self {
            all: false,
            almost_all: false,
            path: None,
        };
        let mut operands = Vec::new();
        let mut options = true;
        for arg in args {
            match arg.strip_prefix('-') {
                Some("-") if options => options = false,
                Some(flags) if options && !flags.is_empty() => {
                    for flag in flags.chars() {
                        match flag {
                            '1' => {}
                            'a' => ls.all = true,
                            'A' => ls.almost_all = true,
                            _ => {
                                return Err(format!(
                                    "ls: option -{flag} is not interpreted (only -1, -a and -A: names, one per line)"
                                ));
                            }
                        }
                    }
                }
                _ => operands.push(arg.clone()),
            }
        }
        if operands.len() > 1 {
            return Err("ls: one operand at most is interpreted".to_owned());
        }
        ls.path = operands.pop();
        Ok(ls)
    }
}

/// A piece of a `stat -c` format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Directive {
    /// Text as written.
    Text(String),
    /// `%a`: the permission bits in octal.
    Mode,
    /// `%n`: the file name.
    Name,
    /// `%s`: the size in bytes.
    Size,
    /// `%F`: the file type.
    Type,
    /// `%A`: the file type and permissions as `ls -l` shows them.
    ModeString,
    /// `%T` (with `-f`): the file system's type, as busybox names it.
    FsType,
}

/// `stat [-L] -c FORMAT FILE…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stat {
    /// `-L`: follow a symbolic link (without it, a link reports itself).
    pub follow: bool,
    /// `-f`: the file system of each file.
    pub filesystem: bool,
    /// The parsed format.
    pub format: Vec<Directive>,
    /// The operands.
    pub files: Vec<String>,
}

impl Stat {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        const FORM: &str = "only 'stat [-L] [-f] -c FORMAT FILE…' is interpreted";
        let mut follow = false;
        let mut filesystem = false;
        let mut format = None;
        let mut files = Vec::new();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "-L" => follow = true,
                "-f" => filesystem = true,
                "-c" => match args.next() {
                    Some(value) => format = Some(value.clone()),
                    None => return Err("stat: option -c needs a format".to_owned()),
                },
                "-Lc" => {
                    follow = true;
                    format = args.next().cloned();
                }
                option if option.starts_with('-') && option.len() > 1 => {
                    return Err(format!("stat: option {option} is not interpreted ({FORM})"));
                }
                file => files.push(file.to_owned()),
            }
        }
        let Some(format) = format else {
            return Err(format!("stat: a format is needed ({FORM})"));
        };
        if files.is_empty() {
            return Err("stat: missing operand".to_owned());
        }
        let format = parse_format(&format)?;
        if let Some(wrong) = format.iter().find(|d| {
            !matches!(d, Directive::Text(_) | Directive::Name)
                && filesystem != matches!(d, Directive::FsType)
        }) {
            return Err(format!(
                "stat: {wrong:?} is not interpreted with{} -f (only %T and %n with -f)",
                if filesystem { "" } else { "out" }
            ));
        }
        Ok(Self {
            follow,
            filesystem,
            format,
            files,
        })
    }
}

fn parse_format(format: &str) -> Result<Vec<Directive>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        let directive = match chars.next() {
            Some('%') => {
                text.push('%');
                continue;
            }
            Some('a') => Directive::Mode,
            Some('n') => Directive::Name,
            Some('s') => Directive::Size,
            Some('F') => Directive::Type,
            Some('A') => Directive::ModeString,
            Some('T') => Directive::FsType,
            Some(other) => {
                return Err(format!(
                    "stat: format %{other} is not interpreted (only %a %A %n %s %F %T %%)"
                ));
            }
            None => return Err("stat: the format ends with a lone %".to_owned()),
        };
        if !text.is_empty() {
            out.push(Directive::Text(std::mem::take(&mut text)));
        }
        out.push(directive);
    }
    if !text.is_empty() {
        out.push(Directive::Text(text));
    }
    Ok(out)
}

/// `env [NAME=VALUE]… [COMMAND [ARG]…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EnvCommand {
    /// Variables set for the command (or for the printed environment).
    pub assignments: Vec<(String, String)>,
    /// The command; empty: print the environment.
    pub command: Vec<String>,
}

impl EnvCommand {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        let mut assignments = Vec::new();
        let mut rest = args;
        while let Some((first, tail)) = rest.split_first() {
            if first.starts_with('-') {
                return Err(format!(
                    "env: option {first} is not interpreted (only 'env [NAME=VALUE]… [COMMAND…]')"
                ));
            }
            match assignment(first) {
                Some((name, value)) => assignments.push((name.to_owned(), value.to_owned())),
                None => break,
            }
            rest = tail;
        }
        Ok(Self {
            assignments,
            command: rest.to_vec(),
        })
    }
}

/// `NAME=VALUE` split, if `word` is an assignment.
pub(super) fn assignment(word: &str) -> Option<(&str, &str)> {
    word.split_once('=').filter(|(name, _)| is_name(name))
}

/// `printenv [NAME]…`.
pub(super) fn printenv(args: &[String]) -> Result<&[String], String> {
    match args.iter().find(|a| a.starts_with('-')) {
        Some(option) => Err(format!(
            "printenv: option {option} is not interpreted (only 'printenv [NAME]…')"
        )),
        None => Ok(args),
    }
}

/// What `id` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Id {
    /// `id -u`.
    User,
    /// `id -g`.
    Group,
}

impl Id {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        match args {
            [flag] if flag == "-u" => Ok(Self::User),
            [flag] if flag == "-g" => Ok(Self::Group),
            _ => Err(format!(
                "id: only 'id -u' and 'id -g' are interpreted, not 'id {}' (fake-cri has no /etc/passwd to name users)",
                args.join(" ")
            )),
        }
    }
}

/// What `hostname` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hostname {
    /// `hostname`: the host name.
    Name,
    /// `hostname -f` (`--fqdn`, `--long`): the canonical name `/etc/hosts`
    /// gives the host name.
    Fqdn,
}

impl Hostname {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        match args {
            [] => Ok(Self::Name),
            [flag] if matches!(flag.as_str(), "-f" | "--fqdn" | "--long") => Ok(Self::Fqdn),
            [arg, ..] => Err(format!(
                "hostname: {arg} is not interpreted (only 'hostname', which prints the sandbox's host name, and 'hostname -f', its name in /etc/hosts)"
            )),
        }
    }
}

/// `cat FILE…` takes no options.
pub(super) fn cat(args: &[String]) -> Result<&[String], String> {
    match args.iter().find(|a| a.starts_with('-') && a.len() > 1) {
        Some(option) => Err(format!(
            "cat: option {option} is not interpreted (only 'cat FILE…')"
        )),
        None => Ok(args),
    }
}

/// `hexdump -C FILE…`: only the canonical layout.
pub(super) fn hexdump(args: &[String]) -> Result<&[String], String> {
    match args.split_first() {
        Some((c, files)) if c == "-C" && !files.is_empty() => Ok(files),
        _ => Err("hexdump: only 'hexdump -C FILE…' is interpreted".to_owned()),
    }
}

/// `mkdir [-p] DIR…`.
pub(super) fn mkdir(args: &[String]) -> Result<(bool, Vec<String>), String> {
    let mut parents = false;
    let mut dirs = Vec::new();
    for arg in args {
        match arg.as_str() {
            "-p" => parents = true,
            option if option.starts_with('-') => {
                return Err(format!(
                    "mkdir: option {option} is not interpreted (only 'mkdir [-p] DIR…')"
                ));
            }
            dir => dirs.push(dir.to_owned()),
        }
    }
    Ok((parents, dirs))
}

/// A file test of `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileTest {
    /// `-e`: exists.
    Exists,
    /// `-f`: a regular file.
    File,
    /// `-d`: a directory.
    Dir,
    /// `-h`, `-L`: a symbolic link.
    Symlink,
    /// `-s`: a file that is not empty.
    NotEmpty,
}

/// A comparison of integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntOp {
    /// `-eq`.
    Eq,
    /// `-ne`.
    Ne,
    /// `-lt`.
    Lt,
    /// `-le`.
    Le,
    /// `-gt`.
    Gt,
    /// `-ge`.
    Ge,
}

/// `test`'s `P -a P -o P`: alternatives of primaries that must all hold,
/// each `(negated, primary)`.
pub(super) type Alternatives = Vec<Vec<(bool, Test)>>;

/// A `test` / `[ … ]` expression: one primary, optionally negated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Test {
    /// No operand: false.
    Nothing,
    /// `S`, `-n S`: the string is not empty; `-z S`: it is (`empty`).
    Length {
        /// The string.
        s: String,
        /// `-z`.
        empty: bool,
    },
    /// `-e -f -d -h -L -s F`.
    File(FileTest, String),
    /// `S = S`, `S == S`, `S != S`.
    Strings {
        /// Left operand.
        left: String,
        /// `=` (else `!=`).
        equal: bool,
        /// Right operand.
        right: String,
    },
    /// `N -eq N` and the other integer comparisons.
    Integers {
        /// Left operand (checked to be a number when it runs).
        left: String,
        /// The comparison.
        op: IntOp,
        /// Right operand.
        right: String,
    },
}

impl Test {
    /// Parses `test`'s operands: `(negated, expression)`.
    pub(super) fn parse(args: &[String]) -> Result<(bool, Self), String> {
        let (negate, args) = match args.split_first() {
            Some((first, rest)) if first == "!" && !rest.is_empty() => (true, rest),
            _ => (false, args),
        };
        let strs: Vec<&str> = args.iter().map(String::as_str).collect();
        let file = |op: &str| match op {
            "-e" => Some(FileTest::Exists),
            "-f" => Some(FileTest::File),
            "-d" => Some(FileTest::Dir),
            "-h" | "-L" => Some(FileTest::Symlink),
            "-s" => Some(FileTest::NotEmpty),
            _ => None,
        };
        let int = |op: &str| match op {
            "-eq" => Some(IntOp::Eq),
            "-ne" => Some(IntOp::Ne),
            "-lt" => Some(IntOp::Lt),
            "-le" => Some(IntOp::Le),
            "-gt" => Some(IntOp::Gt),
            "-ge" => Some(IntOp::Ge),
            _ => None,
        };
        let test = match strs.as_slice() {
            [] => Self::Nothing,
            [s] => Self::Length {
                s: (*s).to_owned(),
                empty: false,
            },
            [op @ ("-n" | "-z"), s] => Self::Length {
                s: (*s).to_owned(),
                empty: *op == "-z",
            },
            [op, path] if file(op).is_some() => {
                Self::File(file(op).unwrap_or(FileTest::Exists), (*path).to_owned())
            }
            [left, op @ ("=" | "==" | "!="), right] => Self::Strings {
                left: (*left).to_owned(),
                equal: *op != "!=",
                right: (*right).to_owned(),
            },
            [left, op, right] if int(op).is_some() => Self::Integers {
                left: (*left).to_owned(),
                op: int(op).unwrap_or(IntOp::Eq),
                right: (*right).to_owned(),
            },
            _ => {
                return Err(format!(
                    "test: '{}' is not interpreted (one of -e -f -d -h -L -s F, -n -z S, S, S = S, S != S, N -eq|-ne|-lt|-le|-gt|-ge N, after an optional !)",
                    args.join(" ")
                ));
            }
        };
        Ok((negate, test))
    }

    /// Parses `[ … ]`'s operands, which end with `]`.
    pub(super) fn parse_bracket(args: &[String]) -> Result<Alternatives, String> {
        match args.split_last() {
            Some((last, inner)) if last == "]" => Self::parse_any(inner),
            _ => Err("[: missing ]".to_owned()),
        }
    }

    /// Parses primaries joined by `-a` (binding tighter) and `-o`: the
    /// alternatives, each the primaries that must all hold. An operand that
    /// looks like `-a` (`[ "$x" = -a ]`) is read as one primary first.
    pub(super) fn parse_any(args: &[String]) -> Result<Alternatives, String> {
        let whole = Self::parse(args);
        if whole.is_ok() || !args.iter().any(|a| a == "-a" || a == "-o") {
            return whole.map(|primary| vec![vec![primary]]);
        }
        args.split(|a| a == "-o")
            .map(|alternative| {
                alternative
                    .split(|a| a == "-a")
                    .map(Self::parse)
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect()
    }
}

/// Checks a command written with literal words: `Err` names what is not
/// interpreted. Commands without a form here take anything.
pub(super) fn check(argv: &[String]) -> Result<(), String> {
    // `NAME=VALUE CMD …`: the command follows the assignments.
    let start = argv.iter().take_while(|w| assignment(w).is_some()).count();
    let Some((name, args)) = argv[start..].split_first() else {
        return Ok(());
    };
    match super::basename(name) {
        "ls" => Ls::parse(args).map(drop),
        "stat" => Stat::parse(args).map(drop),
        "env" => {
            let env = EnvCommand::parse(args)?;
            check(&env.command)
        }
        "printenv" => printenv(args).map(drop),
        "id" => Id::parse(args).map(drop),
        "hostname" => Hostname::parse(args).map(drop),
        "cat" => cat(args).map(drop),
        "hexdump" => hexdump(args).map(drop),
        "tail" => super::tail::Tail::parse(args)
            .map(drop)
            .map_err(|refused| refused.0),
        "tar" => super::archive::Tar::parse(args).map(drop),
        "curl" => super::curl::Curl::parse(args).map(drop),
        "mkdir" => mkdir(args).map(drop),
        "test" => Test::parse_any(args).map(drop),
        "[" => Test::parse_bracket(args).map(drop),
        // A nested script written out is checked now too.
        "sh" | "bash" | "ash" | "dash" => match (args.first().map(String::as_str), args.get(1)) {
            (Some("-c"), Some(script)) => parse(script)
                .map(drop)
                .map_err(|e| format!("in the script of {name} -c: {e}")),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn accepted_forms() {
        for line in [
            "ls",
            "ls -1 /etc",
            "ls -aA /x",
            "stat -c %a /f",
            "stat -L -c %n:%a:%s:%F%% /f /g",
            "env",
            "env A=1 B=2 printenv A",
            "A=1 B=2",
            "A=1 printenv A",
            "printenv",
            "printenv HOME PATH",
            "id -u",
            "id -g",
            "hostname",
            "hostname -f",
            "hostname --fqdn",
            "hostname --long",
            "cat /a /b",
            "cat",
            "hexdump -C /a",
            "mkdir -p /a/b",
            "sh -c true",
            "test ! -e /tmp/x",
            "[ -n x ]",
            "[ 3 -gt 2 ]",
            "sleep 1",
            "tail -f /dev/null",
        ] {
            check(&argv(line)).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        }
    }

    #[test]
    fn refused_forms_say_why() {
        for (line, wanted) in [
            ("ls -l /etc", "option -l"),
            ("ls /a /b", "one operand"),
            ("stat /f", "a format is needed"),
            ("stat -c %U /f", "format %U"),
            ("stat -c %a", "missing operand"),
            ("env -i sh", "option -i"),
            ("env A=1 ls -l", "option -l"),
            ("A=1 ls -l", "option -l"),
            ("printenv -0", "option -0"),
            ("id", "only 'id -u'"),
            ("id -un", "only 'id -u'"),
            ("hostname -i", "hostname: -i"),
            ("hostname -s", "hostname: -s"),
            ("hostname -f -s", "hostname: -f"),
            ("hostname web", "hostname: web"),
            ("cat -n /f", "option -n"),
            ("mkdir -m 700 /d", "option -m"),
            ("test -x /bin/sh", "test: '-x /bin/sh' is not interpreted"),
            ("[ -f /a", "[: missing ]"),
            ("[ a = b -o -x c ]", "is not interpreted"),
        ] {
            let error = check(&argv(line)).expect_err(line);
            assert!(error.contains(wanted), "{line:?}: {error}");
        }
        let nested = check(&["sh".into(), "-c".into(), "sleep 1 &".into()]).unwrap_err();
        assert!(nested.contains("background"), "{nested}");
        // A command written out inside a substitution is checked too.
        let inner = check(&["sh".into(), "-c".into(), "echo $(ls -l /)".into()]).unwrap_err();
        assert!(inner.contains("option -l"), "{inner}");
    }

    #[test]
    fn stat_format() {
        let stat = Stat::parse(&argv("stat -c [%a]%n /f")).unwrap();
        assert_eq!(
            stat.format,
            [
                Directive::Text("[".into()),
                Directive::Mode,
                Directive::Text("]".into()),
                Directive::Name
            ]
        );
        assert!(!stat.follow);
    }
}

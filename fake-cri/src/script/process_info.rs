//! Builtins that report what a process knows of itself: `env`, `printenv`,
//! `hostname`, `id`, and the variable builtins `export` and `unset`.

use super::env::is_name;
use super::forms::{self, EnvCommand, Hostname, Id};
use super::shell::{Shell, Stream};
use super::signals::Stop;

impl Shell<'_> {
    /// `env`: prints the exported environment as `NAME=value` lines, or runs
    /// a command with variables added.
    pub(super) async fn env_command(&mut self, args: &[String]) -> Result<i32, Stop> {
        let env = match EnvCommand::parse(args) {
            Ok(env) => env,
            Err(message) => return Ok(self.usage(&message)),
        };
        let saved = self.context.env.clone();
        for (name, value) in &env.assignments {
            self.context.env.set(name, value);
        }
        let result = if env.command.is_empty() {
            let mut out = String::new();
            let vars: Vec<(&str, &str)> = if self.ash {
                super::env::ash_order(&self.context.env)
            } else {
                self.context.env.iter().collect()
            };
            for (name, value) in vars {
                out.push_str(&format!("{name}={value}\n"));
            }
            self.emit(Stream::Stdout, &out);
            Ok(0)
        } else {
            self.builtin(&env.command).await
        };
        self.context.env = saved;
        result
    }

    /// `printenv [NAME]…`: the values (all `NAME=value` lines without a
    /// name); exit 1 when a name is not set.
    pub(super) fn printenv(&mut self, args: &[String]) -> i32 {
        let names = match forms::printenv(args) {
            Ok(names) => names,
            Err(message) => return self.usage(&message),
        };
        if names.is_empty() {
            let mut out = String::new();
            for (name, value) in self.context.env.iter() {
                out.push_str(&format!("{name}={value}\n"));
            }
            self.emit(Stream::Stdout, &out);
            return 0;
        }
        let mut status = 0;
        let mut out = String::new();
        for name in names {
            match self.context.env.get(name) {
                Some(value) => {
                    out.push_str(value);
                    out.push('\n');
                }
                None => status = 1,
            }
        }
        self.emit(Stream::Stdout, &out);
        status
    }

    /// `hostname`: the sandbox's host name (the UTS name, not `$HOSTNAME`);
    /// `hostname -f`: its canonical name in `/etc/hosts`, as busybox
    /// resolves it. Without a hosts entry busybox would ask DNS, which
    /// fake-cri has not got: that is an unknown host.
    pub(super) fn hostname(&mut self, args: &[String]) -> i32 {
        let form = match Hostname::parse(args) {
            Ok(form) => form,
            Err(message) => return self.usage(&message),
        };
        let name = self.context.hostname.clone();
        let printed = match form {
            Hostname::Name => name,
            Hostname::Fqdn => {
                let hosts = self.context.files.read("/etc/hosts").unwrap_or_default();
                match canonical_name(&String::from_utf8_lossy(&hosts), &name) {
                    Some(fqdn) => fqdn.to_owned(),
                    None => {
                        self.emit(Stream::Stderr, &format!("hostname: {name}: Unknown host\n"));
                        return 1;
                    }
                }
            }
        };
        self.emit(Stream::Stdout, &format!("{printed}\n"));
        0
    }

    /// `id -u` / `id -g`: the user and group the container runs as.
    pub(super) fn id(&mut self, args: &[String]) -> i32 {
        let value = match Id::parse(args) {
            Ok(Id::User) => self.context.uid,
            Ok(Id::Group) => self.context.gid,
            Err(message) => return self.usage(&message),
        };
        self.emit(Stream::Stdout, &format!("{value}\n"));
        0
    }

    /// `export NAME[=VALUE]…`: the variables join the environment.
    pub(super) fn export(&mut self, args: &[String]) -> Result<i32, Stop> {
        for arg in args {
            let (name, value) = match forms::assignment(arg) {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            if !is_name(name) {
                return Err(self.special_error("export", &format!("{name}: bad variable name")));
            }
            let value = value
                .or_else(|| self.vars.remove(name))
                .or_else(|| self.context.env.get(name).map(str::to_owned));
            self.vars.remove(name);
            if let Some(value) = value {
                self.context.env.set(name, &value);
            }
        }
        Ok(0)
    }

    /// `unset NAME…`.
    pub(super) fn unset(&mut self, args: &[String]) -> Result<i32, Stop> {
        for name in args {
            if name == "-v" || name == "-f" {
                continue;
            }
            if !is_name(name) {
                return Err(self.special_error("unset", &format!("{name}: bad variable name")));
            }
            self.vars.remove(name);
            self.context.env.remove(name);
            self.functions.remove(name);
        }
        Ok(0)
    }

    /// `NAME=VALUE` as a command: an exported variable stays exported,
    /// any other is the shell's own (not in `env`).
    pub(super) fn assign(&mut self, name: &str, value: String) {
        if self.context.env.get(name).is_some() {
            self.context.env.set(name, &value);
        } else {
            self.vars.insert(name.to_owned(), value);
        }
    }
}

/// The canonical name of `name` in a hosts file: the first name of the first
/// line that lists `name` (case-insensitively, as the resolver compares
/// names). `#` starts a comment; a line is an address and its names.
pub(super) fn canonical_name<'h>(hosts: &'h str, name: &str) -> Option<&'h str> {
    hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut names = line.split_whitespace().skip(1);
        let canonical = names.next()?;
        std::iter::once(canonical)
            .chain(names)
            .any(|n| n.eq_ignore_ascii_case(name))
            .then_some(canonical)
    })
}

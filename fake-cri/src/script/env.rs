//! A process's environment, in the order `env` prints it, and the variables
//! a runtime gives every container.

/// `PATH` when neither the image nor the client sets one: containerd's
/// `oci.WithDefaultPathEnv`, which is also what the busybox image's config holds.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Environment variables in order. Setting a variable that exists replaces
/// its value in place, as containerd's `oci.WithEnv` does, so `env` lists
/// them in the order a real container would.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env(Vec<(String, String)>);

impl Env {
    /// The environment of a container's processes, built as containerd's CRI
    /// plugin and runc build it: `PATH` (default), `HOSTNAME` (the sandbox's
    /// host name), the image's variables (fake-cri has no image content, see
    /// [`image_env`]), the client's `envs` (which override all of those), and
    /// `HOME` last, set by runc from the user's passwd entry when absent.
    pub fn container<'a>(
        envs: impl IntoIterator<Item = (&'a str, &'a str)>,
        hostname: &str,
        uid: i64,
    ) -> Self {
        let mut env = Self::default();
        env.set("PATH", DEFAULT_PATH);
        env.set("HOSTNAME", hostname);
        for (name, value) in image_env() {
            env.set(name, value);
        }
        for (name, value) in envs {
            env.set(name, value);
        }
        if env.get("HOME").is_none() {
            // busybox's /etc/passwd gives root /root; runc falls back to `/`
            // for a user it does not find, which is every other uid here.
            env.set("HOME", if uid == 0 { "/root" } else { "/" });
        }
        env
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Sets `name`, in place if it exists, else at the end.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.iter_mut().find(|(key, _)| key == name) {
            Some((_, old)) => value.clone_into(old),
            None => self.0.push((name.to_owned(), value.to_owned())),
        }
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) {
        self.0.retain(|(key, _)| key != name);
    }

    /// The variables in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// The environment busybox ash passes to the commands it runs: its
/// variables walked in the order of its hash table (39 buckets, hashed on
/// the first character and the sum of all), each bucket in the order the
/// variables were made, `PATH` first (ash has it before it reads its
/// environment). Names that are not identifiers (`data-1`, from `envFrom`)
/// stay, as in upstream's busybox 1.36 image that the cases' pods run (Debian's
/// busybox 1.35, which the shell corpus compares with, drops them).
pub(crate) fn ash_order(env: &Env) -> Vec<(&str, &str)> {
    fn bucket(name: &str) -> u32 {
        let first = name.bytes().next().map_or(0, u32::from) << 4;
        (first + name.bytes().map(u32::from).sum::<u32>()) % 39
    }
    let mut vars: Vec<(&str, &str)> = env
        .iter()
        .filter(|(name, _)| *name == "PATH")
        .chain(env.iter().filter(|(name, _)| *name != "PATH"))
        .collect();
    // A stable sort keeps each bucket's order.
    vars.sort_by_key(|(name, _)| bucket(name));
    vars
}

/// Hook: the image config's `Env`. fake-cri knows no image content, so this
/// is empty; for busybox it would be `PATH` with [`DEFAULT_PATH`], which
/// [`Env::container`] sets anyway.
fn image_env() -> [(&'static str, &'static str); 0] {
    []
}

/// Whether `name` can be a shell variable name.
pub(crate) fn is_name(name: &str) -> bool {
    name.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic())
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_env_order_and_overrides() {
        let env = Env::container([("A", "1"), ("PATH", "/bin"), ("A", "2")], "pod", 0);
        let all: Vec<_> = env.iter().collect();
        assert_eq!(
            all,
            [
                ("PATH", "/bin"),
                ("HOSTNAME", "pod"),
                ("A", "2"),
                ("HOME", "/root")
            ]
        );
        let env = Env::container([("HOME", "/home/x")], "h", 1000);
        assert_eq!(env.get("HOME"), Some("/home/x"));
        assert_eq!(Env::container([], "h", 1000).get("HOME"), Some("/"));
    }

    #[test]
    fn ash_hash_order() {
        let mut env = Env::container([("data-1", "x")], "shell-corpus", 0);
        env.set("SHLVL", "1");
        env.set("PWD", "/");
        let names: Vec<_> = ash_order(&env).into_iter().map(|(n, _)| n).collect();
        // What busybox 1.35's `sh -c env` prints in a busybox container (and data-1).
        assert_eq!(
            names,
            ["HOSTNAME", "SHLVL", "HOME", "PATH", "PWD", "data-1"]
        );
    }

    #[test]
    fn names() {
        assert!(is_name("_a1") && is_name("PATH"));
        assert!(!is_name("1a") && !is_name("") && !is_name("a-b"));
    }
}

//! `tar`: archives of the container's files, as `kubectl cp` uses them — it
//! runs `tar cf - PATH` to copy out of a container and `tar -xmf - -C DIR`
//! with the archive on standard input to copy in. Messages are busybox's.
//!
//! The archive is written and read with the `tar` crate (ustar headers, GNU
//! long names), through the container's [`FileSystem`] like every other
//! command, so mounts, read-only roots and symbolic links inside volumes
//! behave as they do for `cat` and `ls`.

use std::collections::BTreeSet;
use std::io::Read;

use super::files::{FileSystem, FsError, Kind};
use super::mounts::{join, normalize};
use super::shell::{Shell, Stream};

/// What `tar` is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `c`: write an archive of the named paths.
    Create,
    /// `x`: extract an archive.
    Extract,
    /// `t`: list an archive's member names.
    List,
}

/// A `tar` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tar {
    pub mode: Mode,
    /// The archive: `-` is standard input or output, anything else a file.
    pub archive: String,
    /// `-C DIR`: where paths are taken from or members extracted to.
    pub directory: Option<String>,
    /// The paths to archive (create only).
    pub paths: Vec<String>,
}

impl Tar {
    /// Parses `tar`'s arguments in the forms `kubectl cp` and scripts use:
    /// the first word's letters without a dash (`cf`), or with one (`-xmf`),
    /// then `-C DIR` and the long options kubectl passes.
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        let mut mode = None;
        let mut archive = None;
        let mut directory = None;
        let mut paths = Vec::new();
        let mut wants_archive = 0;
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            if wants_archive > 0 {
                wants_archive -= 1;
                archive = Some(arg.to_owned());
                continue;
            }
            match arg {
                // Owners and permission bits are not simulated.
                "--no-same-permissions" | "--no-same-owner" => continue,
                "-C" => {
                    let dir = args
                        .get(i)
                        .ok_or("tar: option requires an argument -- 'C'")?;
                    directory = Some(dir.clone());
                    i += 1;
                    continue;
                }
                _ => {}
            }
            let letters = match arg.strip_prefix('-') {
                Some(letters) if !letters.is_empty() && !letters.starts_with('-') => letters,
                // Old style: the first word holds the letters without a dash.
                None if i == 1 => arg,
                _ if arg.starts_with('-') && arg != "-" => {
                    return Err(format!(
                        "tar: option {arg} is not interpreted (only c, x, t, f, m, o, -C DIR, --no-same-permissions, --no-same-owner)"
                    ));
                }
                _ => {
                    paths.push(arg.to_owned());
                    continue;
                }
            };
            for letter in letters.chars() {
                let chosen = match letter {
                    'c' => Mode::Create,
                    'x' => Mode::Extract,
                    't' => Mode::List,
                    'f' => {
                        wants_archive += 1;
                        continue;
                    }
                    // `m` (do not restore times) and `o` (do not restore
                    // owners) change nothing here.
                    'm' | 'o' => continue,
                    other => {
                        return Err(format!(
                            "tar: option -{other} is not interpreted (only c, x, t, f, m, o, -C DIR, --no-same-permissions, --no-same-owner)"
                        ));
                    }
                };
                if mode.is_some_and(|mode| mode != chosen) {
                    return Err("tar: only one of -c, -x, -t may be given".to_owned());
                }
                mode = Some(chosen);
            }
        }
        let mode = mode.ok_or("tar: one of -c, -x, -t must be given")?;
        let archive = archive.ok_or(
            "tar: only an explicit archive is interpreted ('f -' for standard input or output, or 'f FILE')",
        )?;
        match mode {
            Mode::Create if paths.is_empty() => Err("tar: empty archive".to_owned()),
            Mode::Extract | Mode::List if !paths.is_empty() => Err(format!(
                "tar: member names ({}) are not interpreted: the whole archive is read",
                paths.join(" ")
            )),
            _ => Ok(Self {
                mode,
                archive,
                directory,
                paths,
            }),
        }
    }
}

impl Shell<'_> {
    /// `tar`: see the module documentation.
    pub(super) async fn tar(&mut self, args: &[String]) -> i32 {
        let tar = match Tar::parse(args) {
            Ok(tar) => tar,
            Err(message) => return self.usage(&message),
        };
        let base = tar
            .directory
            .as_deref()
            .map_or_else(|| "/".to_owned(), normalize);
        if tar.directory.is_some()
            && !matches!(self.context.files.metadata(&base, true), Ok(m) if m.kind == Kind::Dir)
        {
            let dir = tar.directory.unwrap_or_default();
            return self.fail(format!(
                "tar: can't change directory to '{dir}': No such file or directory"
            ));
        }
        match tar.mode {
            Mode::Create => self.tar_create(&tar, &base),
            Mode::Extract | Mode::List => {
                let data = match self.archive_input(&tar.archive).await {
                    Ok(data) => data,
                    Err(error) => {
                        return self.fail(format!("tar: can't open '{}': {error}", tar.archive));
                    }
                };
                self.tar_read(&data, &base, tar.mode == Mode::List)
            }
        }
    }

    fn tar_create(&mut self, tar: &Tar, base: &str) -> i32 {
        let mut builder = tar::Builder::new(Vec::new());
        let mut status = 0;
        let mut stripped = BTreeSet::new();
        for path in &tar.paths {
            let (prefix, name) = safe_name(path);
            if !prefix.is_empty() && stripped.insert(prefix.to_owned()) {
                self.emit(
                    Stream::Stderr,
                    &format!("tar: removing leading '{prefix}' from member names\n"),
                );
            }
            let source = if path.starts_with('/') {
                normalize(path)
            } else {
                join(base, &[path])
            };
            let member = Member {
                source: &source,
                name,
                shown: path,
            };
            if let Err(message) = add(&self.context.files, &mut builder, &member) {
                self.emit(Stream::Stderr, &format!("tar: {message}\n"));
                status = 1;
            }
        }
        let archive = match builder.into_inner() {
            Ok(archive) => archive,
            Err(error) => return self.fail(format!("tar: {error}")),
        };
        // As busybox: the archive is written whole (its end blocks too)
        // before a failure is reported.
        if tar.archive == "-" {
            self.emit_bytes(Stream::Stdout, &archive);
        } else if let Err(error) = self.context.files.write(&tar.archive, &archive, false) {
            return self.fail(format!("tar: can't open '{}': {error}", tar.archive));
        }
        if status != 0 {
            self.emit(
                Stream::Stderr,
                "tar: error exit delayed from previous errors\n",
            );
        }
        status
    }

    /// The archive's bytes: all of standard input for `-`, else a file.
    async fn archive_input(&mut self, archive: &str) -> Result<Vec<u8>, FsError> {
        if archive != "-" {
            return self.context.files.read(archive);
        }
        let mut data = Vec::new();
        while let Some(chunk) = match self.stdin.as_deref_mut() {
            Some(stdin) => stdin.chunk().await,
            None => None,
        } {
            data.extend_from_slice(&chunk);
        }
        Ok(data)
    }

    /// Extracts (or, with `list`, names) the members of `data` under `base`.
    fn tar_read(&mut self, data: &[u8], base: &str, list: bool) -> i32 {
        if data.is_empty() {
            return self.fail("tar: short read".to_owned());
        }
        let mut archive = tar::Archive::new(data);
        let entries = match archive.entries() {
            Ok(entries) => entries,
            Err(error) => return self.fail(format!("tar: {error}")),
        };
        let mut status = 0;
        let mut stripped = BTreeSet::new();
        for entry in entries {
            let mut entry = match entry {
                Ok(entry) => entry,
                Err(error) => return self.fail(format!("tar: {error}")),
            };
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            if list {
                self.emit(Stream::Stdout, &format!("{raw}\n"));
                continue;
            }
            let (prefix, name) = safe_name(&raw);
            if !prefix.is_empty() && stripped.insert(prefix.to_owned()) {
                self.emit(
                    Stream::Stderr,
                    &format!("tar: removing leading '{prefix}' from member names\n"),
                );
            }
            if name.is_empty() {
                continue;
            }
            let target = join(base, &[name]);
            let files = &self.context.files;
            let result = match entry.header().entry_type() {
                tar::EntryType::Directory => files.mkdir(&target, true),
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let mut content = Vec::new();
                    match entry.read_to_end(&mut content) {
                        Ok(_) => parent_dirs(files, &target)
                            .and_then(|()| files.write(&target, &content, false)),
                        Err(error) => Err(error.into()),
                    }
                }
                kind => {
                    let link = entry
                        .link_name_bytes()
                        .map(|l| String::from_utf8_lossy(&l).into_owned())
                        .unwrap_or_default();
                    let what = if kind.is_symlink() {
                        "symlink"
                    } else if kind.is_hard_link() {
                        "hardlink"
                    } else {
                        "special file"
                    };
                    self.emit(
                        Stream::Stderr,
                        &format!(
                            "tar: can't create {what} '{name}' to '{link}': Operation not supported (fake-cri keeps regular files and directories only)\n"
                        ),
                    );
                    status = 1;
                    continue;
                }
            };
            if let Err(error) = result {
                self.emit(
                    Stream::Stderr,
                    &format!("tar: can't create '{name}': {error}\n"),
                );
                status = 1;
            }
        }
        status
    }
}

/// Creates the directories above `path` (in memory they exist implicitly).
fn parent_dirs(files: &FileSystem, path: &str) -> Result<(), FsError> {
    match path.rsplit_once('/') {
        Some((parent, _)) if !parent.is_empty() => files.mkdir(parent, true),
        _ => Ok(()),
    }
}

/// Splits a member name into the unsafe prefix busybox strips (leading `/`,
/// `../`, everything up to a last `/../`) and the rest.
fn safe_name(name: &str) -> (&str, &str) {
    let mut rest = name;
    loop {
        if let Some(next) = rest.strip_prefix('/') {
            rest = next;
        } else if let Some(next) = rest.strip_prefix("../") {
            rest = next;
        } else if let Some(at) = rest.rfind("/../") {
            rest = &rest[at + 4..];
        } else if rest == ".." || rest.ends_with("/..") {
            rest = "";
        } else {
            break;
        }
    }
    (&name[..name.len() - rest.len()], rest)
}

/// A file to archive.
struct Member<'a> {
    /// Its container path.
    source: &'a str,
    /// Its name in the archive.
    name: &'a str,
    /// The path as the command line gave it (and the names under it), for
    /// messages.
    shown: &'a str,
}

/// Adds a member to the archive, and a directory's contents under it.
fn add(
    files: &FileSystem,
    builder: &mut tar::Builder<Vec<u8>>,
    member: &Member<'_>,
) -> Result<(), String> {
    let Member {
        source,
        name,
        shown,
    } = *member;
    let failed = |error: &dyn std::fmt::Display| format!("{shown}: {error}");
    let meta = files.metadata(source, false).map_err(|e| failed(&e))?;
    let mut header = tar::Header::new_gnu();
    header.set_mode(meta.mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let error = |e: std::io::Error| failed(&e);
    match meta.kind {
        Kind::File => {
            let content = files.read(source).map_err(|e| failed(&e))?;
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(content.len() as u64);
            builder
                .append_data(&mut header, name, content.as_slice())
                .map_err(error)
        }
        Kind::Symlink => {
            let target = files.read_link(source).map_err(|e| failed(&e))?;
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            builder
                .append_link(&mut header, name, target)
                .map_err(error)
        }
        Kind::Dir => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            let dir_name = format!("{}/", name.trim_end_matches('/'));
            if !name.is_empty() {
                builder
                    .append_data(&mut header, &dir_name, std::io::empty())
                    .map_err(error)?;
            }
            let children = files
                .list(source)
                .map_err(|e| failed(&e))?
                .unwrap_or_default();
            for child in children {
                let name = if name.is_empty() {
                    child.clone()
                } else {
                    format!("{dir_name}{child}")
                };
                let child = Member {
                    source: &join(source, &[&child]),
                    name: &name,
                    shown: &format!("{}/{child}", shown.trim_end_matches('/')),
                };
                add(files, builder, &child)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tokio::sync::mpsc;

    use super::*;
    use crate::logs::Captured;
    use crate::script::{Context, Input, Program};

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn kubectl_cp_forms() {
        let out = Tar::parse(&argv("cf - /tmp/data")).unwrap();
        assert_eq!((out.mode, out.archive.as_str()), (Mode::Create, "-"));
        assert_eq!(out.paths, ["/tmp/data"]);
        let into = Tar::parse(&argv("-xmf - -C /tmp")).unwrap();
        assert_eq!(into.mode, Mode::Extract);
        assert_eq!(into.directory.as_deref(), Some("/tmp"));
        let no_preserve =
            Tar::parse(&argv("--no-same-permissions --no-same-owner -xmf - -C /")).unwrap();
        assert_eq!(no_preserve.mode, Mode::Extract);
        assert!(Tar::parse(&argv("tf -")).is_ok());
    }

    #[test]
    fn refused_forms_say_why() {
        for (line, says) in [
            ("czf - /tmp", "-z"),
            ("-x", "explicit archive"),
            ("cxf -", "only one"),
            ("cf -", "empty archive"),
            ("xf - a", "member names"),
            ("-xf - -C", "requires an argument"),
        ] {
            let error = Tar::parse(&argv(line)).unwrap_err();
            assert!(error.contains(says), "{line}: {error}");
        }
    }

    /// Runs `line` as an exec with `stdin`: (exit code, stdout, stderr).
    async fn run(context: &Context, line: &str, stdin: Option<Vec<u8>>) -> (i32, Vec<u8>, String) {
        let program = Program::from_argv(&argv(line)).unwrap();
        let mut output = Captured::default();
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(stdin) = stdin {
            tx.send(Bytes::from(stdin)).unwrap();
        }
        drop(tx);
        let mut input = Input::new(rx);
        let shell = Shell::exec(context.clone(), &mut output).with_stdin(&mut input);
        let code = shell.run(&program).await.exit_code;
        let stderr = String::from_utf8(output.stderr).unwrap();
        (code, output.stdout, stderr)
    }

    #[tokio::test]
    async fn copies_out_and_back_in_as_kubectl_cp_does() {
        let context = Context::default();
        let files = &context.files;
        files.mkdir("/tmp/d/sub", true).unwrap();
        files.write("/tmp/d/a.txt", b"alpha\n", false).unwrap();
        let binary = [0_u8, 159, 146, 150, 255, b'\n'];
        files.write("/tmp/d/sub/b.bin", &binary, false).unwrap();

        let (code, archive, stderr) = run(&context, "tar cf - /tmp/d", None).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stderr, "tar: removing leading '/' from member names\n");
        let (code, listing, _) = run(&context, "tar tf -", Some(archive.clone())).await;
        assert_eq!(code, 0);
        assert_eq!(
            String::from_utf8(listing).unwrap(),
            "tmp/d/\ntmp/d/a.txt\ntmp/d/sub/\ntmp/d/sub/b.bin\n"
        );

        let (code, _, stderr) = run(&context, "tar -xmf - -C /root", Some(archive)).await;
        assert_eq!((code, stderr.as_str()), (0, ""));
        assert_eq!(files.read("/root/tmp/d/a.txt").unwrap(), b"alpha\n");
        assert_eq!(files.read("/root/tmp/d/sub/b.bin").unwrap(), binary);

        let (code, _, stderr) = run(&context, "tar cf - /tmp/none", None).await;
        assert_eq!(code, 1);
        assert!(
            stderr.ends_with(
                "tar: /tmp/none: No such file or directory\ntar: error exit delayed from previous errors\n"
            ),
            "{stderr}"
        );
        let (code, _, stderr) = run(&context, "tar xf - -C /nowhere", Some(Vec::new())).await;
        assert_eq!(code, 1);
        assert_eq!(
            stderr,
            "tar: can't change directory to '/nowhere': No such file or directory\n"
        );
    }

    #[test]
    fn unsafe_prefixes_are_stripped() {
        assert_eq!(safe_name("/tmp/a"), ("/", "tmp/a"));
        assert_eq!(safe_name("../../etc/x"), ("../../", "etc/x"));
        assert_eq!(safe_name("a/../../b"), ("a/../../", "b"));
        assert_eq!(safe_name("tmp/a"), ("", "tmp/a"));
        assert_eq!(safe_name(".."), ("..", ""));
    }
}

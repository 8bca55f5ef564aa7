//! A program of a Debian package that is linked dynamically, with the shared libraries it
//! loads, for an image: the files the dynamic loader resolves for it on this host (`ldd`),
//! each at the path the loader names, so the program runs in the image as on the host.

use std::path::{Path, PathBuf};

use super::Error;

/// `program` (a file of this host) with its libraries and the dynamic loader: each
/// file's path in the image (without the leading `/`) and its content.
pub fn files(program: &Path) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let mut paths = vec![program.to_owned()];
    paths.extend(libraries(program)?);
    paths
        .into_iter()
        .map(|path| {
            // A link's target is read: the image needs the name the loader asks for.
            let content = std::fs::read(&path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            let name = path.to_string_lossy().trim_start_matches('/').to_owned();
            Ok((name, content))
        })
        .collect()
}

/// The shared libraries and the loader `ldd` lists for `program`, by absolute path.
fn libraries(program: &Path) -> Result<Vec<PathBuf>, Error> {
    let output = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|source| Error::Read {
            path: program.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::NotDynamic {
            path: program.to_owned(),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

/// `ldd`'s lines: `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and the loader's
/// `/lib64/ld-linux-x86-64.so.2 (0x…)`; the kernel's `linux-vdso.so.1` has no file.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once(" => ") {
                Some((_, rest)) => rest,
                None => line,
            };
            let path = path.split(" (").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_the_files_the_loader_opens() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd3a5f2000)\n\
                    \tlibcurl.so.4 => /lib/x86_64-linux-gnu/libcurl.so.4 (0x00007f0c1c0e0000)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c1bd00000)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f0c1c1c4000)\n";
        assert_eq!(
            parse_ldd(text),
            [
                "/lib/x86_64-linux-gnu/libcurl.so.4",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
            ]
            .map(PathBuf::from)
        );
    }
}

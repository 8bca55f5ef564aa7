//! The test images the cases use, built from Debian's packages for a real runtime
//! (`nodeconform images --out DIR`, then `run --runtime containerd --images DIR`).
//!
//! Each image is an archive ([`oci`]) with the user, entrypoint, command and tags the
//! real image has, made of files Debian ships; a run imports them into each node's
//! containerd and serves them from a [`registry`] of its own for pulls.
//!
//! | image | from | what differs from the real image |
//! |---|---|---|
//! | `busybox:1.36`, `busybox:1.37` | `busybox-static` (1.35) | busybox 1.35: no `printenv`; its `sh` drops environment variables whose names are not identifiers (`data-1`) before running a child; the two tags are two images of the same files |
//! | `pause:3.9`, `3.10.1`, `3.10.2` | `busybox-static` | `/pause` is a busybox `sh` script (exits 0 on SIGTERM/SIGINT, as the real one), user 65535 |
//! | `e2e-test-images/nonroot:1.4` | `busybox-static` | busybox with `USER 1234` |
//! | cri-tools' `test-image-user-username` | `busybox-static` | busybox with `USER www-data` |
//! | `e2e-test-images/nginx:1.14-4` | `nginx` (1.22) with its libraries, over `busybox-static` | nginx 1.22 with Debian's paths ([`nginx`]); not built without Debian's `nginx` |
//! | `gcr.io/authenticated-image-pulling/alpine:3.7` | `busybox-static` | busybox, and private to the run's registry by a login of its own ([`private`]) |
//! | `e2e-test-images/agnhost` (2.45, 2.53, 2.63.0) | an agnhost binary given with `--agnhost` (built outside nodeconform) | busybox instead of Debian's userland beside it; not built without `--agnhost` |
//!
//! agnhost is not rebuilt here: it is Kubernetes' own Go program, dozens of
//! servers whose behaviour the cases read (netexec's `/dial`, the liveness
//! server's timing), and a copy of ours would be one more thing to hold to
//! upstream. The real binary, given by path, is the honest choice; without
//! it the cases that run agnhost are ignored on such a runtime, with that reason.

mod dynamic;
pub mod nginx;
pub mod oci;
pub mod private;
pub mod registry;

use std::path::{Path, PathBuf};

use oci::{Config, Image, Layer};

/// Why the images cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The busybox binary is linked dynamically: it would not run in an image without its libraries.
    #[error(
        "{} is not a static executable (install Debian's busybox-static, or give --busybox)",
        path.display()
    )]
    NotStatic {
        /// The binary.
        path: PathBuf,
    },
    /// The busybox binary did not list its applets.
    #[error("{} --list did not list busybox's applets", path.display())]
    NoApplets {
        /// The binary.
        path: PathBuf,
    },
    /// A program to be copied with its libraries is not linked dynamically (or `ldd`
    /// failed on it).
    #[error("{}: ldd found no libraries: {message}", path.display())]
    NotDynamic {
        /// The program.
        path: PathBuf,
        /// What `ldd` said.
        message: String,
    },
    /// An archive could not be written.
    #[error("writing {}", path.display())]
    Write {
        /// The archive.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The programs of Debian's packages the agnhost image carries by default.
pub const AGNHOST_PROGRAMS: [&str; 2] = ["/usr/bin/curl", "/bin/bash"];

/// Where the images' files come from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// A static busybox (Debian's `busybox-static`: `/bin/busybox`).
    pub busybox: PathBuf,
    /// A static agnhost binary, built outside nodeconform; `None`: no agnhost image.
    pub agnhost: Option<PathBuf>,
    /// Programs of Debian's packages that upstream's agnhost image has too, copied into
    /// it with their libraries: `curl` (the lifecycle hook tests call it) and `bash`
    /// (probe tests run `/bin/bash -c` scripts with functions).
    pub agnhost_programs: Vec<PathBuf>,
    /// Debian's nginx, for the nginx image; `None`: no nginx image.
    pub nginx: Option<nginx::Files>,
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            busybox: PathBuf::from("/bin/busybox"),
            agnhost: None,
            agnhost_programs: AGNHOST_PROGRAMS.iter().map(PathBuf::from).collect(),
            nginx: nginx::Files::debian(),
        }
    }
}

/// One archive written.
#[derive(Debug, Clone)]
pub struct Built {
    /// The archive.
    pub file: PathBuf,
    /// The references it holds.
    pub tags: Vec<String>,
    /// The image id.
    pub id: String,
}

/// The image default `PATH` of busybox's image, and containerd's default.
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// busybox image's `/etc/passwd` and `/etc/group`, the users and groups
/// (`www-data`, `nobody`) cases run as by name.
pub(crate) const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
daemon:x:1:1:daemon:/usr/sbin:/bin/false\n\
bin:x:2:2:bin:/bin:/bin/false\n\
sys:x:3:3:sys:/dev:/bin/false\n\
sync:x:4:100:sync:/bin:/bin/sync\n\
mail:x:8:8:mail:/var/spool/mail:/bin/false\n\
www-data:x:33:33:www-data:/var/www:/bin/false\n\
operator:x:37:37:Operator:/var:/bin/false\n\
nobody:x:65534:65534:nobody:/home:/bin/false\n";
pub(crate) const GROUP: &str = "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\n\
disk:x:6:\nlp:x:7:\nmail:x:8:\nkmem:x:9:\nwheel:x:10:root\ncdrom:x:11:\ndialout:x:18:\n\
floppy:x:19:\nvideo:x:28:\naudio:x:29:\ntape:x:32:\nwww-data:x:33:\noperator:x:37:\n\
utmp:x:43:\nplugdev:x:46:\nstaff:x:50:\nlock:x:54:\nnetdev:x:82:\nusers:x:100:\nnogroup:x:65534:\n";

/// The pause program: PID 1 of every sandbox. It waits for ever and exits 0 on
/// SIGTERM or SIGINT, as `registry.k8s.io/pause` does; `wait` returns when a
/// trapped signal arrives, so the trap runs at once.
const PAUSE: &str = "#!/bin/busybox sh\n\
trap 'exit 0' TERM INT\n\
while :; do /bin/busybox sleep 3600 & wait; done\n";

/// Whether the ELF file `data` has no program interpreter (is statically linked).
fn is_static_elf(data: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let le16 = |at: usize| {
        data.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let le32 = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let le64 = |at: usize| {
        data.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    // ELF64, little-endian: what Debian's amd64 and arm64 builds are.
    if data.get(..6) != Some(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (le64(0x20), le16(0x36), le16(0x38)) else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(phnum))
        .all(|i| le32(phoff + i * usize::from(phentsize)).is_some_and(|kind| kind != PT_INTERP))
}

/// Reads a static executable.
fn read_static(path: &Path) -> Result<Vec<u8>, Error> {
    let data = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    if !is_static_elf(&data) {
        return Err(Error::NotStatic {
            path: path.to_owned(),
        });
    }
    Ok(data)
}

/// busybox's applets, as it lists them (`busybox --list`).
fn applets(busybox: &Path) -> Result<Vec<String>, Error> {
    let output = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .map_err(|source| Error::Read {
            path: busybox.to_owned(),
            source,
        })?;
    let applets: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|a| !a.is_empty() && !a.contains('/') && *a != "busybox")
        .map(str::to_owned)
        .collect();
    if !output.status.success() || !applets.iter().any(|a| a == "sh") {
        return Err(Error::NoApplets {
            path: busybox.to_owned(),
        });
    }
    Ok(applets)
}

/// The busybox image's files: `/bin/busybox` with a link per applet, the
/// users and groups, and the directories the image has.
fn busybox_layer(binary: &[u8], applets: &[String]) -> std::io::Result<Layer> {
    let mut layer = Layer::new();
    for (dir, mode) in [
        ("bin", 0o755),
        ("dev", 0o755),
        ("etc", 0o755),
        ("home", 0o755),
        ("root", 0o700),
        ("tmp", 0o1777),
        ("usr", 0o755),
        ("usr/sbin", 0o755),
        ("var", 0o755),
        ("var/www", 0o755),
    ] {
        layer.dir(dir, mode)?;
    }
    layer.file("bin/busybox", 0o755, binary)?;
    for applet in applets {
        layer.symlink(&format!("bin/{applet}"), "busybox")?;
    }
    layer.file("etc/passwd", 0o644, PASSWD.as_bytes())?;
    layer.file("etc/group", 0o644, GROUP.as_bytes())?;
    Ok(layer)
}

/// Builds every image `sources` allow into `out` (created if missing), one
/// archive per image.
pub fn build(out: &Path, sources: &Sources) -> Result<Vec<Built>, Error> {
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Write { path, source }
    };
    std::fs::create_dir_all(out).map_err(write_err(out))?;
    let busybox = read_static(&sources.busybox)?;
    let applets = applets(&sources.busybox)?;
    let source_label = (
        "org.nodeconform.source".to_owned(),
        format!("Debian busybox-static ({})", sources.busybox.display()),
    );
    let busybox_image = |tags: &[&str], user: &str, version: &str| -> std::io::Result<Image> {
        Ok(Image {
            layers: vec![busybox_layer(&busybox, &applets)?],
            config: Config {
                cmd: vec!["sh".to_owned()],
                env: vec![PATH_ENV.to_owned()],
                user: user.to_owned(),
                labels: vec![
                    source_label.clone(),
                    ("org.nodeconform.image".to_owned(), version.to_owned()),
                ],
                ..Config::default()
            },
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        })
    };
    let mut images: Vec<(&str, std::io::Result<Image>)> = vec![
        (
            "busybox-1.36",
            busybox_image(&["docker.io/library/busybox:1.36"], "", "busybox:1.36"),
        ),
        (
            "busybox-1.37",
            busybox_image(&["docker.io/library/busybox:1.37"], "", "busybox:1.37"),
        ),
        (
            "nonroot-1.4",
            busybox_image(
                &["registry.k8s.io/e2e-test-images/nonroot:1.4"],
                "1234",
                "nonroot:1.4",
            ),
        ),
        (
            "test-image-user-username",
            busybox_image(
                &["gcr.io/k8s-staging-cri-tools/test-image-user-username:latest"],
                "www-data",
                "test-image-user-username",
            ),
        ),
    ];
    images.push(("alpine-3.7-private", {
        let mut image = busybox_image(&private::TAGS, "", "alpine:3.7 (private)");
        if let Ok(image) = &mut image {
            image
                .config
                .labels
                .push((private::LOGIN_LABEL.to_owned(), private::LOGIN.to_owned()));
        }
        image
    }));
    let pause = || -> std::io::Result<Image> {
        let mut program = Layer::new();
        program.file("pause", 0o755, PAUSE.as_bytes())?;
        Ok(Image {
            layers: vec![busybox_layer(&busybox, &applets)?, program],
            config: Config {
                entrypoint: vec!["/pause".to_owned()],
                env: vec![PATH_ENV.to_owned()],
                user: "65535:65535".to_owned(),
                labels: vec![source_label.clone()],
                ..Config::default()
            },
            tags: ["3.9", "3.10.1", "3.10.2"]
                .iter()
                .map(|v| format!("registry.k8s.io/pause:{v}"))
                .collect(),
        })
    };
    images.push(("pause", pause()));
    if let Some(files) = &sources.nginx {
        let layer = nginx::layer(files)?;
        let image = (|| -> std::io::Result<Image> {
            Ok(Image {
                layers: vec![busybox_layer(&busybox, &applets)?, layer()?],
                config: Config {
                    cmd: nginx::command(),
                    env: vec![PATH_ENV.to_owned()],
                    labels: vec![(
                        "org.nodeconform.source".to_owned(),
                        format!("Debian nginx ({})", files.binary.display()),
                    )],
                    ..Config::default()
                },
                tags: nginx::TAGS.map(String::from).to_vec(),
            })
        })();
        images.push(("nginx-1.14-4", image));
    }
    if let Some(agnhost) = &sources.agnhost {
        let binary = read_static(agnhost)?;
        let mut programs = Vec::new();
        for program in &sources.agnhost_programs {
            programs.extend(dynamic::files(program)?);
        }
        let image = (|| -> std::io::Result<Image> {
            let mut program = Layer::new();
            program.file("agnhost", 0o755, &binary)?;
            for (path, content) in &programs {
                program.file(path, 0o755, content)?;
            }
            Ok(Image {
                layers: vec![busybox_layer(&busybox, &applets)?, program],
                config: Config {
                    // As the real image: a container without args pauses.
                    entrypoint: vec!["/agnhost".to_owned()],
                    cmd: vec!["pause".to_owned()],
                    env: vec![PATH_ENV.to_owned()],
                    labels: vec![(
                        "org.nodeconform.source".to_owned(),
                        format!(
                            "agnhost from {}, with {}",
                            agnhost.display(),
                            sources
                                .agnhost_programs
                                .iter()
                                .map(|p| p.display().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                    ..Config::default()
                },
                tags: ["2.45", "2.53", "2.63.0"]
                    .iter()
                    .map(|v| format!("registry.k8s.io/e2e-test-images/agnhost:{v}"))
                    .collect(),
            })
        })();
        images.push(("agnhost", image));
    }
    images
        .into_iter()
        .map(|(name, image)| {
            let file = out.join(format!("{name}.tar"));
            let image = image.map_err(write_err(&file))?;
            let tags = image.tags.clone();
            let id = oci::write(image, &file).map_err(write_err(&file))?;
            Ok(Built { file, tags, id })
        })
        .collect()
}

/// What a directory of image archives holds.
#[derive(Debug, Clone, Default)]
pub struct Archives {
    /// The references, as containerd names them (`docker.io/library/busybox:1.36`).
    pub references: std::collections::BTreeSet<String>,
    /// Its busybox is one [`build`] made from Debian's busybox-static (labelled so).
    pub debian_busybox: bool,
    /// The archives a node imports, in name order: all but the private images', which
    /// only a pull with their login brings to a node ([`private`]).
    pub to_import: Vec<PathBuf>,
}

impl Archives {
    /// Reads the archives (`*.tar`) of `dir`: the index's `io.containerd.image.name`s,
    /// else `manifest.json`'s `RepoTags`, and the images' labels.
    pub fn read(dir: &Path) -> std::io::Result<Self> {
        let mut archives = Self::default();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|x| x != "tar") {
                continue;
            }
            let files = json_files(&path)?;
            let index = files.get("index.json");
            let docker = files.get("manifest.json");
            let mut names: Vec<String> = index
                .iter()
                .flat_map(|i| i["manifests"].as_array().cloned().unwrap_or_default())
                .filter_map(|m| {
                    m["annotations"]["io.containerd.image.name"]
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            if names.is_empty() {
                names = docker
                    .iter()
                    .flat_map(|d| d.as_array().cloned().unwrap_or_default())
                    .flat_map(|m| m["RepoTags"].as_array().cloned().unwrap_or_default())
                    .filter_map(|t| t.as_str().map(crate::backend::runtime::normalize))
                    .collect();
            }
            let config = docker
                .and_then(|d| d[0]["Config"].as_str())
                .and_then(|config| files.get(config));
            let ours =
                config.is_some_and(|c| c["config"]["Labels"]["org.nodeconform.source"].is_string());
            if config.is_none_or(|c| private::login(c).is_none()) {
                archives.to_import.push(path.clone());
            }
            if ours
                && names
                    .iter()
                    .any(|n| n.starts_with("docker.io/library/busybox:"))
            {
                archives.debian_busybox = true;
            }
            archives.references.extend(names);
        }
        archives.to_import.sort();
        Ok(archives)
    }
}

/// The JSON files of an archive (its index, manifests and configs; not its layers), by name.
pub(crate) fn json_files(
    path: &Path,
) -> std::io::Result<std::collections::HashMap<String, serde_json::Value>> {
    let mut files = std::collections::HashMap::new();
    // Layers are large; the JSON documents are small.
    for_each_file(
        path,
        |_, size| size <= 1 << 20,
        |name, data| {
            if let Ok(value) = serde_json::from_slice(&data) {
                files.insert(name.to_owned(), value);
            }
        },
    )?;
    Ok(files)
}

/// Reads the files of the archive at `path` that `wanted(name, size)` picks and hands each to
/// `read(name, bytes)`; names are as the layout spells them, without a leading `./`.
pub(crate) fn for_each_file(
    path: &Path,
    mut wanted: impl FnMut(&str, u64) -> bool,
    mut read: impl FnMut(&str, Vec<u8>),
) -> std::io::Result<()> {
    let mut archive = tar::Archive::new(std::fs::File::open(path)?);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry
            .path()?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        if !wanted(&name, entry.size()) {
            continue;
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data)?;
        read(&name, data);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_executable_is_told_from_a_dynamic_one() {
        // This test binary is dynamic (it links libc); a header with no
        // program headers at all has no interpreter.
        let own = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(!is_static_elf(&own));
        let mut header = own[..64].to_vec();
        header[0x38..0x3a].copy_from_slice(&0u16.to_le_bytes());
        assert!(is_static_elf(&header));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
    }
}

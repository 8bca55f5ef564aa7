//! The container runtime under the agents the harness starts: fake-cri (the default,
//! simulated, fault-injectable) or containerd (`--runtime containerd`, real containers,
//! [`super::containerd`]), and which cases each can run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::containerd::{self, Programs};
use crate::case::LoadedCase;
use crate::case::model::Requirement;
use crate::images::registry::{self, Registry};

/// Which runtime, as `--runtime` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// fake-cri: simulated containers, no processes (the default; needs nothing installed).
    #[default]
    FakeCri,
    /// containerd + runc with a CNI bridge, one per node (needs root and Debian's
    /// containerd, runc and containernetworking-plugins).
    Containerd,
}

/// The runtime of the nodes a run starts.
#[derive(Debug, Clone, Default)]
pub enum Runtime {
    /// fake-cri.
    #[default]
    FakeCri,
    /// containerd.
    Containerd(Arc<Containerd>),
}

/// What every node's containerd is started with.
#[derive(Debug)]
pub struct Containerd {
    /// The programs.
    pub programs: Programs,
    /// The image archives loaded into each node's containerd.
    pub images: Option<PathBuf>,
    /// What those archives hold.
    pub archives: crate::images::Archives,
    /// The command that runs the reference agent as a process (`nodeconform agent`), to
    /// which the node's flags are added.
    pub agent: Vec<String>,
    /// The archives' content, for the registry.
    content: Option<Arc<registry::Content>>,
    /// The registry every node's containerd pulls from, started with the first node.
    registry: tokio::sync::OnceCell<Registry>,
}

impl Containerd {
    /// The registry of the image archives, started on first use; none without archives.
    pub async fn registry(&self) -> std::io::Result<Option<&Registry>> {
        let Some(content) = &self.content else {
            return Ok(None);
        };
        self.registry
            .get_or_try_init(|| Registry::start(Arc::clone(content)))
            .await
            .map(Some)
    }
}

impl Runtime {
    /// containerd, with the archives of `images` loaded into every node's; `agent` runs
    /// the reference agent (`[PATH-OF-nodeconform, "agent"]`).
    pub fn containerd(
        images: Option<PathBuf>,
        agent: Vec<String>,
    ) -> Result<Self, containerd::Error> {
        let programs = Programs::find()?;
        let read_err = |dir: &Path| {
            let what = format!("reading the image archives in {}", dir.display());
            move |source| containerd::Error::Io { what, source }
        };
        let (archives, content) = match &images {
            Some(dir) => (
                crate::images::Archives::read(dir).map_err(read_err(dir))?,
                Some(Arc::new(
                    registry::Content::read(dir).map_err(read_err(dir))?,
                )),
            ),
            None => (crate::images::Archives::default(), None),
        };
        Ok(Self::Containerd(Arc::new(Containerd {
            programs,
            images,
            archives,
            agent,
            content,
            registry: tokio::sync::OnceCell::new(),
        })))
    }

    /// For report headers: `fake-cri`, `containerd`.
    pub fn describe(&self) -> &'static str {
        match self {
            Runtime::FakeCri => "fake-cri",
            Runtime::Containerd(_) => "containerd",
        }
    }

    /// Why `case` cannot run on this runtime, if it cannot.
    pub fn ignore_reason(&self, case: &LoadedCase) -> Option<String> {
        let Runtime::Containerd(containerd) = self else {
            return case
                .case
                .requires
                .contains(&Requirement::RealContainers)
                .then(|| {
                    "requires real-containers: fake-cri simulates the containers (`--runtime containerd` runs them)"
                        .to_owned()
                });
        };
        if case.case.requires.contains(&Requirement::RuntimeControl) {
            return Some(
                "requires runtime-control: containerd has no fault injection (fake-cri's control API)"
                    .to_owned(),
            );
        }
        if case.case.requires.contains(&Requirement::UpstreamBusybox)
            && containerd.archives.debian_busybox
        {
            return Some(
                "requires upstream-busybox: the archives' busybox is Debian's busybox-static 1.35 (no printenv; its sh drops environment names that are not identifiers)"
                    .to_owned(),
            );
        }
        let missing: Vec<String> = images_of(&case.path)
            .into_iter()
            .map(|image| normalize(&image))
            .filter(|image| {
                // Images that must not exist are the point of their cases.
                !image.starts_with("registry.invalid/")
                    && !containerd.archives.references.contains(image)
            })
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "needs {} {}, not among the image archives{} (`nodeconform images` builds busybox, pause and nonroot, nginx from Debian's nginx, agnhost from --agnhost)",
                if missing.len() == 1 { "image" } else { "images" },
                missing.join(", "),
                containerd
                    .images
                    .as_deref()
                    .map(|d| format!(" of {}", d.display()))
                    .unwrap_or_default(),
            )
        })
    }
}

/// Every `image:` of a case file (its pod, static pods, patches and extra objects).
fn images_of(path: &Path) -> BTreeSet<String> {
    fn walk(value: &serde_yaml::Value, out: &mut BTreeSet<String>) {
        match value {
            serde_yaml::Value::Mapping(map) => {
                for (key, value) in map {
                    if key.as_str() == Some("image")
                        && let Some(image) = value.as_str()
                    {
                        out.insert(image.to_owned());
                    }
                    walk(value, out);
                }
            }
            serde_yaml::Value::Sequence(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut images = BTreeSet::new();
    if let Ok(text) = std::fs::read_to_string(path) {
        for document in serde_yaml::Deserializer::from_str(&text) {
            if let Ok(value) = serde::Deserialize::deserialize(document) {
                walk(&value, &mut images);
            }
        }
    }
    images
}

/// A reference as containerd names it: `busybox:1.36` → `docker.io/library/busybox:1.36`,
/// a missing tag → `:latest`.
pub fn normalize(reference: &str) -> String {
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    let (first, rest) = name.split_once('/').unwrap_or(("", name));
    let is_registry = first.contains(['.', ':']) || first == "localhost";
    let name = match (first, is_registry) {
        ("", _) => format!("docker.io/library/{rest}"),
        (_, true) => name.to_owned(),
        _ => format!("docker.io/{name}"),
    };
    let last = name.rsplit('/').next().unwrap_or(&name);
    match digest {
        Some(digest) => format!("{name}@{digest}"),
        None if last.contains(':') => name,
        None => format!("{name}:latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn references_are_named_as_containerd_names_them() {
        for (given, wanted) in [
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("busybox", "docker.io/library/busybox:latest"),
            ("library/nginx", "docker.io/library/nginx:latest"),
            (
                "docker.io/library/busybox:1.36",
                "docker.io/library/busybox:1.36",
            ),
            ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
            ("localhost:5000/x", "localhost:5000/x:latest"),
            ("user/app:v1", "docker.io/user/app:v1"),
            ("busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"),
        ] {
            assert_eq!(normalize(given), wanted, "{given}");
        }
    }
}

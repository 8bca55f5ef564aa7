//! Real clients no one here wrote: `kubectl` (every `kubectl.1.NN` found beside it, too)
//! and the official Python client. A test whose client is missing is ignored with the reason.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use nodeconform_apiserver::ApiServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use nodeconform_testkit::{Suite, program, python_module};

/// The bound on every wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

const KUBECTL: &str = "install Debian's kubernetes-client";

fn main() -> ExitCode {
    let kubectl = || program("kubectl", KUBECTL);
    Suite::new()
        .async_test(
            "kubectl_get_create_apply_delete_watch",
            kubectl(),
            kubectl_get_create_apply_delete_watch,
        )
        .async_test(
            "every_kubectl_version_beside_it",
            kubectl().and_then(|bin| kubectl_versions(&bin)),
            every_kubectl_version_beside_it,
        )
        .async_test(
            "official_python_client",
            python_module("kubernetes", "kubernetes"),
            |()| official_python_client(),
        )
        .run()
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl starts");
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use tokio::io::AsyncWriteExt;
            pipe.write_all(input.as_bytes()).await.unwrap();
        }
        let out = tokio::time::timeout(WAIT, child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        (out.status.success(), stdout, stderr)
    }

    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin).await;
        assert!(ok, "{} {args:?} failed:\n{out}\n{err}", self.bin.display());
        out
    }
}

fn kubectl(api: &ApiServer, bin: &Path, dir: &Path) -> Kubectl {
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    Kubectl {
        bin: bin.to_path_buf(),
        kubeconfig,
        cache: dir.join("cache"),
    }
}

const MANIFEST: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: busybox:1.36
    command: [sleep, '3600']
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  a: '1'
";

async fn kubectl_get_create_apply_delete_watch(bin: PathBuf) {
    let api = ApiServer::builder()
        .tls(true)
        .token(Some("kubectl-token".into()))
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl(&api, &bin, dir.path());

    let raw: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/api"], None).await).unwrap();
    assert_eq!(raw["versions"][0], "v1");
    let out = k.ok(&["create", "-f", "-"], Some(MANIFEST)).await;
    assert!(
        out.contains("pod/web created") && out.contains("configmap/cfg created"),
        "{out}"
    );
    let out = k.ok(&["get", "pods"], None).await;
    assert!(
        out.contains("NAME") && out.contains("web") && out.contains("Pending"),
        "{out}"
    );
    let typo = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndta:\n  a: b\n";
    // kubectl >= 1.27 asks the server for strict validation and fails; older ones print the
    // server's default `Warn` warning and create the object.
    let (_, _, err) = k.run(&["create", "-f", "-"], Some(typo)).await;
    assert!(err.contains("unknown field \"dta\""), "{err}");
    let out = k.ok(&["get", "pods", "-o", "json"], None).await;
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "web");
    let out = k.ok(&["get", "ns"], None).await;
    assert!(
        out.contains("kube-node-lease") && out.contains("Active"),
        "{out}"
    );

    // The imperative generators send protobuf bodies.
    for (args, created) in [
        (&["create", "namespace", "gen"][..], "namespace/gen created"),
        (
            &["create", "configmap", "gen", "--from-literal=a=b"],
            "configmap/gen created",
        ),
        (
            &["create", "secret", "generic", "gen", "--from-literal=k=v"],
            "secret/gen created",
        ),
        (
            &["create", "serviceaccount", "gen"],
            "serviceaccount/gen created",
        ),
    ] {
        let out = k.ok(args, None).await;
        assert!(out.contains(created), "{out}");
    }
    let out = k
        .ok(
            &["get", "secret", "gen", "-o", "jsonpath={.data.k} {.type}"],
            None,
        )
        .await;
    assert_eq!(out.trim(), "dg== Opaque");

    let changed = MANIFEST.replace("a: '1'", "a: '2'");
    let out = k.ok(&["apply", "-f", "-"], Some(&changed)).await;
    assert!(out.contains("configmap/cfg configured"), "{out}");
    let cm = Api::<ConfigMap>::namespaced(api.client(), "default")
        .get("cfg")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["a"], "2");
    let fresh = changed.replace("name: cfg", "name: cfg2");
    let out = k.ok(&["apply", "-f", "-"], Some(&fresh)).await;
    assert!(out.contains("configmap/cfg2 created"), "{out}");
    let out = k.ok(&["apply", "-f", "-"], Some(&fresh)).await;
    assert!(out.contains("configmap/cfg2 unchanged"), "{out}");
    let dry = fresh.replace("a: '2'", "a: '3'");
    let out = k
        .ok(&["apply", "--dry-run=server", "-f", "-"], Some(&dry))
        .await;
    assert!(
        out.contains("configmap/cfg2 configured (server dry run)"),
        "{out}"
    );
    let cm2 = Api::<ConfigMap>::namespaced(api.client(), "default")
        .get("cfg2")
        .await
        .unwrap();
    assert_eq!(
        cm2.data.unwrap()["a"],
        "2",
        "a server dry run changes nothing"
    );

    // get -w: a new pod shows up as a row.
    let mut watch = Command::new(&k.bin);
    watch
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .arg("--cache-dir")
        .arg(&k.cache)
        .args(["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = watch.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.contains("NAME"), "{first}");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "watched"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap();
    Api::<Pod>::namespaced(api.client(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("watched") {
                return;
            }
        }
        panic!("kubectl get -w ended");
    })
    .await
    .expect("kubectl get -w shows the new pod");
    child.kill().await.unwrap();

    // An in-place resize goes through pods/resize (kubectl 1.32+); giving a BestEffort pod
    // requests would change its QoS class.
    let resize = r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"10m"}}}]}}"#;
    let (ok, _, err) = k
        .run(
            &["patch", "pod", "web", "--subresource=resize", "-p", resize],
            None,
        )
        .await;
    assert!(!ok, "the resize was accepted");
    assert!(
        err.contains("Pod QOS Class may not change as a result of resizing")
            || err.contains("--subresource"),
        "{err}"
    );

    let out = k.ok(&["delete", "pod", "web"], None).await;
    assert!(out.contains("pod \"web\" deleted"), "{out}");
    let out = k
        .ok(&["delete", "-f", "-", "--ignore-not-found"], Some(MANIFEST))
        .await;
    assert!(out.contains("configmap \"cfg\" deleted"), "{out}");
    let (ok, _, err) = k.run(&["get", "pod", "web"], None).await;
    assert!(
        !ok && err.contains("NotFound") && err.contains("pods \"web\" not found"),
        "{err}"
    );
    api.shutdown().await;
}

/// Every `kubectl.1.NN` beside `bin` (where it really is, links followed), oldest first.
fn kubectl_versions(bin: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = std::fs::canonicalize(bin)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let mut versions: Vec<PathBuf> = dir
        .and_then(|d| std::fs::read_dir(d).ok())
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("kubectl.1."))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    if versions.is_empty() {
        return Err(format!("no kubectl.1.NN beside {}", bin.display()));
    }
    Ok(versions)
}

async fn every_kubectl_version_beside_it(versions: Vec<PathBuf>) {
    let api = ApiServer::builder().start().await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (i, v) in versions.iter().enumerate() {
        let d = tmp.path().join(i.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let k = kubectl(&api, v, &d);
        let name = format!("cfg{i}");
        let manifest = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: '1'\n"
        );
        let out = k.ok(&["create", "-f", "-"], Some(&manifest)).await;
        assert!(out.contains("created"), "{}: {out}", v.display());
        let out = k
            .ok(&["apply", "-f", "-"], Some(&manifest.replace("'1'", "'2'")))
            .await;
        assert!(out.contains("configured"), "{}: {out}", v.display());
        let out = k.ok(&["get", "configmaps"], None).await;
        assert!(
            out.contains(&name) && out.contains("DATA"),
            "{}: {out}",
            v.display()
        );
        k.ok(&["delete", "configmap", &name], None).await;
    }
    api.shutdown().await;
}

const PYTHON: &str = r#"
import sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
names = [n.metadata.name for n in v1.list_namespace().items]
assert "kube-node-lease" in names, names
cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py"), data={"a": "1"})
created = v1.create_namespaced_config_map("default", cm)
assert created.metadata.uid
v1.patch_namespaced_config_map("py", "default", {"data": {"b": "2"}})
got = v1.read_namespaced_config_map("py", "default")
assert got.data == {"a": "1", "b": "2"}, got.data
try:
    v1.read_namespaced_config_map("missing", "default")
    raise SystemExit("expected 404")
except client.exceptions.ApiException as e:
    assert e.status == 404, e.status
w = watch.Watch()
seen = [e["object"].metadata.name for e in w.stream(v1.list_namespaced_config_map, "default", timeout_seconds=1)]
assert "py" in seen, seen
coord = client.CoordinationV1Api()
lease = client.V1Lease(metadata=client.V1ObjectMeta(name="n1"), spec=client.V1LeaseSpec(holder_identity="n1", lease_duration_seconds=40))
coord.create_namespaced_lease("kube-node-lease", lease)
assert coord.read_namespaced_lease("n1", "kube-node-lease").spec.holder_identity == "n1"
v1.delete_namespaced_config_map("py", "default")
print("python-ok")
"#;

async fn official_python_client() {
    let api = ApiServer::builder()
        .tls(true)
        .token(Some("py".into()))
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    api.write_kubeconfig(&path).unwrap();
    let out = tokio::time::timeout(
        WAIT * 2,
        Command::new("python3")
            .arg("-c")
            .arg(PYTHON)
            .arg(&path)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python finished in time")
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("python-ok"),
        "{stdout}\n{stderr}"
    );
    api.shutdown().await;
}

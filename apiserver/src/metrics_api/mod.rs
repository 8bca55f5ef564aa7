//! `metrics.k8s.io/v1beta1`, which metrics-server adds to a cluster through
//! kube-apiserver's aggregation layer and `kubectl top` reads. Opt-in
//! ([`ApiServerBuilder::metrics_api`](crate::ApiServerBuilder::metrics_api)):
//! a plain kube-apiserver serves no such group.
//!
//! As metrics-server, it reads each node's kubelet at `/metrics/resource`
//! (through the node's kubelet endpoint, as `pods/log` does) and answers
//! with CPU as the rate between two readings and memory as the working set.
//! metrics-server reads every 15 s and answers from its last two readings;
//! here a request reads the node again, against the reading kept from the
//! last request when it is under a minute old (and at least a second, so the
//! rate has a window), or against one taken a second before.

mod scrape;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::handlers::Context;
use crate::http::{self as h, Body};
use crate::resources::{self, Resource};
use crate::selectors::LabelSelector;
use crate::status::{Error, Result};
use hyper::Response;
use scrape::{History, Usage};

/// The group and version served.
pub const GROUP: &str = "metrics.k8s.io";
const VERSION: &str = "v1beta1";
const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

/// A reading older than this is not used for a rate.
const KEPT: Duration = Duration::from_secs(60);
/// The shortest window a rate is taken over.
const WINDOW: Duration = Duration::from_secs(1);

const fn metrics_resource(plural: &'static str, kind: &'static str, namespaced: bool) -> Resource {
    Resource {
        id: usize::MAX,
        group: GROUP,
        version: VERSION,
        plural,
        singular: "",
        kind,
        namespaced,
        short_names: &[],
        status_subresource: false,
        create_on_update: false,
        unconditional_update: false,
        fields: &[],
        merge: &[],
    }
}

static NODE_METRICS: Resource = metrics_resource("nodes", "NodeMetrics", false);
static POD_METRICS: Resource = metrics_resource("pods", "PodMetrics", true);

/// A request under `/apis/metrics.k8s.io`.
#[derive(Debug, PartialEq, Eq)]
pub enum Path {
    /// `/apis/metrics.k8s.io`.
    Group,
    /// `/apis/metrics.k8s.io/v1beta1`.
    Resources,
    /// `…/nodes`, `…/nodes/{name}`.
    Nodes(Option<String>),
    /// `…/pods`, `…/namespaces/{ns}/pods`, `…/namespaces/{ns}/pods/{name}`.
    Pods {
        /// The namespace (all when absent).
        namespace: Option<String>,
        /// One pod's.
        name: Option<String>,
    },
}

/// The request `path` makes of the metrics API, if it is under it.
pub fn parse(path: &str) -> Option<Path> {
    let rest = path.strip_prefix("/apis/")?.strip_prefix(GROUP)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let owned = |s: &&str| Some((*s).to_owned());
    Some(match segments.as_slice() {
        [] => Path::Group,
        [VERSION] => Path::Resources,
        [VERSION, "nodes"] => Path::Nodes(None),
        [VERSION, "nodes", name] => Path::Nodes(owned(name)),
        [VERSION, "pods"] => Path::Pods {
            namespace: None,
            name: None,
        },
        [VERSION, "namespaces", ns, "pods"] => Path::Pods {
            namespace: owned(ns),
            name: None,
        },
        [VERSION, "namespaces", ns, "pods", name] => Path::Pods {
            namespace: owned(ns),
            name: owned(name),
        },
        _ => return None,
    })
}

/// The readings kept between requests, by node.
#[derive(Debug, Default)]
pub struct MetricsServer {
    kept: Mutex<HashMap<String, (Instant, History)>>,
}

/// The `/apis` group list `groups`, with this group when it is `served`.
pub fn with_group(mut groups: Value, served: bool) -> Value {
    if served && let Some(list) = groups["groups"].as_array_mut() {
        list.push(api_group());
    }
    groups
}

/// `/apis/metrics.k8s.io`'s group, for discovery.
fn api_group() -> Value {
    let version = json!({"groupVersion": GROUP_VERSION, "version": VERSION});
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [version],
        "preferredVersion": version,
    })
}

fn resource_list() -> Value {
    let entry = |name: &str, kind: &str, namespaced: bool| json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]});
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [entry("nodes", "NodeMetrics", false), entry("pods", "PodMetrics", true)],
    })
}

impl MetricsServer {
    /// Answers a request for `path` (GET only; `labelSelector` honoured).
    pub async fn serve<B>(
        &self,
        ctx: &Context,
        path: Path,
        req: &hyper::Request<B>,
    ) -> Result<Response<Body>> {
        if req.method() != hyper::Method::GET {
            return Err(Error::MethodNotAllowed);
        }
        let query = crate::request::Query::parse(req.uri().query());
        let selector = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?;
        Ok(match path {
            Path::Group => h::json(200, &api_group()),
            Path::Resources => h::json(200, &resource_list()),
            Path::Nodes(name) => {
                let nodes = self.objects(ctx, &resources::NODES, None, name.as_deref())?;
                let mut items = Vec::new();
                for node in nodes.iter().filter(|n| selector.matches(n)) {
                    let usage = self.history(ctx, node).await.and_then(|h| h.node());
                    if let Some(usage) = usage {
                        items.push(node_metrics(node, usage));
                    }
                }
                respond(&NODE_METRICS, name, items)?
            }
            Path::Pods { namespace, name } => {
                let pods =
                    self.objects(ctx, &resources::PODS, namespace.as_deref(), name.as_deref())?;
                let pods: Vec<&Value> = pods.iter().filter(|p| selector.matches(p)).collect();
                let mut by_node: HashMap<&str, History> = HashMap::new();
                let mut items = Vec::new();
                for pod in pods {
                    let Some(node) = pod["spec"]["nodeName"].as_str() else {
                        continue;
                    };
                    if !by_node.contains_key(node) {
                        let Ok(object) = ctx.registry.get(&resources::NODES, "", node) else {
                            continue;
                        };
                        if let Some(history) = self.history(ctx, &object.value).await {
                            by_node.insert(node, history);
                        }
                    }
                    if let Some(item) = by_node.get(node).and_then(|r| pod_metrics(pod, r)) {
                        items.push(item);
                    }
                }
                respond(&POD_METRICS, name, items)?
            }
        })
    }

    /// The objects a request is about (one when `name` is given).
    fn objects(
        &self,
        ctx: &Context,
        resource: &'static Resource,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<Value>> {
        Ok(match name {
            Some(name) => {
                let namespace = namespace.unwrap_or("");
                let Ok(object) = ctx.registry.get(resource, namespace, name) else {
                    // As metrics-server words it: the namespaced name.
                    let metrics = if resource.namespaced {
                        &POD_METRICS
                    } else {
                        &NODE_METRICS
                    };
                    let name = match namespace {
                        "" => name.to_owned(),
                        ns => format!("{ns}/{name}"),
                    };
                    return Err(Error::NotFound {
                        resource: metrics,
                        name,
                    });
                };
                vec![object.value.clone()]
            }
            None => ctx.registry.store.txn(|t| {
                t.list(resource, namespace)
                    .iter()
                    .map(|o| o.value.clone())
                    .collect()
            }),
        })
    }

    /// `node`'s history with a new reading at least [`WINDOW`] after the one
    /// before (two readings when there is none from the last [`KEPT`]);
    /// `None` when its kubelet cannot be read (metrics-server leaves such a
    /// node out too).
    async fn history(&self, ctx: &Context, node: &Value) -> Option<History> {
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let kept = self.kept.lock().get(&name).cloned();
        let mut history = match kept {
            Some((at, history)) if at.elapsed() < KEPT => {
                tokio::time::sleep(WINDOW.saturating_sub(at.elapsed())).await;
                history
            }
            _ => {
                let mut history = History::default();
                history.record(read(ctx, node).await?);
                tokio::time::sleep(WINDOW).await;
                history
            }
        };
        history.record(read(ctx, node).await?);
        self.kept
            .lock()
            .insert(name, (Instant::now(), history.clone()));
        Some(history)
    }
}

/// One reading of `node`'s kubelet.
async fn read(ctx: &Context, node: &Value) -> Option<scrape::Reading> {
    let at = ctx.kubelet.locate(node).ok()?;
    let response = match ctx.kubelet.get(&at, "/metrics/resource").await {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => {
            tracing::debug!(status = %response.status(), "kubelet refused /metrics/resource");
            return None;
        }
        Err(error) => {
            tracing::debug!(%error, "kubelet unreachable for /metrics/resource");
            return None;
        }
    };
    let body: Bytes = response.into_body().collect().await.ok()?.to_bytes();
    Some(scrape::parse(&String::from_utf8_lossy(&body)))
}

/// The object's metadata as metrics-server gives it: name, namespace,
/// labels, and the time of the answer as its creation.
fn metadata(object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut out = Map::new();
    out.insert("name".into(), meta["name"].clone());
    if let Some(ns) = meta.get("namespace") {
        out.insert("namespace".into(), ns.clone());
    }
    out.insert("creationTimestamp".into(), now().into());
    if let Some(labels) = meta.get("labels") {
        out.insert("labels".into(), labels.clone());
    }
    Value::Object(out)
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn timestamp(millis: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(millis)
        .and_then(|t| t.round(k8s_openapi::jiff::Unit::Second))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// metrics-server's quantities: CPU in nanocores, memory in bytes (`Ki`
/// when it divides evenly, as a binary quantity prints).
fn quantities(usage: Usage) -> Value {
    let memory = if usage.bytes.is_multiple_of(1024) {
        format!("{}Ki", usage.bytes / 1024)
    } else {
        usage.bytes.to_string()
    };
    json!({"cpu": format!("{}n", usage.nano_cores), "memory": memory})
}

fn window(usage: Usage) -> String {
    format!("{}s", usage.window_millis as f64 / 1000.0)
}

fn node_metrics(node: &Value, usage: Usage) -> Value {
    json!({
        "metadata": metadata(node),
        "timestamp": timestamp(usage.millis),
        "window": window(usage),
        "usage": quantities(usage),
    })
}

/// A pod's metrics: every container of its spec must have a rate, or the
/// pod is left out (as metrics-server leaves out a pod it has not seen twice).
fn pod_metrics(pod: &Value, history: &History) -> Option<Value> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let mut containers = Vec::new();
    let mut last = None;
    for container in pod["spec"]["containers"].as_array()? {
        let cname = container["name"].as_str().unwrap_or_default();
        let key = (namespace.to_owned(), name.to_owned(), cname.to_owned());
        let usage = history.container(&key)?;
        containers.push(json!({"name": cname, "usage": quantities(usage)}));
        last = Some(usage);
    }
    let usage = last?;
    Some(json!({
        "metadata": metadata(pod),
        "timestamp": timestamp(usage.millis),
        "window": window(usage),
        "containers": containers,
    }))
}

/// One object (404 without metrics) or a list.
fn respond(
    resource: &'static Resource,
    name: Option<String>,
    mut items: Vec<Value>,
) -> Result<Response<Body>> {
    let kind = resource.kind;
    if let Some(name) = name {
        let Some(mut item) = items.pop() else {
            return Err(Error::NotFound { resource, name });
        };
        item["kind"] = kind.into();
        item["apiVersion"] = GROUP_VERSION.into();
        return Ok(h::json(200, &item));
    }
    Ok(h::json(
        200,
        &json!({"kind": format!("{kind}List"), "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(parse("/apis/metrics.k8s.io"), Some(Path::Group));
        assert_eq!(parse("/apis/metrics.k8s.io/v1beta1"), Some(Path::Resources));
        assert_eq!(
            parse("/apis/metrics.k8s.io/v1beta1/nodes/n1"),
            Some(Path::Nodes(Some("n1".into())))
        );
        assert_eq!(
            parse("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods"),
            Some(Path::Pods {
                namespace: Some("ns".into()),
                name: None
            })
        );
        assert_eq!(parse("/apis/metrics.k8s.io.example/v1"), None);
        assert_eq!(parse("/apis/metrics.k8s.io/v1/nodes"), None);
    }

    #[test]
    fn quantities_as_metrics_server_prints_them() {
        let usage = Usage {
            nano_cores: 10_000_000,
            bytes: 5 << 20,
            millis: 1_700_000_000_000,
            window_millis: 1500,
        };
        assert_eq!(
            quantities(usage),
            json!({"cpu": "10000000n", "memory": "5120Ki"})
        );
        assert_eq!(window(usage), "1.5s");
    }
}

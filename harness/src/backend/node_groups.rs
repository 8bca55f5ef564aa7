//! `--all-nodes`: the nodes of an existing cluster, grouped by the agent they run.
//!
//! A cluster may run several agents side by side (kubelets of several releases, a
//! virtual-kubelet provider, an edge agent). Nodes that report the same
//! `kubeletVersion` and `containerRuntimeVersion` run the same agent: they form a
//! group, the suite runs once per group with its cases spread over the group's
//! nodes, and each group gets its own report (a column of the matrix). A node
//! that is not Ready is left out, and so is a cordoned one (`spec.unschedulable`:
//! its operator asked for no new pods; `--node` still runs on it), each with the
//! reason. Taints leave no node out: the harness's pods tolerate every taint of an
//! existing node, as with `--node`.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use super::Result;

/// Nodes that run the same agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// Their `status.nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// Their `status.nodeInfo.containerRuntimeVersion`.
    pub runtime_version: String,
    /// Their names, sorted.
    pub nodes: Vec<String>,
}

impl NodeGroup {
    /// A name for the group that is also a directory name: the agent's version and
    /// its runtime's (`v1.36.2_containerd-1.7.24`), every other character `-`.
    pub fn label(&self) -> String {
        let clean = |s: &str| -> String {
            let s: String = s
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let s = s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>();
            if s.is_empty() {
                "unknown".into()
            } else {
                s.join("-")
            }
        };
        format!(
            "{}_{}",
            clean(&self.kubelet_version),
            clean(&self.runtime_version)
        )
    }
}

/// The cluster's nodes: the groups to run on and the nodes left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Groups, by kubelet version then runtime version.
    pub groups: Vec<NodeGroup>,
    /// Nodes left out, with why.
    pub left_out: Vec<(String, String)>,
}

/// Lists the nodes that match `selector` (a label selector; every node when `None`) and
/// groups them.
pub async fn discover(client: &kube::Client, selector: Option<&str>) -> Result<Discovered> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    Ok(group(&nodes.list(&params).await?.items))
}

/// Groups `nodes` by agent, leaving out those that cannot take a case's pod.
pub fn group(nodes: &[Node]) -> Discovered {
    let mut found = Discovered::default();
    let mut groups: std::collections::BTreeMap<(String, String), Vec<String>> = Default::default();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        if let Some(why) = left_out(node) {
            found.left_out.push((name, why));
            continue;
        }
        let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
        let key = (
            info.map(|i| i.kubelet_version.clone()).unwrap_or_default(),
            info.map(|i| i.container_runtime_version.clone())
                .unwrap_or_default(),
        );
        groups.entry(key).or_default().push(name);
    }
    found.groups = groups
        .into_iter()
        .map(|((kubelet_version, runtime_version), mut nodes)| {
            nodes.sort();
            NodeGroup {
                kubelet_version,
                runtime_version,
                nodes,
            }
        })
        .collect();
    found.left_out.sort();
    found
}

/// Why `node` is left out, if it is.
fn left_out(node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    if ready != Some("True") {
        return Some(format!(
            "not Ready ({})",
            ready.unwrap_or("no Ready condition")
        ));
    }
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable);
    cordoned
        .unwrap_or(false)
        .then(|| "cordoned (spec.unschedulable)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, kubelet: &str, ready: &str, extra: serde_json::Value) -> Node {
        let mut n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": extra,
            "status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "nodeInfo": {
                    "kubeletVersion": kubelet,
                    "containerRuntimeVersion": "fake-cri://0.1.0",
                    "architecture": "", "bootID": "", "kernelVersion": "", "kubeProxyVersion": "",
                    "machineID": "", "operatingSystem": "", "osImage": "", "systemUUID": ""
                }
            }
        }))
        .expect("a node");
        n.metadata.name = Some(name.into());
        n
    }

    #[test]
    fn groups_by_agent_and_leaves_out_nodes_not_ready_or_cordoned() {
        let none = serde_json::json!({});
        let found = group(&[
            node("b", "v1.36.2", "True", none.clone()),
            node("a", "v1.36.2", "True", none.clone()),
            node("c", "v1.28.7", "True", none.clone()),
            node("d", "v1.28.7", "False", none.clone()),
            node(
                "e",
                "v1.28.7",
                "True",
                serde_json::json!({"unschedulable": true}),
            ),
            node(
                "f",
                "v1.28.7",
                "True",
                serde_json::json!({"taints": [{"key": "gone", "effect": "NoExecute"}]}),
            ),
            node(
                "g",
                "v1.28.7",
                "True",
                serde_json::json!({"taints": [{"key": "cp", "effect": "NoSchedule"}]}),
            ),
        ]);
        let groups: Vec<(String, Vec<String>)> = found
            .groups
            .iter()
            .map(|g| (g.label(), g.nodes.clone()))
            .collect();
        assert_eq!(
            groups,
            [
                (
                    "v1.28.7_fake-cri-0.1.0".to_string(),
                    vec!["c".to_string(), "f".into(), "g".into()]
                ),
                (
                    "v1.36.2_fake-cri-0.1.0".to_string(),
                    vec!["a".to_string(), "b".into()]
                ),
            ]
        );
        assert_eq!(
            found.left_out,
            [
                ("d".to_string(), "not Ready (False)".to_string()),
                ("e".into(), "cordoned (spec.unschedulable)".into()),
            ]
        );
    }
}

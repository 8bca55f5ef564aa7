//! Random operation sequences: seeded scenarios over a few pods, ConfigMaps and one Node,
//! with watches open throughout, run against a reference server and a server under test;
//! a sequence whose normalized answers differ is shrunk to a minimal scenario that still
//! diverges, ready to become a recorded fixture.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use crate::diff::{self, Divergence};
use crate::run::{self, Target};
use crate::scenario::{BodyFrom, Content, Method, Scenario, Step};
use crate::{fresh_namespace, normalize};

const PODS: [&str; 3] = ["p0", "p1", "p2"];
const CONFIGMAPS: [&str; 2] = ["c0", "c1"];
const FINALIZER: &str = "example.com/hold";

/// What one sequence showed.
#[derive(Debug)]
pub struct Outcome {
    /// The sequence as generated.
    pub scenario: Scenario,
    /// Requests it sent to each server.
    pub requests: usize,
    /// Its divergences (empty: the servers agreed).
    pub divergences: Vec<Divergence>,
}

/// The random sequence for `seed`: `operations` operations between the watches' opening
/// and their reading.
pub fn generate(seed: u64, operations: usize) -> Scenario {
    let mut g = Generator {
        rng: StdRng::seed_from_u64(seed),
        steps: Vec::new(),
        captures: Vec::new(),
    };
    g.watches_open();
    for _ in 0..operations {
        g.operation();
    }
    g.watches_read();
    Scenario {
        name: format!("fuzz-{seed}"),
        description: format!("random sequence {seed} of {operations} operations"),
        clients: vec![],
        steps: g.steps,
    }
}

struct Generator {
    rng: StdRng,
    steps: Vec<Step>,
    /// Captured objects: (variable, pod or configmap name).
    captures: Vec<(String, String)>,
}

const WATCHES: [(&str, &str, &str); 4] = [
    ("all", "/api/v1/namespaces/{ns}/pods", ""),
    (
        "node",
        "/api/v1/pods",
        "fieldSelector=spec.nodeName={ns}-n0",
    ),
    (
        "label",
        "/api/v1/namespaces/{ns}/pods",
        "labelSelector=app=a",
    ),
    (
        "cms",
        "/api/v1/namespaces/{ns}/configmaps",
        "labelSelector=fuzz",
    ),
];

fn query(pairs: &[(&str, String)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

impl Generator {
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn request(
        &mut self,
        method: Method,
        path: String,
        query: Vec<(&str, String)>,
        content: Option<Content>,
        body: Option<Value>,
    ) {
        self.steps.push(Step::Request {
            method,
            path,
            query: self::query(&query),
            content,
            body,
            body_from: None,
            raw: None,
            accept: None,
            capture: Default::default(),
        });
    }

    fn watches_open(&mut self) {
        for (id, path, selector) in WATCHES {
            let mut q = vec![
                ("resourceVersion", "0".to_string()),
                ("allowWatchBookmarks", "true".to_string()),
            ];
            if let Some((k, v)) = selector.split_once('=') {
                q.push((k, v.to_string()));
            }
            self.steps.push(Step::Watch {
                id: id.into(),
                path: path.into(),
                query: query(&q),
            });
        }
    }

    fn watches_read(&mut self) {
        for (id, ..) in WATCHES {
            self.steps.push(Step::Events {
                watch: id.into(),
                until_end: false,
            });
            self.steps.push(Step::Close { watch: id.into() });
        }
    }

    fn operation(&mut self) {
        match self.rng.random_range(0..100) {
            0..18 => self.create_pod(),
            18..28 => self.update(true),
            28..46 => self.patch_pod(),
            46..60 => self.delete_pod(),
            60..68 => self.list_pods(),
            68..74 => {
                self.get(true);
            }
            74..82 => self.configmap(),
            82..88 => self.update(false),
            _ => self.node(),
        }
    }

    fn pod_path(&mut self) -> (String, String) {
        let name = (*self.pick(&PODS)).to_string();
        (format!("/api/v1/namespaces/{{ns}}/pods/{name}"), name)
    }

    fn create_pod(&mut self) {
        let name = *self.pick(&PODS);
        let mut meta = json!({"name": name});
        if self.chance(0.6) {
            meta["labels"] = json!({"app": self.pick(&["a", "b"])});
        }
        if self.chance(0.3) {
            meta["finalizers"] = json!([FINALIZER]);
        }
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if self.chance(0.6) {
            spec["nodeName"] = json!("{ns}-n0");
        }
        if self.chance(0.3) {
            spec["terminationGracePeriodSeconds"] = json!(self.pick(&[0, 5, 60]));
        }
        if self.chance(0.5) {
            spec["automountServiceAccountToken"] = json!(false);
        }
        let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec});
        self.request(
            Method::Post,
            "/api/v1/namespaces/{ns}/pods".into(),
            vec![],
            None,
            Some(body),
        );
    }

    /// A GET whose answer is captured for later updates.
    fn get(&mut self, pod: bool) -> String {
        let (path, name) = if pod {
            self.pod_path()
        } else {
            let name = (*self.pick(&CONFIGMAPS)).to_string();
            (format!("/api/v1/namespaces/{{ns}}/configmaps/{name}"), name)
        };
        let var = format!("o{}", self.captures.len());
        self.steps.push(Step::Request {
            method: Method::Get,
            path,
            query: Default::default(),
            content: None,
            body: None,
            body_from: None,
            raw: None,
            accept: None,
            capture: [(var.clone(), String::new())].into(),
        });
        self.captures.push((var.clone(), name));
        var
    }

    /// Read, change, write back (PUT), with the version kept, stale, `"0"` or removed.
    fn update(&mut self, pod: bool) {
        let var = self.get(pod);
        let name = self
            .captures
            .last()
            .map(|c| c.1.clone())
            .unwrap_or_default();
        let older: Vec<String> = self
            .captures
            .iter()
            .filter(|(v, n)| *n == name && *v != var)
            .map(|(v, _)| v.clone())
            .collect();
        let from = if !older.is_empty() && self.chance(0.25) {
            self.pick(&older).clone()
        } else {
            var
        };
        let status = pod && self.chance(0.4);
        let mut merge = if !pod {
            json!({"data": {"k": self.pick(&["1", "2"])}})
        } else if status {
            json!({"status": {"phase": self.pick(&["Running", "Succeeded", "Failed"]),
                "conditions": [{"type": "Ready", "status": self.pick(&["True", "False"])}]}})
        } else {
            match self.rng.random_range(0..4) {
                0 => json!({"metadata": {"labels": {"app": self.pick(&["a", "b"])}}}),
                1 => json!({"metadata": {"finalizers": null}}),
                2 => json!({"spec": {"activeDeadlineSeconds": self.pick(&[30, 60])}}),
                _ => {
                    json!({"spec": {"containers": [{"name": "c", "image": self.pick(&["busybox:1.36", "nginx"])}]}})
                }
            }
        };
        match self.rng.random_range(0..5) {
            0 => merge["metadata"]["resourceVersion"] = json!("0"),
            1 => merge["metadata"]["resourceVersion"] = Value::Null,
            _ => {}
        }
        let (kind, name) = if pod {
            ("pods", name)
        } else {
            ("configmaps", name)
        };
        let suffix = if status { "/status" } else { "" };
        self.steps.push(Step::Request {
            method: Method::Put,
            path: format!("/api/v1/namespaces/{{ns}}/{kind}/{name}{suffix}"),
            query: Default::default(),
            content: None,
            body: None,
            body_from: Some(BodyFrom {
                var: from,
                merge: Some(merge),
            }),
            raw: None,
            accept: None,
            capture: Default::default(),
        });
    }

    fn patch_pod(&mut self) {
        let (path, name) = self.pod_path();
        let status = self.chance(0.35);
        let path = if status {
            format!("{path}/status")
        } else {
            path
        };
        let content = *self.pick(&[
            Content::Merge,
            Content::Strategic,
            Content::JsonPatch,
            Content::Apply,
        ]);
        let body = match (content, status) {
            (Content::JsonPatch, false) => match self.rng.random_range(0..3) {
                0 => json!([{"op": "add", "path": "/metadata/labels", "value": {"app": "a"}}]),
                1 => json!([{"op": "remove", "path": "/metadata/finalizers"}]),
                _ => {
                    json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx"}])
                }
            },
            (Content::JsonPatch, true) => {
                json!([{"op": "add", "path": "/status/phase", "value": self.pick(&["Running", "Failed"])}])
            }
            (Content::Apply, _) => {
                let mut b = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": self.pick(&["a", "b"])}}});
                if status {
                    b = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
                }
                b
            }
            (_, true) => json!({"status": {
                "phase": self.pick(&["Running", "Succeeded", "Failed"]),
                "conditions": [{"type": *self.pick(&["Ready", "example.com/gate"]), "status": *self.pick(&["True", "False"])}]
            }}),
            (_, false) => match self.rng.random_range(0..4) {
                0 => json!({"metadata": {"labels": {"app": self.pick(&["a", "b"])}}}),
                1 => json!({"metadata": {"labels": null, "annotations": {"x": "y"}}}),
                2 => json!({"metadata": {"finalizers": null}}),
                _ => json!({"metadata": {"finalizers": [FINALIZER]}}),
            },
        };
        let query = if content == Content::Apply {
            vec![
                ("fieldManager", "fuzz".to_string()),
                ("force", "true".to_string()),
            ]
        } else {
            vec![]
        };
        self.request(Method::Patch, path, query, Some(content), Some(body));
    }

    fn delete_pod(&mut self) {
        let (path, _) = self.pod_path();
        let mut q = vec![];
        if self.chance(0.5) {
            q.push((
                "gracePeriodSeconds",
                self.pick(&["0", "5", "30"]).to_string(),
            ));
        }
        if self.chance(0.1) {
            q.push(("dryRun", "All".to_string()));
        }
        let body = match self.rng.random_range(0..6) {
            0 => Some(json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
            1 => Some(json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "propagationPolicy": self.pick(&["Background", "Foreground", "Orphan"])})),
            _ => None,
        };
        self.request(
            Method::Delete,
            path,
            q,
            body.as_ref().map(|_| Content::Json),
            body,
        );
    }

    fn list_pods(&mut self) {
        let (path, q) = match self.rng.random_range(0..4) {
            0 => ("/api/v1/namespaces/{ns}/pods", vec![]),
            1 => (
                "/api/v1/namespaces/{ns}/pods",
                vec![("labelSelector", "app in (a,b)".to_string())],
            ),
            2 => (
                "/api/v1/pods",
                vec![("fieldSelector", "spec.nodeName={ns}-n0".to_string())],
            ),
            _ => (
                "/api/v1/namespaces/{ns}/pods",
                vec![
                    ("fieldSelector", "status.phase!=Running".to_string()),
                    ("limit", "1".to_string()),
                ],
            ),
        };
        self.request(Method::Get, path.into(), q, None, None);
    }

    fn configmap(&mut self) {
        let name = *self.pick(&CONFIGMAPS);
        let path = format!("/api/v1/namespaces/{{ns}}/configmaps/{name}");
        match self.rng.random_range(0..4) {
            0 | 1 => {
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": {"fuzz": "yes"}}, "data": {"k": "0"}});
                self.request(
                    Method::Post,
                    "/api/v1/namespaces/{ns}/configmaps".into(),
                    vec![],
                    None,
                    Some(body),
                );
            }
            2 => {
                let content = *self.pick(&[Content::Merge, Content::Strategic]);
                self.request(
                    Method::Patch,
                    path,
                    vec![],
                    Some(content),
                    Some(json!({"data": {"k": null, "j": "1"}})),
                );
            }
            _ => self.request(Method::Delete, path, vec![], None, None),
        }
    }

    fn node(&mut self) {
        if self.chance(0.5) {
            let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "{ns}-n0", "labels": {"fuzz": "{ns}"}}});
            self.request(
                Method::Post,
                "/api/v1/nodes".into(),
                vec![],
                None,
                Some(body),
            );
        } else {
            let body = json!({"status": {"conditions": [{"type": "Ready", "status": *self.pick(&["True", "False"]), "reason": "KubeletReady"}]}});
            self.request(
                Method::Patch,
                "/api/v1/nodes/{ns}-n0/status".into(),
                vec![],
                Some(Content::Strategic),
                Some(body),
            );
        }
    }
}

/// Runs `scenario` on both servers; `None` when it could not run on one of them (a
/// shrunk scenario that lost a step it needs).
pub async fn compare(
    scenario: &Scenario,
    reference: &Target,
    other: &Target,
) -> Option<(usize, Vec<Divergence>)> {
    scenario.check().ok()?;
    let ns = fresh_namespace();
    let a = run::run(scenario, reference, &ns, None).await.ok()?;
    let expected = normalize::normalize(&a);
    let b = run::run(scenario, other, &fresh_namespace(), Some(&expected))
        .await
        .ok()?;
    let actual = normalize::normalize(&b);
    Some((
        scenario.requests(),
        diff::diff(scenario, &expected, &actual),
    ))
}

/// Runs one generated sequence.
pub async fn sequence(
    seed: u64,
    operations: usize,
    reference: &Target,
    other: &Target,
) -> Option<Outcome> {
    let scenario = generate(seed, operations);
    let (requests, divergences) = compare(&scenario, reference, other).await?;
    Some(Outcome {
        scenario,
        requests,
        divergences,
    })
}

/// The smallest scenario found (by removing chunks of steps, then single steps) that
/// still diverges; the watches' steps are kept unless a smaller one still diverges.
pub async fn shrink(
    scenario: &Scenario,
    reference: &Target,
    other: &Target,
) -> (Scenario, Vec<Divergence>) {
    let mut best = scenario.clone();
    let mut best_divergences = compare(&best, reference, other)
        .await
        .map(|r| r.1)
        .unwrap_or_default();
    let mut chunk = best.steps.len() / 2;
    while chunk >= 1 {
        let mut start = 0;
        let mut progressed = false;
        while start < best.steps.len() {
            let mut candidate = best.clone();
            let end = (start + chunk).min(candidate.steps.len());
            candidate.steps.drain(start..end);
            match compare(&candidate, reference, other).await {
                Some((_, d)) if !d.is_empty() => {
                    best = candidate;
                    best_divergences = d;
                    progressed = true;
                }
                _ => start += chunk,
            }
        }
        if !progressed {
            chunk /= 2;
        }
    }
    (best, best_divergences)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_reproducible_and_valid() {
        let a = generate(7, 40);
        assert_eq!(a, generate(7, 40));
        assert_ne!(a, generate(8, 40));
        a.check().unwrap();
        assert!(a.requests() >= 44);
    }
}

//! The `expectEvents` and `expectLogs` steps: poll the API until what the
//! agent reported matches, or the bound runs out.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, LogParams};
use tokio::time::Instant;

use crate::case::{EventExpectation, EventPattern, EventSubject, LogExpectation};

/// How often the API (or a node's runtime) is asked again.
pub(super) const POLL: Duration = Duration::from_millis(250);
/// The bound of a step that gives none.
pub(super) const DEFAULT_WITHIN: Duration = Duration::from_secs(30);

/// Who the events of an `expectEvents` step are about.
pub struct Subject<'a> {
    /// The case's namespace.
    pub namespace: &'a str,
    /// The case's pod.
    pub pod: &'a str,
    /// The node under test.
    pub node: &'a str,
}

/// Waits until every pattern of `exp.events` matches an event about the subject, then
/// holds for `exp.hold`; fails at once when an event matches a `never` pattern.
pub async fn expect_events(
    client: &kube::Client,
    subject: &Subject<'_>,
    exp: &EventExpectation,
    case_deadline: Instant,
) -> Result<(), String> {
    let within = exp.within.map_or(DEFAULT_WITHIN, |d| d.get());
    let until = (Instant::now() + within).min(case_deadline);
    let (namespace, kind, name) = match exp.about {
        EventSubject::Pod => (subject.namespace, "Pod", subject.pod),
        // The kubelet records node events in `default`, as kube-apiserver's clients expect.
        EventSubject::Node => ("default", "Node", subject.node),
    };
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut hold_until: Option<Instant> = None;
    loop {
        let events: Vec<Event> = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing events in {namespace}: {e}"))?
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .collect();
        if let Some((pattern, event)) = exp
            .never
            .iter()
            .find_map(|p| events.iter().find(|e| matches(p, e)).map(|e| (p, e)))
        {
            return Err(format!(
                "an event matched `never` {}: {}",
                describe(pattern),
                summarize(event)
            ));
        }
        let missing: Vec<&EventPattern> = exp
            .events
            .iter()
            .filter(|p| !events.iter().any(|e| matches(p, e)))
            .collect();
        let now = Instant::now();
        if missing.is_empty() {
            let hold = *hold_until.get_or_insert_with(|| {
                (now + exp.hold.map_or(Duration::ZERO, |d| d.get())).min(case_deadline)
            });
            if now >= hold {
                return Ok(());
            }
        } else if now >= until {
            let seen: Vec<String> = events.iter().map(summarize).collect();
            return Err(format!(
                "not seen within {:.1}s: {}\n  events about {} {name}:\n    {}",
                within.as_secs_f64(),
                missing
                    .iter()
                    .map(|p| describe(p))
                    .collect::<Vec<_>>()
                    .join(", "),
                kind.to_lowercase(),
                if seen.is_empty() {
                    "(none)".to_string()
                } else {
                    seen.join("\n    ")
                }
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn count(event: &Event) -> i32 {
    event
        .series
        .as_ref()
        .and_then(|s| s.count)
        .or(event.count)
        .unwrap_or(1)
}

fn matches(pattern: &EventPattern, event: &Event) -> bool {
    pattern
        .mismatch(
            event.reason.as_deref().unwrap_or_default(),
            event.type_.as_deref().unwrap_or_default(),
            event.message.as_deref().unwrap_or_default(),
            count(event),
        )
        .is_none()
}

fn describe(pattern: &EventPattern) -> String {
    serde_json::to_string(pattern).unwrap_or_else(|_| pattern.reason.clone())
}

fn summarize(event: &Event) -> String {
    format!(
        "{} {} (count {}): {}",
        event.type_.as_deref().unwrap_or("-"),
        event.reason.as_deref().unwrap_or("-"),
        count(event),
        event.message.as_deref().unwrap_or_default()
    )
}

/// Reads the container's log through `pods/log` until it matches `exp`.
pub async fn expect_logs(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    exp: &LogExpectation,
    case_deadline: Instant,
) -> Result<(), String> {
    let within = exp.within.map_or(DEFAULT_WITHIN, |d| d.get());
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = LogParams {
        container: exp.container.clone(),
        previous: exp.previous,
        ..LogParams::default()
    };
    retry(within, case_deadline, || async {
        let log = match &exp.websocket {
            Some(protocol) => {
                let mut path = format!("/api/v1/namespaces/{namespace}/pods/{pod}/log");
                let mut query = form_urlencoded::Serializer::new(String::new());
                if let Some(container) = &exp.container {
                    query.append_pair("container", container);
                }
                if exp.previous {
                    query.append_pair("previous", "true");
                }
                let query = query.finish();
                if !query.is_empty() {
                    path = format!("{path}?{query}");
                }
                super::streams::websocket_log(client, &path, protocol).await
            }
            None => api.logs(pod, &params).await.map_err(|e| e.to_string()),
        }
        .map_err(|e| format!("reading the log: {e}"))?;
        exp.mismatch(&log).map_or(Ok(()), Err)
    })
    .await
}

/// Retries `attempt` every [`POLL`] until it passes or `within` (bounded
/// by the case's deadline) is over; the last problem is the error.
pub(super) async fn retry<F, Fut>(
    within: Duration,
    case_deadline: Instant,
    mut attempt: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let until = (Instant::now() + within).min(case_deadline);
    loop {
        let problem = match attempt().await {
            Ok(()) => return Ok(()),
            Err(problem) => problem,
        };
        if Instant::now() >= until {
            return Err(format!(
                "not within {:.1}s: {problem}",
                within.as_secs_f64()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

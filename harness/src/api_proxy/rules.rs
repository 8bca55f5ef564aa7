//! What a request to the API server is (its verb and resource, read from the path as
//! kube-apiserver's request-info resolver reads it), the fault rules that match requests,
//! and the answers kube-apiserver gives when it is overloaded, failing or has compacted
//! the history a watch asks for.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};

/// The verb of a request, as kube-apiserver's authorizer names it (and a case spells it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// `GET` of one object.
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` with `watch=true` (or the legacy `/watch/` prefix).
    Watch,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// `PATCH`.
    Patch,
    /// `DELETE` of one object.
    Delete,
    /// `DELETE` of a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb's name as in RBAC rules (`get`, `list`, `watch`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// Its verb; `None` for what is not a resource request (`/version`, discovery, …).
    pub verb: Option<Verb>,
    /// Its resource with the subresource, as RBAC spells it: `pods`, `pods/status`,
    /// `leases`; empty for what is not a resource request.
    pub resource: String,
}

impl Class {
    /// Reads `method` and the path and query of `uri` as kube-apiserver's
    /// `RequestInfoFactory` does: `/api/v1/...` and `/apis/{group}/{version}/...`, an
    /// optional `namespaces/{ns}` (itself the `namespaces` resource when nothing else
    /// follows but `status` or `finalize`), then `{resource}[/{name}[/{subresource}]]`.
    pub fn of(method: &Method, uri: &http::Uri) -> Class {
        let mut parts: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest = match parts.first() {
            Some(&"api") if parts.len() >= 2 => parts.split_off(2),
            Some(&"apis") if parts.len() >= 3 => parts.split_off(3),
            _ => return Class::other(),
        };
        let mut rest = rest.as_slice();
        let legacy_watch = rest.first() == Some(&"watch");
        if legacy_watch {
            rest = &rest[1..];
        }
        if let ["namespaces", _, next, ..] = rest
            && !matches!(*next, "status" | "finalize")
        {
            rest = &rest[2..];
        }
        Class::resource_request(method, uri, rest, legacy_watch)
    }

    fn resource_request(
        method: &Method,
        uri: &http::Uri,
        rest: &[&str],
        legacy_watch: bool,
    ) -> Class {
        let (resource, named) = match rest {
            [] => return Class::other(),
            [resource] => (resource.to_string(), false),
            [resource, _name] => (resource.to_string(), true),
            [resource, _name, subresource, ..] => (format!("{resource}/{subresource}"), true),
        };
        let watch = legacy_watch
            || uri.query().is_some_and(|query| {
                form_urlencoded::parse(query.as_bytes())
                    .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
            });
        let verb = match *method {
            Method::GET if watch => Verb::Watch,
            Method::GET if named => Verb::Get,
            Method::GET => Verb::List,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE if named => Verb::Delete,
            Method::DELETE => Verb::DeleteCollection,
            _ => return Class::other(),
        };
        Class {
            verb: Some(verb),
            resource,
        }
    }

    fn other() -> Class {
        Class {
            verb: None,
            resource: String::new(),
        }
    }
}

/// Which requests a rule applies to, and for how long.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only requests of this verb; `None`: every verb.
    pub verb: Option<Verb>,
    /// Only requests of this resource (`pods`, `pods/status`); `None`: every request.
    pub resource: Option<String>,
    /// At most this many requests; `None`: every matching one.
    pub count: Option<u32>,
    /// For this long after the rule is set; `None`: until the rules are cleared.
    pub lasting: Option<Duration>,
}

/// What a rule does to a request it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Forward it this much later.
    Delay(Duration),
    /// Answer it with this status code, as kube-apiserver does (429 as its
    /// priority-and-fairness filter answers, with `Retry-After`; others with a `Status`).
    Error {
        /// The HTTP status code.
        code: StatusCode,
        /// The `Retry-After` to send (429 always sends one: 1 s when unset).
        retry_after: Option<Duration>,
    },
    /// Close its connection without an answer.
    Reset,
    /// Answer a watch with `410 Expired`, as after a compaction of the history it asks for.
    ExpireWatch,
}

#[derive(Debug)]
struct Rule {
    scope: Scope,
    action: Action,
    left: Option<u32>,
    until: Option<Instant>,
}

impl Rule {
    fn matches(&self, class: &Class) -> bool {
        let verb = match self.action {
            Action::ExpireWatch => class.verb == Some(Verb::Watch),
            _ => self.scope.verb.is_none_or(|verb| class.verb == Some(verb)),
        };
        verb && self
            .scope
            .resource
            .as_ref()
            .is_none_or(|resource| *resource == class.resource)
    }

    fn spent(&self, now: Instant) -> bool {
        self.left == Some(0) || self.until.is_some_and(|until| now >= until)
    }
}

/// The fault rules in force, the first matching one deciding.
#[derive(Debug, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// Adds a rule, in force from `now`.
    pub fn add(&mut self, scope: Scope, action: Action, now: Instant) {
        self.rules.push(Rule {
            left: scope.count,
            until: scope.lasting.map(|d| now + d),
            scope,
            action,
        });
    }

    /// Ends every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// The action for a request of `class` at `now`, if a rule matches it; the request
    /// counts against that rule's `count`.
    pub fn take(&mut self, class: &Class, now: Instant) -> Option<Action> {
        self.rules.retain(|rule| !rule.spent(now));
        let rule = self.rules.iter_mut().find(|rule| rule.matches(class))?;
        if let Some(left) = &mut rule.left {
            *left -= 1;
        }
        Some(rule.action)
    }
}

/// kube-apiserver's answer of `code` to a request (`Retry-After` when given): 429 as its
/// max-in-flight and priority-and-fairness filters write it (plain text, `Retry-After`
/// always), other codes as a `metav1.Status` with upstream's reason.
pub fn error_response(code: StatusCode, retry_after: Option<Duration>) -> Response<Bytes> {
    let seconds = |d: Duration| d.as_secs().max(1);
    let mut response = if code == StatusCode::TOO_MANY_REQUESTS {
        let mut r = Response::new(Bytes::from_static(
            b"Too many requests, please try again later.\n",
        ));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r.headers_mut().insert(
            header::RETRY_AFTER,
            seconds(retry_after.unwrap_or(Duration::from_secs(1))).into(),
        );
        r
    } else {
        let (reason, message) = match code.as_u16() {
            500 => (
                "InternalError",
                "Internal error occurred: injected by nodeconform",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            ),
            403 => ("Forbidden", "forbidden: injected by nodeconform"),
            _ => ("", code.canonical_reason().unwrap_or("")),
        };
        let mut details = serde_json::Map::new();
        if let Some(d) = retry_after {
            details.insert("retryAfterSeconds".into(), seconds(d).into());
        }
        let mut status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code.as_u16(),
        });
        if !details.is_empty() {
            status["details"] = details.into();
        }
        let mut r = Response::new(Bytes::from(status.to_string()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(d) = retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, seconds(d).into());
        }
        r
    };
    *response.status_mut() = code;
    response
}

/// A watch answered as kube-apiserver's watch cache answers one from a `resourceVersion`
/// older than it holds: `200`, then one `ERROR` event with a `410 Expired` `Status`, then
/// the end (the client relists).
pub fn expired_watch(uri: &http::Uri) -> Response<Bytes> {
    let version = uri
        .query()
        .and_then(|query| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "resourceVersion")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default();
    let event = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version: {version}"),
            "reason": "Expired",
            "code": 410,
        },
    });
    let mut r = Response::new(Bytes::from(format!("{event}\n")));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(method: Method, uri: &str) -> Class {
        Class::of(&method, &uri.parse().unwrap())
    }

    fn is(verb: Verb, resource: &str) -> Class {
        Class {
            verb: Some(verb),
            resource: resource.into(),
        }
    }

    #[test]
    fn requests_are_read_as_kube_apiserver_reads_them() {
        let get = Method::GET;
        assert_eq!(
            class(get.clone(), "/api/v1/namespaces/ns/pods/p"),
            is(Verb::Get, "pods")
        );
        assert_eq!(
            class(get.clone(), "/api/v1/pods?watch=true&resourceVersion=5"),
            is(Verb::Watch, "pods")
        );
        assert_eq!(
            class(get.clone(), "/api/v1/watch/namespaces/ns/pods"),
            is(Verb::Watch, "pods")
        );
        assert_eq!(
            class(get.clone(), "/api/v1/namespaces/ns/pods?fieldSelector=x"),
            is(Verb::List, "pods")
        );
        assert_eq!(
            class(Method::PATCH, "/api/v1/namespaces/ns/pods/p/status"),
            is(Verb::Patch, "pods/status")
        );
        assert_eq!(
            class(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n"
            ),
            is(Verb::Update, "leases")
        );
        assert_eq!(
            class(Method::POST, "/api/v1/namespaces/ns/events"),
            is(Verb::Create, "events")
        );
        assert_eq!(
            class(get.clone(), "/api/v1/namespaces/ns"),
            is(Verb::Get, "namespaces")
        );
        assert_eq!(
            class(Method::PUT, "/api/v1/namespaces/ns/finalize"),
            is(Verb::Update, "namespaces/finalize")
        );
        assert_eq!(
            class(Method::DELETE, "/api/v1/namespaces/ns/pods"),
            is(Verb::DeleteCollection, "pods")
        );
        assert_eq!(class(get, "/version").verb, None);
    }

    #[test]
    fn the_first_matching_rule_decides_until_it_is_spent() {
        let now = Instant::now();
        let mut rules = Rules::default();
        let scope = Scope {
            verb: Some(Verb::Patch),
            resource: Some("pods/status".into()),
            count: Some(2),
            lasting: None,
        };
        rules.add(scope, Action::Reset, now);
        rules.add(Scope::default(), Action::Delay(Duration::from_secs(1)), now);
        let status = is(Verb::Patch, "pods/status");
        assert_eq!(rules.take(&status, now), Some(Action::Reset));
        assert_eq!(
            rules.take(&is(Verb::Get, "pods"), now),
            Some(Action::Delay(Duration::from_secs(1)))
        );
        assert_eq!(rules.take(&status, now), Some(Action::Reset));
        assert_eq!(
            rules.take(&status, now),
            Some(Action::Delay(Duration::from_secs(1)))
        );
        rules.clear();
        assert_eq!(rules.take(&status, now), None);
    }

    #[test]
    fn rules_end_after_their_time_and_expiry_takes_only_watches() {
        let now = Instant::now();
        let mut rules = Rules::default();
        let lasting = Scope {
            lasting: Some(Duration::from_secs(5)),
            ..Scope::default()
        };
        rules.add(lasting, Action::ExpireWatch, now);
        assert_eq!(rules.take(&is(Verb::List, "pods"), now), None);
        assert_eq!(
            rules.take(&is(Verb::Watch, "pods"), now),
            Some(Action::ExpireWatch)
        );
        assert_eq!(
            rules.take(&is(Verb::Watch, "pods"), now + Duration::from_secs(5)),
            None
        );
    }

    #[test]
    fn errors_are_answered_as_kube_apiserver_answers_them() {
        let throttled = error_response(StatusCode::TOO_MANY_REQUESTS, None);
        assert_eq!(throttled.headers()[header::RETRY_AFTER], "1");
        assert!(throttled.body().starts_with(b"Too many requests"));
        let unavailable = error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(Duration::from_secs(3)),
        );
        let status: serde_json::Value = serde_json::from_slice(unavailable.body()).unwrap();
        assert_eq!(status["reason"], "ServiceUnavailable");
        assert_eq!(status["details"]["retryAfterSeconds"], 3);
        assert_eq!(unavailable.headers()[header::RETRY_AFTER], "3");
        let expired = expired_watch(&"/api/v1/pods?watch=1&resourceVersion=42".parse().unwrap());
        let event: serde_json::Value = serde_json::from_slice(expired.body()).unwrap();
        assert_eq!(event["object"]["code"], 410);
        assert_eq!(event["object"]["message"], "too old resource version: 42");
    }
}

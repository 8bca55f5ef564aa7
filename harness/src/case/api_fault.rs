//! `fault: {api: …}`: faults of the API server as the node's agent sees them, injected by
//! the proxy the harness puts between that agent and its API server
//! ([`crate::api_proxy`]; the case `requires: [api-faults]`).
//!
//! ```yaml
//! - fault: {api: {error: {code: 429, retryAfter: 2s, verb: patch, resource: pods/status, for: 20s}}}
//! - fault: {api: {delay: {by: 2s, resource: leases, count: 5}}}
//! - fault: {api: {reset: {verb: create, resource: events}}}
//! - fault: {api: {expireWatches: {resource: pods, count: 1}}}
//! - fault: {api: closeWatches}
//! - fault: {api: {restart: {down: 5s}}}
//! - fault: {api: clearFaults}
//! ```

use serde::de::MapAccess;
use serde::{Deserialize, Serialize};

use super::duration::CaseDuration;
use super::tagged::{TaggedEnum, tagged_deserialize};
use crate::api_proxy::{Action, Scope, Verb};

/// One API fault step.
#[derive(Debug, Clone)]
pub enum ApiFault {
    /// Matching requests are answered with an error status, as kube-apiserver answers
    /// when overloaded (429) or failing (5xx).
    Error(ApiRule),
    /// Matching requests are sent on this much later.
    Delay(ApiRule),
    /// The connections of matching requests are closed without an answer.
    Reset(ApiRule),
    /// Matching watch requests end at once with `410 Expired`, as after a compaction.
    ExpireWatches(ApiRule),
    /// Every open watch of the agent ends now, mid-stream.
    CloseWatches,
    /// The API server restarts with its state kept: watches end, connections are closed
    /// for `down`.
    Restart(Restart),
    /// Every API fault rule ends.
    ClearFaults,
}

/// Which requests an API fault rule takes, for how long, and its parameters.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiRule {
    /// `error`: the HTTP status code (400–599).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// `error`: the `Retry-After` sent with it (a 429 always has one: 1 s by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<CaseDuration>,
    /// `delay`: how much later a request is sent on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<CaseDuration>,
    /// Only requests of this verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<Verb>,
    /// Only requests of this resource, with its subresource as RBAC spells it (`pods`,
    /// `pods/status`, `nodes/status`, `leases`, `events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// At most this many requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// For this long after the step; without `count` or `for` the rule holds until
    /// `clearFaults` or the case's end.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub lasting: Option<CaseDuration>,
}

/// `fault: {api: {restart: …}}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Restart {
    /// How long the API server is down.
    pub down: CaseDuration,
}

impl ApiRule {
    /// The requests the rule takes.
    pub fn scope(&self) -> Scope {
        Scope {
            verb: self.verb,
            resource: self.resource.clone(),
            count: self.count,
            lasting: self.lasting.map(CaseDuration::get),
        }
    }
}

/// What is wrong with an API fault step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidApiFault {
    /// `error` without a code an API server answers with.
    #[error("`error` needs a `code` from 400 to 599")]
    Code,
    /// `delay` without `by`.
    #[error("`delay` needs `by`, how much later")]
    NoDelay,
    /// `expireWatches` for another verb.
    #[error("`expireWatches` takes watches only: leave `verb` out")]
    ExpireVerb,
    /// A parameter of another kind of fault.
    #[error("`{field}` belongs to `{action}` only")]
    Misplaced {
        /// The parameter.
        field: &'static str,
        /// The fault it belongs to.
        action: &'static str,
    },
    /// `count: 0`.
    #[error("`count: 0` takes no request: leave the step out")]
    NoCount,
}

impl ApiFault {
    /// The proxy's rule for a fault that is one (`None` for `closeWatches`, `restart`,
    /// `clearFaults`), or what is wrong with the step.
    pub fn rule(&self) -> Result<Option<(Scope, Action)>, InvalidApiFault> {
        let (rule, action) = match self {
            ApiFault::Error(rule) => {
                let code = rule
                    .code
                    .filter(|code| (400..=599).contains(code))
                    .and_then(|code| http::StatusCode::from_u16(code).ok())
                    .ok_or(InvalidApiFault::Code)?;
                let retry_after = rule.retry_after.map(CaseDuration::get);
                (rule, Action::Error { code, retry_after })
            }
            ApiFault::Delay(rule) => {
                let by = rule.by.ok_or(InvalidApiFault::NoDelay)?;
                (rule, Action::Delay(by.get()))
            }
            ApiFault::Reset(rule) => (rule, Action::Reset),
            ApiFault::ExpireWatches(rule) => {
                if rule.verb.is_some_and(|verb| verb != Verb::Watch) {
                    return Err(InvalidApiFault::ExpireVerb);
                }
                (rule, Action::ExpireWatch)
            }
            ApiFault::CloseWatches | ApiFault::Restart(_) | ApiFault::ClearFaults => {
                return Ok(None);
            }
        };
        let error = matches!(self, ApiFault::Error(_));
        let delay = matches!(self, ApiFault::Delay(_));
        for (field, misplaced, action) in [
            ("code", rule.code.is_some() && !error, "error"),
            ("retryAfter", rule.retry_after.is_some() && !error, "error"),
            ("by", rule.by.is_some() && !delay, "delay"),
        ] {
            if misplaced {
                return Err(InvalidApiFault::Misplaced { field, action });
            }
        }
        if rule.count == Some(0) {
            return Err(InvalidApiFault::NoCount);
        }
        Ok(Some((rule.scope(), action)))
    }
}

impl TaggedEnum for ApiFault {
    const WHAT: &'static str = "an API fault";
    const TAGS: &'static [&'static str] = &[
        "error",
        "delay",
        "reset",
        "expireWatches",
        "closeWatches",
        "restart",
        "clearFaults",
    ];
    fn unit(tag: &str) -> Option<Self> {
        match tag {
            "closeWatches" => Some(ApiFault::CloseWatches),
            "clearFaults" => Some(ApiFault::ClearFaults),
            _ => None,
        }
    }
    fn with_value<'de, A: MapAccess<'de>>(
        tag: &str,
        map: &mut A,
    ) -> Result<Option<Self>, A::Error> {
        Ok(match tag {
            "error" => Some(ApiFault::Error(map.next_value()?)),
            "delay" => Some(ApiFault::Delay(map.next_value()?)),
            "reset" => Some(ApiFault::Reset(map.next_value()?)),
            "expireWatches" => Some(ApiFault::ExpireWatches(map.next_value()?)),
            "restart" => Some(ApiFault::Restart(map.next_value()?)),
            _ => None,
        })
    }
}
tagged_deserialize!(ApiFault);

//! `list`: the objects of a collection, selected and paged as kube-apiserver 1.28 serves
//! them. A list with `resourceVersion=0` comes from its watch cache, which knows no pages:
//! `limit` is ignored. Other lists are paged with continue tokens of upstream's shape
//! (`{"v":"meta.k8s.io/v1","rv":…,"start":…}`, base64url), each page of the current state
//! (upstream pins the first page's version; the double does not keep old states).

use base64::Engine;
use http::Response;
use serde_json::{Value, json};

use crate::field::{Error as FieldError, Value as Bad};
use crate::handlers::{Context, selector};
use crate::http::{self as h, Body};
use crate::request::{Query, Target};
use crate::status::{Error, Result};
use crate::table::{self, View};

/// Where a page starts: after this object (namespace, name).
type Start = (String, String);

/// `ListOptions` as upstream validates them.
fn options(query: &Query) -> Result<()> {
    let invalid = |e| Err(Error::invalid_options("ListOptions", e));
    match query.get("resourceVersionMatch") {
        None => Ok(()),
        Some(_) if query.get("resourceVersion").is_none() => invalid(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        Some("Exact" | "NotOlderThan") => Ok(()),
        Some(other) => invalid(FieldError::not_supported(
            "resourceVersionMatch",
            Bad::str(other),
            &["Exact", "NotOlderThan", ""],
        )),
    }
}

/// The continue token for a page that ended at `last`, listed at `rv`.
fn continue_token(target: &Target, last: &Start, rv: u64) -> String {
    // Upstream's start key is the next etcd key, relative to the list's prefix.
    let start = match (&target.namespace, target.resource.namespaced) {
        (None, true) => format!("{}/{}\u{0}", last.0, last.1),
        _ => format!("{}\u{0}", last.1),
    };
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// `DecodeContinue`, with its errors' words.
fn parse_continue(target: &Target, token: &str) -> Result<Start> {
    let invalid = |detail: String| {
        Error::bad_request(format!(
            "invalid continue token: continue key is not valid: {detail}"
        ))
    };
    // Go's `base64.RawURLEncoding` ignores the unused bits of the last symbol.
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    let raw = lenient.decode(token).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => token.len(),
        };
        invalid(format!("illegal base64 data at input byte {at}"))
    })?;
    let parsed: Value = crate::patch::parse_json(&raw).map_err(invalid)?;
    match parsed.get("v").and_then(Value::as_str).unwrap_or("") {
        "meta.k8s.io/v1" => {}
        other => {
            return Err(Error::bad_request(format!(
                "invalid continue token: continue key is not valid: server does not recognize this encoded version {other}"
            )));
        }
    }
    let start = parsed.get("start").and_then(Value::as_str).unwrap_or("");
    let key = start.strip_suffix('\u{0}').unwrap_or(start);
    if key.is_empty() {
        return Err(Error::bad_request(
            "invalid continue token: continue key is not valid: encoded start key empty",
        ));
    }
    Ok(match (&target.namespace, target.resource.namespaced) {
        (Some(ns), true) => (ns.clone(), key.to_owned()),
        (_, false) => (String::new(), key.to_owned()),
        (None, true) => match key.split_once('/') {
            Some((ns, name)) => (ns.to_owned(), name.to_owned()),
            None => (key.to_owned(), String::new()),
        },
    })
}

/// Serves a list.
pub fn serve(ctx: &Context, target: &Target, query: &Query, view: View) -> Result<Response<Body>> {
    let resource = target.resource;
    options(query)?;
    let selector = selector(resource, query)?;
    let from_cache = query.get("resourceVersion") == Some("0")
        && query.get("resourceVersionMatch") != Some("Exact");
    let limit = query
        .int("limit")?
        .filter(|l| *l > 0 && !from_cache)
        .map(|l| l as usize);
    let after = query
        .get("continue")
        .map(|t| parse_continue(target, t))
        .transpose()?;
    let (objects, rv) = ctx.registry.store.txn(|t| {
        (
            t.list(resource.storage(), target.namespace.as_deref()),
            t.rv(),
        )
    });
    if query.get("resourceVersionMatch") == Some("Exact") {
        let wanted = query.get("resourceVersion").unwrap_or("");
        if wanted != rv.to_string() {
            return Err(Error::Expired {
                requested: wanted.parse().unwrap_or(0),
                oldest: rv,
            });
        }
    }
    let unread: Vec<_> = objects
        .into_iter()
        .filter(|o| {
            after
                .as_ref()
                .is_none_or(|(ns, name)| (o.namespace(), o.name()) > (ns.as_str(), name.as_str()))
        })
        .collect();
    let mut page = Vec::new();
    let mut read = 0;
    for o in &unread {
        if limit.is_some_and(|l| page.len() >= l) {
            break;
        }
        read += 1;
        if selector.matches(&o.value) {
            page.push(o.clone());
        }
    }
    let remaining = unread[read..]
        .iter()
        .filter(|o| selector.matches(&o.value))
        .count();
    // Upstream pages through storage keys: a full page hands out a continue token when
    // any object follows it, matching or not.
    let more = read < unread.len();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(last) = page.last().filter(|_| more) {
        let start = (last.namespace().to_owned(), last.name().to_owned());
        metadata["continue"] = continue_token(target, &start, rv).into();
        // Upstream counts what is left only when no selector filters it.
        if query.get("labelSelector").is_none() && query.get("fieldSelector").is_none() {
            metadata["remainingItemCount"] = remaining.into();
        }
    }
    let (kind, api_version) = match view {
        View::Table(include) => {
            let t = table::table(resource, page.iter().map(|o| &o.value), include, metadata);
            let body = serde_json::to_vec(&t).unwrap_or_default();
            return Ok(h::bytes(200, view.content_type(), body));
        }
        View::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        View::Json => (format!("{}List", resource.kind), resource.api_version()),
    };
    let head = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}).to_string();
    let items: Vec<bytes::Bytes> = page.iter().map(|o| view.item(resource, o)).collect();
    let size: usize = items.iter().map(|o| o.len() + 1).sum();
    let mut out = Vec::with_capacity(head.len() + size + 16);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(o);
    }
    out.extend_from_slice(b"]}");
    Ok(h::bytes(200, h::JSON, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::target;

    #[test]
    fn continue_tokens_round_trip() {
        let namespaced = target("/api/v1/namespaces/ns/configmaps");
        let start = ("ns".to_owned(), "a-b".to_owned());
        let token = continue_token(&namespaced, &start, 7);
        assert_eq!(parse_continue(&namespaced, &token).unwrap(), start);
        let all = target("/api/v1/configmaps");
        assert_eq!(
            parse_continue(&all, &continue_token(&all, &start, 7)).unwrap(),
            start
        );
        assert_eq!(
            parse_continue(&namespaced, "not-a-token")
                .unwrap_err()
                .to_string(),
            "invalid continue token: continue key is not valid: invalid character '\\u009e' looking for beginning of value"
        );
    }
}

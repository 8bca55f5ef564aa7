//! The subresources that are verbs of their own: `pods/eviction` (no PodDisruptionBudgets
//! exist, so every eviction is allowed) and `serviceaccounts/token` (TokenRequest, answered
//! with an unsigned JWT carrying upstream's claims).

use base64::Engine;
use http::{HeaderMap, Response};
use serde_json::{Value, json};

use crate::deletion::DeleteOptions;
use crate::handlers::{Context, named, require_namespace};
use crate::http::{self as h, Body, BodyFormat};
use crate::meta;
use crate::request::Target;
use crate::resources;
use crate::status::{Error, Result};

/// `POST pods/{name}/eviction`: deletes the pod with the Eviction's `deleteOptions`.
pub fn evict(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    let eviction = BodyFormat::from_headers(headers)?.parse(body)?;
    let evicted = meta::str_field(&eviction, "name");
    if !evicted.is_empty() && evicted != name {
        return Err(Error::bad_request(format!(
            "name in URL does not match name in Eviction object: {name} vs {evicted}"
        )));
    }
    let options = eviction
        .get("deleteOptions")
        .map(DeleteOptions::from_json)
        .transpose()?
        .unwrap_or_default();
    if !options.dry_run {
        // `addConditionAndDeletePod` (PodDisruptionConditions): the pod learns why it goes.
        ctx.registry.update(
            &resources::PODS,
            target.ns(),
            name,
            crate::strategy::Part::Status,
            false,
            |current| {
                let mut pod = current.cloned().unwrap_or_default();
                disruption_target(&mut pod);
                Ok(pod)
            },
        )?;
    }
    ctx.registry
        .delete(&resources::PODS, target.ns(), name, &options)?;
    // No PodDisruptionBudgets exist here, so every eviction is allowed (upstream: 201 Success).
    Ok(h::json(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// `UpdatePodCondition` with `DisruptionTarget=True` (`EvictionByEvictionAPI`): a new
/// transition time only when the condition's status changes.
fn disruption_target(pod: &mut Value) {
    let condition = json!({
        "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting", "lastTransitionTime": meta::now(),
    });
    let status = pod
        .as_object_mut()
        .map(|p| p.entry("status").or_insert_with(|| json!({})));
    let Some(conditions) = status
        .and_then(Value::as_object_mut)
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "DisruptionTarget")
    {
        Some(existing) if existing["status"] == "True" => {
            existing["reason"] = condition["reason"].clone();
            existing["message"] = condition["message"].clone();
        }
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// `POST serviceaccounts/{name}/token`: a TokenRequest answered with an unsigned JWT.
pub fn token(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    writer: &crate::managed_fields::Writer,
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    let sa = ctx
        .registry
        .get(&resources::SERVICEACCOUNTS, target.ns(), name)?;
    let request = BodyFormat::from_headers(headers)?.parse(body)?;
    let seconds = request
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    // `ValidateTokenRequest`: between ten minutes and 2^32 seconds.
    let too = match seconds {
        s if s < 600 => Some("may not specify a duration less than 10 minutes"),
        s if s > 1 << 32 => Some("may not specify a duration larger than 2^32 seconds"),
        _ => None,
    };
    if let Some(detail) = too {
        return Err(Error::Invalid {
            group: "authentication.k8s.io",
            kind: "TokenRequest",
            name: String::new(),
            errors: vec![crate::field::Error::invalid(
                "spec.expirationSeconds",
                crate::field::Value::plain(seconds),
                detail,
            )],
        });
    }
    let audiences = request
        .pointer("/spec/audiences")
        .cloned()
        .unwrap_or(json!(["https://kubernetes.default.svc.cluster.local"]));
    let now = chrono::Utc::now();
    let expires = now + chrono::Duration::seconds(seconds);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims = json!({
        "aud": audiences, "exp": expires.timestamp(), "iat": now.timestamp(),
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": format!("system:serviceaccount:{}:{name}", target.ns()),
        "kubernetes.io": {"namespace": target.ns(), "serviceaccount": {"name": name, "uid": meta::str_field(&sa.value, "uid")}},
    });
    let jwt = format!(
        "{}.{}.{}",
        b64.encode(r#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(claims.to_string()),
        b64.encode("nodeconform-apiserver-unsigned")
    );
    let mut spec = request.get("spec").cloned().unwrap_or(json!({}));
    spec["audiences"] = audiences;
    spec["expirationSeconds"] = seconds.into();
    let mut response = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": target.ns(), "creationTimestamp": meta::now()},
        "spec": spec,
        "status": {"token": jwt, "expirationTimestamp": meta::time(expires)},
    });
    // What the request set is the requester's (through the `token` subresource).
    let schema = crate::wire::schema::AUTHENTICATION_TOKEN_REQUEST;
    let mut asked = request.clone();
    asked["spec"] = response["spec"].clone();
    let writer = writer.clone().through(Some("token"));
    crate::managed_fields::record_created(schema, "authentication.k8s.io/v1", &mut asked, &writer);
    if let Some(fields) = asked.pointer("/metadata/managedFields") {
        response["metadata"]["managedFields"] = fields.clone();
    }
    crate::wire::encode_as(schema, &mut response);
    Ok(h::json(201, &response))
}

//! Request handling: authentication, routing, and one function per verb (get, list, watch,
//! create, update, patch, delete, deletecollection) plus the `eviction`, `binding`, `token`
//! and `log` subresources, and the streaming ones (`exec`, `attach`, `portforward`). Every failure becomes a `metav1.Status` through [`crate::status`].

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, Request, Response, header};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::deletion::DeleteOptions;
use crate::http::{self as h, Body, BodyFormat};
use crate::managed_fields::Writer;
use crate::patch::{self, PatchType};
use crate::registry::{Deleted, Registry};
use crate::request::{Query, Route, Target, route};
use crate::resources::{self, Resource};
use crate::selectors::{FieldSelector, LabelSelector, Selector};
use crate::status::{self, Error, Result};
use crate::store::WatchStart;
use crate::strategy::{self, Part};
use crate::table::View;
use crate::{
    auth, binding, discovery, meta, node_proxy, openapi, pod_connect, pod_log, subresources,
    validation, watch,
};

/// Everything a request handler needs.
pub struct Context {
    /// The objects and their rules.
    pub registry: Registry,
    /// The bearer token clients must send, if any.
    pub token: Option<String>,
    /// `host:port` the server is reachable at (for discovery).
    pub address: String,
    /// Bumped to end every open watch (shutdown, or an injected disconnect).
    pub closer: tokio::sync::watch::Sender<u64>,
    /// How often an idle watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Reaches nodes' kubelets (`pods/log`).
    pub kubelet: crate::kubelet_client::KubeletClient,
    /// `metrics.k8s.io`, when served.
    pub metrics: Option<crate::metrics_api::MetricsServer>,
}

/// Handles one request. Never fails: errors are Status responses.
pub async fn handle(ctx: Arc<Context>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match serve(&ctx, req).await {
        Ok(resp) => resp,
        Err(err) => h::error(&err),
    };
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    resp
}

async fn serve(ctx: &Context, req: Request<Incoming>) -> Result<Response<Body>> {
    if let Some((node, path)) = node_proxy::parse(req.uri().path()) {
        auth::check(ctx.token.as_deref(), req.headers())?;
        let node = node.to_owned();
        return node_proxy::serve(ctx, &node, &path, req).await;
    }
    if let (Some(metrics), Some(path)) = (&ctx.metrics, crate::metrics_api::parse(req.uri().path()))
    {
        auth::check(ctx.token.as_deref(), req.headers())?;
        return metrics.serve(ctx, path, &req).await;
    }
    let (parts, body) = req.into_parts();
    let route = route(parts.uri.path());
    if !matches!(route, Ok(Route::Health) | Ok(Route::Version)) {
        auth::check(ctx.token.as_deref(), &parts.headers)?;
    }
    let route = route?;
    if let Route::Object(target) = &route
        && target.name.is_some()
        && matches!(
            target.subresource.as_deref(),
            Some("exec" | "attach" | "portforward")
        )
    {
        return pod_connect::serve(ctx, target, Request::from_parts(parts, body)).await;
    }
    if let Route::Object(target) = &route
        && target.name.is_some()
        && target.subresource.as_deref() == Some("log")
        && nodeconform_stream::upgrade::asks_websocket(&parts.headers)
    {
        let query = Query::parse(parts.uri.query());
        let req = Request::from_parts(parts, body);
        return pod_log::serve_websocket(ctx, target, &query, req).await;
    }
    let query = Query::parse(parts.uri.query());
    // Logs are text: a client may accept only `text/plain`.
    let text = matches!(&route, Route::Object(t) if t.subresource.as_deref() == Some("log"));
    if !h::accepts_json(&parts.headers) && !matches!(route, Route::OpenApiV2) && !text {
        return Err(Error::NotAcceptable);
    }
    let target = match route {
        Route::Object(target) => target,
        other => return serve_fixed(ctx, other, &parts.method, &parts.headers),
    };
    let options = options_kind(&parts.method, target.name.is_some());
    let writer = Writer::of_request(
        query.get("fieldManager"),
        h::header_str(&parts.headers, header::USER_AGENT),
    );
    let validation = validation::Directive::parse(query.get("fieldValidation"), options)?;
    // A delete's options are its body's or its query's, read with the rest of them.
    let dry_run = match parts.method {
        Method::DELETE => false,
        _ => dry_run(query.get("dryRun"), options)?,
    };
    let headers = parts.headers;
    let view = View::from_accept(
        h::header_str(&headers, header::ACCEPT),
        query.get("includeObject"),
    );
    let has_name = target.name.is_some();
    let sub = target.subresource.as_deref();
    match (&parts.method, has_name, sub) {
        (&Method::GET, false, None) => {
            if target.watch || query.flag("watch") {
                watch_handler(ctx, &target, &query, view, None)
            } else {
                crate::list::serve(ctx, &target, &query, view)
            }
        }
        (_, _, Some("resize")) if !resizable(ctx, &target) => Err(Error::NoResource),
        (&Method::GET, true, None | Some("status" | "resize")) => {
            if target.watch || (sub.is_none() && query.flag("watch")) {
                let name = target.name.clone();
                watch_handler(ctx, &target, &query, view, name)
            } else {
                get(ctx, &target, view)
            }
        }
        (&Method::POST, false, None) => {
            let body = h::read_body(&headers, body).await?;
            create(
                ctx,
                &target,
                &headers,
                &body,
                view,
                (dry_run, validation, &writer),
            )
        }
        (&Method::POST, true, Some(sub @ ("eviction" | "binding")))
            if std::ptr::eq(target.resource, &resources::PODS) =>
        {
            let body = h::read_body(&headers, body).await?;
            match sub {
                "eviction" => subresources::evict(ctx, &target, &headers, &body),
                _ => binding::serve(ctx, &target, &headers, &body, dry_run),
            }
        }
        (&Method::GET, true, Some("log")) if std::ptr::eq(target.resource, &resources::PODS) => {
            pod_log::serve(ctx, &target, &query).await
        }
        (&Method::POST, true, Some("token"))
            if std::ptr::eq(target.resource, &resources::SERVICEACCOUNTS) =>
        {
            let body = h::read_body(&headers, body).await?;
            subresources::token(ctx, &target, &headers, &body, &writer)
        }
        (&Method::PUT, true, None | Some("status" | "resize")) => {
            let body = h::read_body(&headers, body).await?;
            update(
                ctx,
                &target,
                &headers,
                &body,
                view,
                (dry_run, validation, &writer),
            )
        }
        (&Method::PATCH, true, None | Some("status" | "resize")) => {
            let body = h::read_body(&headers, body).await?;
            patch_handler(
                ctx,
                &target,
                (&headers, &query),
                &body,
                view,
                (dry_run, &writer),
            )
        }
        (&Method::DELETE, true, None) => {
            let body = h::read_body(&headers, body).await?;
            delete(ctx, &target, (&query, &headers), &body)
        }
        (&Method::DELETE, false, None) => {
            let body = h::read_body(&headers, body).await?;
            delete_collection(ctx, &target, (&query, &headers), &body)
        }
        (_, true, Some("resize")) => Err(Error::MethodNotAllowed),
        (_, _, Some(s)) if !matches!(s, "status" | "eviction" | "binding" | "token" | "log") => {
            Err(Error::NoResource)
        }
        (_, true, Some("eviction" | "binding" | "token"))
            if !matches!(parts.method, Method::POST) =>
        {
            Err(Error::MethodNotAllowed)
        }
        (_, true, Some("log"))
            if std::ptr::eq(target.resource, &resources::PODS) && parts.method != Method::GET =>
        {
            Err(Error::MethodNotAllowed)
        }
        (_, _, Some("eviction" | "binding" | "token" | "log")) => Err(Error::NoResource),
        _ => Err(Error::MethodNotAllowed),
    }
}

/// The `meta.k8s.io` options kind a request's query parameters belong to, which names
/// them in a 422 (`CreateOptions.meta.k8s.io "" is invalid: dryRun: …`).
fn options_kind(method: &Method, named: bool) -> &'static str {
    match (method, named) {
        (&Method::POST, _) => "CreateOptions",
        (&Method::PUT, _) => "UpdateOptions",
        (&Method::PATCH, _) => "PatchOptions",
        (&Method::DELETE, _) => "DeleteOptions",
        (_, true) => "GetOptions",
        (_, false) => "ListOptions",
    }
}

/// `dryRun` of the query: absent or `All`; anything else is a 422 for `options`.
fn dry_run(value: Option<&str>, options: &'static str) -> Result<bool> {
    let values: Vec<&str> = value.into_iter().collect();
    validation::dry_run(&values).map_err(|e| Error::invalid_options(options, e))
}

/// The endpoints that are not resources: health, version, discovery, OpenAPI.
fn serve_fixed(
    ctx: &Context,
    route: Route,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Response<Body>> {
    if method != Method::GET && method != Method::HEAD {
        return Err(Error::MethodNotAllowed);
    }
    Ok(match route {
        Route::Health => h::bytes(200, "text/plain; charset=utf-8", "ok"),
        Route::Version => h::json(200, &discovery::version(ctx.registry.version)),
        Route::CoreVersions => h::json(200, &discovery::core_versions(&ctx.address)),
        Route::Groups => h::json(
            200,
            &crate::metrics_api::with_group(discovery::groups(), ctx.metrics.is_some()),
        ),
        Route::Group(g) => h::json(200, &discovery::api_group(&g).ok_or(Error::NoResource)?),
        Route::Resources { group, version } => h::json(
            200,
            &discovery::resource_list(&group, &version, ctx.registry.version),
        ),
        Route::OpenApiV2 => {
            if h::header_str(headers, header::ACCEPT).contains("protobuf") {
                h::bytes(
                    200,
                    openapi::V2_PROTOBUF,
                    openapi::v2_protobuf(ctx.registry.version),
                )
            } else {
                h::json(200, &openapi::v2_json(ctx.registry.version))
            }
        }
        Route::OpenApiRoot => h::json(200, &openapi::root()),
        Route::OpenApi(path) => h::json(
            200,
            &openapi::group_version(&path, ctx.registry.version).ok_or(Error::NoResource)?,
        ),
        Route::Object(_) => return Err(Error::NoResource),
    })
}

fn object_response(
    code: u16,
    resource: &Resource,
    obj: &crate::store::Object,
    view: View,
) -> Response<Body> {
    h::bytes(code, view.content_type(), view.object(resource, obj))
}

pub(crate) fn selector(resource: &Resource, query: &Query) -> Result<Selector> {
    Ok(Selector {
        labels: LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or(""), resource)?,
    })
}

pub(crate) fn named(target: &Target) -> Result<&str> {
    target.name.as_deref().ok_or(Error::MethodNotAllowed)
}

pub(crate) fn require_namespace(target: &Target) -> Result<()> {
    if target.resource.namespaced && target.namespace.is_none() {
        return Err(Error::NoResource);
    }
    Ok(())
}

fn get(ctx: &Context, target: &Target, view: View) -> Result<Response<Body>> {
    require_namespace(target)?;
    let obj = ctx
        .registry
        .get(target.resource.storage(), target.ns(), named(target)?)?;
    Ok(object_response(200, target.resource, &obj, view))
}

fn watch_handler(
    ctx: &Context,
    target: &Target,
    query: &Query,
    view: View,
    name: Option<String>,
) -> Result<Response<Body>> {
    let resource = target.resource;
    let mut selector = selector(resource, query)?;
    if let Some(name) = name {
        selector.fields = FieldSelector::parse(&format!("metadata.name={name}"), resource)?;
    }
    let send_initial_events = query.flag("sendInitialEvents");
    let start = match query.get("resourceVersion") {
        _ if send_initial_events => WatchStart::Current,
        None | Some("0") => WatchStart::Current,
        Some(rv) => WatchStart::After(
            rv.parse::<u64>()
                .map_err(|_| Error::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let timeout = query
        .int("timeoutSeconds")?
        .filter(|t| *t > 0)
        .map_or(Duration::from_secs(1800), |t| Duration::from_secs(t as u64));
    let params = watch::Params {
        resource,
        namespace: target.namespace.clone(),
        selector,
        start,
        bookmarks: query.flag("allowWatchBookmarks"),
        send_initial_events,
        timeout,
        view,
    };
    let content_type = view.content_type();
    let s = watch::stream(
        &ctx.registry.store,
        params,
        ctx.closer.subscribe(),
        ctx.bookmark_interval,
    );
    Ok(h::stream(content_type, s))
}

fn create(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    view: View,
    (dry_run, validation, writer): (bool, validation::Directive, &Writer),
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let format = BodyFormat::from_headers(headers)?;
    let obj = format.parse_object(body, target.resource.kind)?;
    strategy::check_type(target.resource, &obj)?;
    if format == BodyFormat::Json {
        validation::check_duplicates(target.resource, body, validation)?;
    }
    let warnings = validation::check(target.resource, &obj, validation)?;
    let obj = to_storage(target.resource, obj);
    let created = ctx
        .registry
        .create_mode(target.resource, target.ns(), obj, dry_run, writer)?;
    let resp = object_response(201, target.resource, &created, view);
    Ok(with_warnings(resp, &warnings))
}

/// Adds `Warning: 299 - "…"` headers, as upstream reports unknown fields.
fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::from(w.as_str()));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// A request body in the shape its resource is stored in.
fn to_storage(resource: &Resource, obj: Value) -> Value {
    if resource.converted() {
        crate::events::to_core(obj)
    } else {
        obj
    }
}

fn check_name(obj: &Value, name: &str) -> Result<()> {
    let body_name = meta::str_field(obj, "name");
    if body_name != name {
        return Err(Error::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// Whether `target` is `pods/{name}/resize` of a release that has it.
fn resizable(ctx: &Context, target: &Target) -> bool {
    std::ptr::eq(target.resource, &resources::PODS) && ctx.registry.version.pods_resize()
}

fn part(target: &Target) -> Part {
    match target.subresource.as_deref() {
        Some("status") => Part::Status,
        Some("resize") => Part::Resize,
        _ => Part::Main,
    }
}

fn update(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    view: View,
    (dry_run, validation, writer): (bool, validation::Directive, &Writer),
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    let format = BodyFormat::from_headers(headers)?;
    let obj = format.parse_object(body, target.resource.kind)?;
    if !obj.is_object() {
        return Err(Error::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    // The decoder reads the kind before anything looks at the name.
    strategy::check_type(target.resource, &obj)?;
    check_name(&obj, name)?;
    if format == BodyFormat::Json {
        validation::check_duplicates(target.resource, body, validation)?;
    }
    let warnings = validation::check(target.resource, &obj, validation)?;
    let obj = to_storage(target.resource, obj);
    let create = target.resource.create_on_update;
    let resource = target.resource.storage();
    // A PUT's uid is a precondition of the storage write (a PATCH's is a change that
    // validation refuses), checked against the stored object — an empty one when there is
    // none, before "not found".
    let want = meta::str_field(&obj, "uid").to_owned();
    let uid_precondition = |have: &str| {
        if want.is_empty() || want == have {
            return Ok(());
        }
        Err(Error::conflict(
            resource,
            name,
            format!(
                "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, \
                 AdditionalErrorMsg: Precondition failed: UID in precondition: {want}, UID in object meta: {have}",
                resources::storage_key(resource, target.ns(), name)
            ),
        ))
    };
    let updated = ctx.registry.update_mode(
        target.resource,
        target.ns(),
        name,
        part(target),
        create,
        (dry_run, writer),
        |current| {
            uid_precondition(current.map_or("", |c| meta::str_field(c, "uid")))?;
            Ok(obj)
        },
    );
    let (stored, created) = match updated {
        Err(Error::NotFound { .. }) => {
            uid_precondition("")?;
            updated?
        }
        other => other?,
    };
    let code = if created { 201 } else { 200 };
    let resp = object_response(code, target.resource, &stored, view);
    Ok(with_warnings(resp, &warnings))
}

fn patch_handler(
    ctx: &Context,
    target: &Target,
    (headers, query): (&HeaderMap, &Query),
    body: &[u8],
    view: View,
    (dry_run, writer): (bool, &Writer),
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    let kind = PatchType::from_content_type(h::header_str(headers, header::CONTENT_TYPE))?;
    if kind == PatchType::Apply && query.get("fieldManager").is_none() {
        return Err(Error::invalid_options(
            "PatchOptions",
            crate::field::Error::required("fieldManager", "is required for apply patch"),
        ));
    }
    let patch = patch::parse(kind, body)?;
    if kind == PatchType::Apply {
        let body_name = meta::str_field(&patch, "name");
        if !body_name.is_empty() {
            check_name(&patch, name)?;
        }
    }
    let resource = resources::ALL[target.resource.id];
    let part = part(target);
    let writer = match kind {
        PatchType::Apply => writer.clone().applying(),
        _ => writer.clone(),
    }
    .through(part.subresource());
    let force = query.flag("force");
    let (stored, created) = ctx.registry.update_mode(
        resource,
        target.ns(),
        name,
        part,
        kind == PatchType::Apply,
        (dry_run, &writer),
        |live| {
            // Patches apply to the object in the shape the client addressed.
            let current = match live {
                Some(cur) if resource.converted() => crate::events::to_v1(cur),
                Some(cur) => cur.clone(),
                None => json!({}),
            };
            let patched = to_storage(
                resource,
                patch::apply(resource, kind, &current, &patch, name)?,
            );
            if kind != PatchType::Apply {
                return Ok(patched);
            }
            crate::managed_fields::apply(resource, live, &patch, patched, &writer, force)
                .map_err(|conflicts| Error::apply_conflicts(&conflicts))
        },
    )?;
    Ok(object_response(
        if created { 201 } else { 200 },
        resource,
        &stored,
        view,
    ))
}

/// The options of a delete: its body's, else its query's (kube-apiserver reads one or the
/// other, never both).
fn delete_options(query: &Query, headers: &HeaderMap, body: &[u8]) -> Result<DeleteOptions> {
    if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::from_query(query)
    } else {
        DeleteOptions::from_json(&BodyFormat::from_headers(headers)?.parse(body)?)
    }
}

fn deleted_response(resource: &'static Resource, outcome: Deleted) -> Response<Body> {
    match outcome {
        Deleted::Pending(obj) | Deleted::DryRun(obj) => {
            h::bytes(200, h::JSON, View::Json.object(resource, &obj))
        }
        Deleted::Gone(obj) => {
            // Upstream returns the deleted object for the kinds whose registry sets
            // `ReturnDeletedObject` and a Success Status for the rest.
            if resources::returns_deleted_object(resource) {
                h::bytes(200, h::JSON, View::Json.object(resource, &obj))
            } else {
                let uid = Some(meta::str_field(&obj.value, "uid").to_string());
                h::json_of(200, &status::success(resource, obj.name(), uid))
            }
        }
    }
}

fn delete(
    ctx: &Context,
    target: &Target,
    (query, headers): (&Query, &HeaderMap),
    body: &[u8],
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let options = delete_options(query, headers, body)?;
    let outcome = ctx.registry.delete(
        target.resource.storage(),
        target.ns(),
        named(target)?,
        &options,
    )?;
    Ok(deleted_response(target.resource, outcome))
}

fn delete_collection(
    ctx: &Context,
    target: &Target,
    (query, headers): (&Query, &HeaderMap),
    body: &[u8],
) -> Result<Response<Body>> {
    let resource = target.resource;
    let selector = selector(resource, query)?;
    let options = delete_options(query, headers, body)?;
    let objects = ctx
        .registry
        .store
        .txn(|t| t.list(resource.storage(), target.namespace.as_deref()));
    // Upstream answers with the list as it was before the deletions.
    let mut items = Vec::new();
    for o in objects.iter().filter(|o| selector.matches(&o.value)) {
        match ctx
            .registry
            .delete(resource.storage(), o.namespace(), o.name(), &options)
        {
            Ok(_) | Err(Error::NotFound { .. }) => {
                let item: Value = serde_json::from_slice(&View::Json.item(resource, o))
                    .unwrap_or_else(|_| o.value.clone());
                items.push(item);
            }
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": ctx.registry.store.rv().to_string()},
        "items": items,
    });
    Ok(h::json(200, &list))
}

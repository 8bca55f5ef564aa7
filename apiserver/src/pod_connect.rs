//! The pod subresources that open a stream to the node — `pods/exec`,
//! `pods/attach` and `pods/portforward` (kube-apiserver's `ExecREST`,
//! `AttachREST`, `PortForwardREST` and their `…Location`): the options from
//! the query, the container picked as for logs, the kubelet located, and the
//! client's upgrade request proxied to `/exec`, `/attach` or `/portForward`
//! there (the upgrade-aware proxy): the client and the node agent then speak
//! SPDY or WebSocket to each other through the API server.

use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};

use crate::handlers::{Context, named, require_namespace};
use crate::http::Body;
use crate::pod_log;
use crate::request::Target;
use crate::resources;
use crate::status::{Error, Result};

/// Go's `strconv.ParseBool` true values, as query booleans decode.
fn truthy(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// `pods/{name}/exec|attach|portforward`, GET or POST.
pub async fn serve<B>(ctx: &Context, target: &Target, req: Request<B>) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    if req.method() != Method::GET && req.method() != Method::POST {
        return Err(Error::MethodNotAllowed);
    }
    let params: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let first = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let all = |key: &str| -> Vec<String> {
        params
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let pod = ctx.registry.get(&resources::PODS, target.ns(), name)?;
    let ns = target.ns();
    let path = match target.subresource.as_deref() {
        Some("portforward") => {
            let mut q = form_urlencoded::Serializer::new(String::new());
            for port in all("ports")
                .iter()
                .flat_map(|p| p.split(','))
                .filter(|p| !p.is_empty())
            {
                q.append_pair("port", port);
            }
            with_query(format!("/portForward/{ns}/{name}"), q.finish())
        }
        Some(kind @ ("exec" | "attach")) => {
            let container = pod_log::container(&pod.value, name, first("container"))?;
            // `url.Values.Encode`: keys sorted, values in order.
            let mut q = form_urlencoded::Serializer::new(String::new());
            if kind == "exec" {
                for c in all("command") {
                    q.append_pair("command", &c);
                }
            }
            // The kubelet's names (`ExecStdinParam` is `input`, …), sorted.
            for (kubelet, option) in [
                ("error", "stderr"),
                ("input", "stdin"),
                ("output", "stdout"),
                ("tty", "tty"),
            ] {
                if first(option).is_some_and(truthy) {
                    q.append_pair(kubelet, "1");
                }
            }
            with_query(format!("/{kind}/{ns}/{name}/{container}"), q.finish())
        }
        _ => return Err(Error::NoResource),
    };
    let node_name = pod_log::node_name(&pod.value);
    if node_name.is_empty() {
        return Err(Error::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    if !nodeconform_stream::upgrade::is_upgrade(&req) {
        return Err(Error::bad_request("Upgrade request required".to_owned()));
    }
    let node = ctx.registry.get(&resources::NODES, "", node_name)?;
    let at = ctx.kubelet.locate(&node.value)?;
    let (tls, host) = ctx
        .kubelet
        .connect(&at, req.method().as_str(), &path)
        .await?;
    let resp = nodeconform_stream::proxy::upgrade(req, tls, &host, &path)
        .await
        .map_err(|e| Error::Unreachable {
            message: e.to_string(),
        })?;
    Ok(resp.map(|b| Full::new(b).boxed_unsync()))
}

fn with_query(path: String, query: String) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

//! The pod subresources that open a stream to the node — `pods/exec`,
//! `pods/attach` and `pods/portforward` (kube-apiserver's `ExecREST`,
//! `AttachREST`, `PortForwardREST` and their `…Location`): the options from
//! the query, the container picked as for logs, the kubelet located, and the
//! client's upgrade request proxied to `/exec`, `/attach` or `/portForward`
//! there (the upgrade-aware proxy): the client and the node agent then speak
//! SPDY or WebSocket to each other through the API server. As kube-apiserver
//! 1.30+ does, a WebSocket `exec`/`attach` offering `v5.channel.k8s.io` is
//! answered here and sent on as SPDY, and from 1.31 WebSocket port
//! forwarding is tunnelled to SPDY ([`nodeconform_stream::translate`]).

use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use nodeconform_stream::remotecommand::{self, Options, Outcome};
use nodeconform_stream::{client, portforward, translate, websocket};

use crate::handlers::{Context, named, require_namespace};
use crate::http::Body;
use crate::pod_log;
use crate::request::Target;
use crate::resources;
use crate::status::{Error, Result};

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
                if first(option).is_some_and(pod_log::query_bool) {
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
    let version = ctx.registry.version;
    let kind = target.subresource.as_deref().unwrap_or_default();
    let translated = match kind {
        "portforward" => version.tunnels_port_forwarding() && translate::wants_tunnel(&req),
        _ => version.translates_websocket_streams() && translate::wants_v5(&req),
    };
    let method = if translated {
        "POST"
    } else {
        req.method().as_str()
    };
    let (tls, host) = ctx.kubelet.connect(&at, method, &path).await?;
    if translated {
        let options = Options {
            stdin: first("stdin").is_some_and(pod_log::query_bool),
            stdout: first("stdout").is_some_and(pod_log::query_bool),
            stderr: first("stderr").is_some_and(pod_log::query_bool),
            tty: first("tty").is_some_and(pod_log::query_bool),
        };
        return translate_to_spdy(req, kind == "portforward", tls, host, path, options);
    }
    let resp = nodeconform_stream::proxy::upgrade(req, tls, &host, &path)
        .await
        .map_err(|e| Error::Unreachable {
            message: e.to_string(),
        })?;
    Ok(resp.map(|b| Full::new(b).boxed_unsync()))
}

/// kube-apiserver's side of a translated request: the client's WebSocket is
/// answered here; the kubelet gets a SPDY upgrade of `path` over `kubelet`.
fn translate_to_spdy<B, K>(
    mut req: Request<B>,
    port_forward: bool,
    kubelet: K,
    host: String,
    path: String,
    options: Options,
) -> Result<Response<Body>>
where
    K: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let protocol = if port_forward {
        translate::PORT_FORWARD_TUNNEL
    } else {
        translate::V5
    };
    let upgrade = match websocket::accept(&mut req, &[protocol]) {
        Ok(upgrade) => upgrade,
        Err(refusal) => {
            return Ok(refusal
                .response::<String>()
                .map(|b| Full::new(b.into()).boxed_unsync()));
        }
    };
    let response = upgrade.response::<Body>();
    tokio::spawn(async move {
        if port_forward {
            match client::upgrade_raw(kubelet, &host, &path, &portforward::PROTOCOLS).await {
                Ok((upgraded, _)) => {
                    translate::port_forward_tunnel(upgrade, TokioIo::new(upgraded)).await;
                }
                Err(error) => tracing::debug!(%error, "the kubelet refused the port forwarding"),
            }
            return;
        }
        let Ok(channels) = remotecommand::accept_websocket(upgrade, options).await else {
            return;
        };
        match client::upgrade(kubelet, &host, &path, &remotecommand::PROTOCOLS).await {
            Ok((session, protocol)) => {
                translate::remote_command(channels, session, protocol, options).await;
            }
            // client-go's words for a refused upgrade, under the translator's InternalError.
            Err(client::Error::Refused { body, .. }) => {
                let why = format!("unable to upgrade connection: {}", body.trim_end());
                channels.finish(Outcome::Failed(why)).await;
            }
            Err(error) => channels.finish(Outcome::Failed(error.to_string())).await,
        }
    });
    Ok(response)
}

fn with_query(path: String, query: String) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

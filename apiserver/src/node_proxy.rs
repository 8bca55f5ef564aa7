//! `nodes/{name}/proxy/{path}` (kube-apiserver's node `ProxyREST`): any
//! request, whatever its method, passed on to the node's kubelet endpoint at
//! `/{path}` with its query — `kubectl get --raw /api/v1/nodes/N/proxy/healthz`,
//! `…/proxy/containerLogs/…`, `…/proxy/pods` — and the answer streamed back;
//! an upgrade request is spliced as `pods/exec` is.

use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use nodeconform_stream::proxy::HOP_HEADERS;

use crate::handlers::Context;
use crate::http::Body;
use crate::resources;
use crate::status::{Error, Result};

/// `name` and the rest of the path when `path` is `/api/v1/nodes/{name}/proxy[/…]`.
pub fn parse(path: &str) -> Option<(&str, String)> {
    let rest = path.strip_prefix("/api/v1/nodes/")?;
    let (name, rest) = rest.split_once('/')?;
    let sub = rest.strip_prefix("proxy")?;
    if !(sub.is_empty() || sub.starts_with('/')) || name.is_empty() {
        return None;
    }
    Some((
        name,
        if sub.is_empty() {
            "/".to_owned()
        } else {
            sub.to_owned()
        },
    ))
}

/// Passes `req` to node `name`'s kubelet at `path`.
pub async fn serve(
    ctx: &Context,
    name: &str,
    path: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>> {
    let node = ctx.registry.get(&resources::NODES, "", name)?;
    let at = ctx.kubelet.locate(&node.value)?;
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    if nodeconform_stream::upgrade::is_upgrade(&req) {
        let (tls, host) = ctx
            .kubelet
            .connect(&at, req.method().as_str(), &path_and_query)
            .await?;
        let resp = nodeconform_stream::proxy::upgrade(req, tls, &host, &path_and_query)
            .await
            .map_err(|e| Error::Unreachable {
                message: e.to_string(),
            })?;
        return Ok(resp.map(|b| Full::new(b).boxed_unsync()));
    }
    let (parts, body) = req.into_parts();
    let mut forwarded = Request::builder().method(parts.method).uri(path_and_query);
    for (name, value) in &parts.headers {
        if name == header::HOST
            || name == header::AUTHORIZATION
            || HOP_HEADERS.contains(&name.as_str())
        {
            continue;
        }
        forwarded = forwarded.header(name, value);
    }
    let forwarded = forwarded
        .body(body)
        .map_err(|e| Error::bad_request(e.to_string()))?;
    let resp = ctx.kubelet.send(&at, forwarded).await?;
    let (parts, body) = resp.into_parts();
    let stream = http_body_util::BodyStream::new(body)
        .filter_map(|frame| async move { frame.ok().and_then(|f| f.into_data().ok()) });
    let mut out = Response::new(BodyExt::boxed_unsync(http_body_util::StreamBody::new(
        stream.map(|b: Bytes| Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(b))),
    )));
    *out.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !HOP_HEADERS.contains(&name.as_str()) {
            out.headers_mut().append(name, value.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_paths() {
        assert_eq!(
            parse("/api/v1/nodes/n1/proxy/healthz"),
            Some(("n1", "/healthz".to_owned()))
        );
        assert_eq!(
            parse("/api/v1/nodes/n1/proxy"),
            Some(("n1", "/".to_owned()))
        );
        assert_eq!(
            parse("/api/v1/nodes/n1/proxy/"),
            Some(("n1", "/".to_owned()))
        );
        assert_eq!(parse("/api/v1/nodes/n1/proxyx"), None);
        assert_eq!(parse("/api/v1/nodes/n1/status"), None);
        assert_eq!(parse("/api/v1/nodes/n1"), None);
    }
}

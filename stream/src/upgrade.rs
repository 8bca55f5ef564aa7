//! The HTTP side of a streaming request: protocol negotiation
//! (`httpstream.Handshake`: the client lists `X-Stream-Protocol-Version`s,
//! the server picks the first it supports) and the upgrade to SPDY/3.1
//! (`spdy.NewResponseUpgrader`), with upstream's refusals.

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use crate::spdy::{self, Session};

/// The header naming the stream protocols.
pub const PROTOCOL_HEADER: &str = "x-stream-protocol-version";
/// The header a refused negotiation lists the server's protocols in.
pub const ACCEPTED_HEADER: &str = "x-accepted-stream-protocol-versions";

/// A refused upgrade: the HTTP answer to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The status.
    pub status: StatusCode,
    /// The plain-text body (without the trailing newline `http.Error` adds).
    pub message: String,
    /// The protocols the server accepts, when none of the client's was one.
    pub accepted: Vec<String>,
}

impl Refusal {
    fn new(status: StatusCode, message: String) -> Self {
        Self {
            status,
            message,
            accepted: Vec::new(),
        }
    }

    /// The answer, as Go's `http.Error` writes it.
    pub fn response<B: From<String>>(&self) -> Response<B> {
        let mut resp = Response::new(B::from(format!("{}\n", self.message)));
        *resp.status_mut() = self.status;
        for p in &self.accepted {
            if let Ok(v) = HeaderValue::from_str(p) {
                resp.headers_mut().append(ACCEPTED_HEADER, v);
            }
        }
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp.headers_mut().insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        resp
    }
}

/// An accepted upgrade: answer with [`Upgrade::response`], then take the
/// session from [`Upgrade::session`].
#[derive(Debug)]
pub struct Upgrade {
    protocol: String,
    on: OnUpgrade,
}

/// Whether a request asks for a WebSocket (`Connection: upgrade`,
/// `Upgrade: websocket`).
pub fn is_websocket<B>(req: &Request<B>) -> bool {
    asks_websocket(req.headers())
}

/// [`is_websocket`] of a request's headers.
pub fn asks_websocket(headers: &HeaderMap) -> bool {
    connection_upgrade(headers)
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Whether a request asks to upgrade the connection at all
/// (`httpstream.IsUpgradeRequest`).
pub fn is_upgrade<B>(req: &Request<B>) -> bool {
    connection_upgrade(req.headers())
}

fn connection_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("upgrade"))
}

/// The client's protocols, comma-separated values of every header line.
fn client_protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(PROTOCOL_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim_matches(' '))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Go's `%v` of a string slice.
fn go_list(items: &[impl AsRef<str>]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(" "))
}

/// Negotiates the protocol and checks the SPDY upgrade headers of `req`.
pub fn spdy<B>(req: &mut Request<B>, supported: &[&str]) -> Result<Upgrade, Refusal> {
    let offered = client_protocols(req.headers());
    if offered.is_empty() {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: X-Stream-Protocol-Version is required".into(),
        ));
    }
    let Some(protocol) = offered.iter().find(|p| supported.contains(&p.as_str())) else {
        let mut refusal = Refusal::new(
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {}, server accepts {}",
                go_list(&offered),
                go_list(supported)
            ),
        );
        refusal.accepted = supported.iter().map(|p| (*p).to_owned()).collect();
        return Err(refusal);
    };
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !connection_upgrade(req.headers())
        || !upgrade
            .to_ascii_lowercase()
            .contains(&spdy::UPGRADE.to_ascii_lowercase())
    {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: missing upgrade headers in request".into(),
        ));
    }
    Ok(Upgrade {
        protocol: protocol.clone(),
        on: hyper::upgrade::on(req),
    })
}

impl Upgrade {
    /// The negotiated protocol.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// The `101 Switching Protocols` answer.
    pub fn response<B: Default>(&self) -> Response<B> {
        let mut resp = switching_protocols(spdy::UPGRADE);
        if let Ok(v) = HeaderValue::from_str(&self.protocol) {
            resp.headers_mut().insert(PROTOCOL_HEADER, v);
        }
        resp
    }

    /// The SPDY session, once the answer has gone out.
    pub async fn session(self) -> Result<(Session, mpsc::Receiver<spdy::Stream>), hyper::Error> {
        let upgraded = self.on.await?;
        Ok(Session::server(TokioIo::new(upgraded)))
    }
}

/// A `101 Switching Protocols` answer upgrading to `protocol` (the
/// `Upgrade` token), before the protocol's own headers.
pub(crate) fn switching_protocols<B: Default>(protocol: &'static str) -> Response<B> {
    let mut resp = Response::new(B::default());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static(protocol));
    resp
}

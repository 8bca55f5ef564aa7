//! How the API server reaches a node's kubelet (kube-apiserver's
//! `NodeConnectionInfoGetter` and kubelet transport): the node's address by
//! preferred type, its `daemonEndpoints.kubeletEndpoint.Port` (10250 when
//! unset), HTTPS without verifying the kubelet's certificate (kube-apiserver
//! without `--kubelet-certificate-authority`), HTTP/1.1.
//!
//! Every node of the embedded backend runs on this host and listens on
//! 127.0.0.1 only, while a kubelet reports the host's own address as its
//! `InternalIP`: an address of this host that refuses the connection is
//! dialled again on 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::status::{Error, Result};

/// kube-apiserver's default `--kubelet-port`, for nodes that report no port.
pub const DEFAULT_PORT: u16 = 10250;

/// The address types tried in order when none are configured: what kubeadm,
/// kind and k3s give kube-apiserver as `--kubelet-preferred-address-types`
/// (kube-apiserver's own default puts `Hostname` first, which a node name
/// given with `--hostname-override` rarely resolves).
pub const DEFAULT_ADDRESS_TYPES: [&str; 3] = ["InternalIP", "ExternalIP", "Hostname"];

/// How long connecting to a kubelet may take (kube-apiserver's dialer: 30 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The client the API server uses to reach kubelets.
#[derive(Clone)]
pub struct KubeletClient {
    tls: TlsConnector,
    address_types: Vec<String>,
}

impl std::fmt::Debug for KubeletClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletClient")
            .field("address_types", &self.address_types)
            .finish_non_exhaustive()
    }
}

/// Where a node's kubelet is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The address (an IP or a host name).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl KubeletClient {
    /// A client picking node addresses by `address_types`, in order.
    pub fn new(address_types: Vec<String>) -> Result<Self, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            tls: TlsConnector::from(Arc::new(config)),
            address_types,
        })
    }

    /// The kubelet of `node` (a Node object): `GetPreferredNodeAddress` and the daemon endpoint port.
    pub fn locate(&self, node: &Value) -> Result<Location> {
        let addresses = node
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let of_type = |t: &str| {
            addresses.iter().find_map(|a| {
                (a.get("type").and_then(Value::as_str) == Some(t))
                    .then(|| a.get("address").and_then(Value::as_str))
                    .flatten()
                    .filter(|a| !a.is_empty())
            })
        };
        let host = self
            .address_types
            .iter()
            .find_map(|t| of_type(t))
            .ok_or_else(|| {
                let known: Vec<String> = addresses
                    .iter()
                    .map(|a| {
                        format!(
                            "{{{} {}}}",
                            a.get("type").and_then(Value::as_str).unwrap_or(""),
                            a.get("address").and_then(Value::as_str).unwrap_or("")
                        )
                    })
                    .collect();
                Error::Unreachable {
                    message: format!(
                        "no preferred addresses found; known addresses: [{}]",
                        known.join(" ")
                    ),
                }
            })?;
        let port = node
            .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
            .unwrap_or(DEFAULT_PORT);
        Ok(Location {
            host: host.to_owned(),
            port,
        })
    }

    /// `GET https://{location}{path_and_query}`; transport failures are a 500
    /// worded like Go's HTTP client.
    pub async fn get(&self, at: &Location, path_and_query: &str) -> Result<Response<Incoming>> {
        let request = Request::get(path_and_query)
            .header(http::header::USER_AGENT, "nodeconform-apiserver")
            .body(Empty::<Bytes>::new())
            .map_err(|e| Error::Unreachable {
                message: e.to_string(),
            })?;
        self.send(at, request).await
    }

    /// Sends `request` (its URI a path and query) to the kubelet at `at`;
    /// transport failures are a 500 worded like Go's HTTP client.
    pub async fn send<B>(&self, at: &Location, request: Request<B>) -> Result<Response<Incoming>>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let method = request.method().as_str().to_owned();
        let method = format!("{}{}", &method[..1], method[1..].to_ascii_lowercase());
        let (tls, host) = self.connect(at, &method, &path).await?;
        let fail = |what: String| Error::Unreachable {
            message: format!("{method} \"https://{host}{path}\": {what}"),
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| fail(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut request = request;
        if let Ok(v) = http::HeaderValue::from_str(&host) {
            request.headers_mut().insert(http::header::HOST, v);
        }
        sender
            .send_request(request)
            .await
            .map_err(|e| fail(e.to_string()))
    }

    /// A TLS connection to the kubelet at `at`, and the `host:port` to name
    /// it by; failures are worded as Go's client words them for a `method`
    /// request of `path_and_query`.
    pub async fn connect(
        &self,
        at: &Location,
        method: &str,
        path_and_query: &str,
    ) -> Result<(TlsStream<TcpStream>, String)> {
        let host = if at.host.contains(':') {
            format!("[{}]:{}", at.host, at.port)
        } else {
            format!("{}:{}", at.host, at.port)
        };
        let fail = |what: String| Error::Unreachable {
            message: format!("{method} \"https://{host}{path_and_query}\": {what}"),
        };
        let stream = connect(at).await.map_err(&fail)?;
        let name = match at.host.parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(at.host.clone())
                .map_err(|e| fail(format!("invalid host name: {e}")))?,
        };
        let tls = self
            .tls
            .connect(name, stream)
            .await
            .map_err(|e| fail(format!("tls: {e}")))?;
        Ok((tls, host))
    }
}

/// Connects to the kubelet; an address of this host that refuses is dialled
/// again on 127.0.0.1 (see the module docs).
async fn connect(at: &Location) -> std::result::Result<TcpStream, String> {
    let dial = |addr: SocketAddr| async move {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(format!("dial tcp {addr}: connect: {e}")),
            Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
        }
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((at.host.as_str(), at.port))
        .await
        .map_err(|e| format!("dial tcp: lookup {}: {e}", at.host))?
        .collect();
    let mut last = format!("dial tcp: lookup {}: no such host", at.host);
    for addr in addrs {
        match dial(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
        let ip = addr.ip();
        if !ip.is_loopback()
            && is_local(ip)
            && let Ok(s) = dial(SocketAddr::from((Ipv4Addr::LOCALHOST, at.port))).await
        {
            return Ok(s);
        }
    }
    Err(last)
}

/// Whether `ip` is one of this host's addresses (a socket can be bound to it).
fn is_local(ip: IpAddr) -> bool {
    std::net::TcpListener::bind(SocketAddr::from((ip, 0))).is_ok()
}

/// Accepts any kubelet certificate (kube-apiserver without a kubelet CA), but
/// still checks the handshake signatures made with it.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn client() -> KubeletClient {
        KubeletClient::new(DEFAULT_ADDRESS_TYPES.map(String::from).to_vec()).unwrap()
    }

    #[test]
    fn the_preferred_address_and_the_daemon_port() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "nc-1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 12345}}}});
        let at = client().locate(&node).unwrap();
        assert_eq!(
            at,
            Location {
                host: "10.0.0.5".into(),
                port: 12345
            }
        );
        let upstream_default =
            KubeletClient::new(vec!["Hostname".into(), "InternalIP".into()]).unwrap();
        assert_eq!(upstream_default.locate(&node).unwrap().host, "nc-1");
        let no_port =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}});
        assert_eq!(client().locate(&no_port).unwrap().port, DEFAULT_PORT);
    }

    #[test]
    fn no_preferred_address_is_upstreams_error() {
        let node =
            json!({"status": {"addresses": [{"type": "InternalDNS", "address": "n.local"}]}});
        let err = client().locate(&node).unwrap_err();
        assert_eq!(err.code(), 500);
        assert_eq!(
            err.to_string(),
            "no preferred addresses found; known addresses: [{InternalDNS n.local}]"
        );
    }
}

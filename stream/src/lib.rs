//! The kubelet's streaming protocols, for the three parts that serve them:
//! fake-cri's CRI streaming server (the URLs `Exec`, `Attach` and
//! `PortForward` return), the reference agent's kubelet endpoint and the API
//! server double, which pass `kubectl exec`, `attach` and `port-forward` on.
//!
//! - [`upgrade`]: the HTTP request — protocol negotiation and the upgrade.
//! - [`spdy`]: SPDY/3.1 sessions and their streams.
//! - [`remotecommand`]: `exec` and `attach` over a session.
//! - [`portforward`]: port forwarding over a session.
//! - [`proxy`]: passing an upgrade request on and splicing the connections.
//! - [`translate`]: kube-apiserver's WebSocket-to-SPDY translation.
//! - [`websocket`]: the WebSocket channel protocols, the other carrier.
//! - [`channel`]: a stream's sending side, whichever protocol carries it.
//! - [`client`]: the client side, as `kubectl` and `crictl` drive it.

pub mod channel;
pub mod client;
pub mod portforward;
pub mod proxy;
pub mod remotecommand;
pub mod spdy;
pub mod translate;
pub mod upgrade;
pub mod websocket;

/// The connection has ended: nothing more can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the streaming connection is closed")]
pub struct Closed;

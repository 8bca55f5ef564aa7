//! Host ports (`PortMapping.host_port`, a pod's `hostPort`): what the CNI
//! portmap plugin sets up for containerd, as a TCP relay from the host port
//! to the pod's address. fake-cri listens on loopback only — the mapping's
//! `host_ip` when it is a loopback address, else 127.0.0.1 — so a host port
//! never opens the machine to the network. UDP and SCTP mappings are left
//! aside. The relays live while the sandbox is ready.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use nodeconform_cri::v1;
use tokio::net::{TcpListener, TcpStream};

use crate::error::{Error, Result};

/// The open host ports of one sandbox; dropping it closes them.
#[derive(Debug, Default)]
pub(crate) struct HostPorts(Vec<tokio::task::AbortHandle>);

impl Drop for HostPorts {
    fn drop(&mut self) {
        for relay in &self.0 {
            relay.abort();
        }
    }
}

/// Opens the TCP host ports of `mappings`, relaying to `pod_ip`.
pub(crate) fn open(mappings: &[v1::PortMapping], pod_ip: IpAddr) -> Result<HostPorts> {
    let mut open = HostPorts::default();
    for mapping in mappings {
        if mapping.host_port <= 0 || mapping.protocol != v1::Protocol::Tcp as i32 {
            continue;
        }
        let host_ip = match mapping.host_ip.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => ip,
            _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let (Ok(host_port), Ok(container_port)) = (
            u16::try_from(mapping.host_port),
            u16::try_from(mapping.container_port),
        ) else {
            continue;
        };
        let fail = |source| Error::HostPort {
            port: mapping.host_port,
            source,
        };
        let listener =
            std::net::TcpListener::bind(SocketAddr::new(host_ip, host_port)).map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let listener = TcpListener::from_std(listener).map_err(fail)?;
        let target = SocketAddr::new(pod_ip, container_port);
        let relay = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        open.0.push(relay.abort_handle());
    }
    Ok(open)
}

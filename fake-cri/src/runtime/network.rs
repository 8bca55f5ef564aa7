//! Pod networking: the pod network and the IPs given to sandboxes.
//!
//! Pod IPs are loopback addresses: the servers fake-cri simulates for a pod's containers
//! listen on them, and whatever a node agent sends a pod — probes, hooks, port-forwards —
//! stays on the host. Each runtime has a /24 of its own ([`default_network`]), so that the
//! pods of nodes running side by side (the harness runs a runtime per node) never share an
//! address, nor their servers a port. A pod CIDR the kubelet passes in
//! `UpdateRuntimeConfig` (the Node's `spec.podCIDR`) is taken when it lies in 127.0.0.0/8
//! and otherwise left aside: an address off the host would send that traffic away.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::state::{Runtime, State, invalid};
use crate::error::{Error, Result};

impl Runtime {
    pub(crate) fn update_runtime_config(&self, pod_cidr: String) -> Result<()> {
        if pod_cidr.is_empty() {
            return Ok(());
        }
        // Several CIDRs (dual stack) are comma-separated; pod IPs come from the first IPv4 one.
        let Some(cidr) = pod_cidr
            .split(',')
            .map(str::trim)
            .find(|c| parse_cidr(c).is_some())
        else {
            return Err(invalid(
                "UpdateRuntimeConfig",
                format!("pod CIDR {pod_cidr:?} has no IPv4 network with a prefix of /8 to /30"),
            ));
        };
        if !is_loopback(cidr) {
            tracing::warn!(pod_cidr = %cidr, "pod CIDR outside 127.0.0.0/8 not used: pod IPs stay on loopback");
            return Ok(());
        }
        self.state().pod_cidr = cidr.to_owned();
        Ok(())
    }
}

/// A runtime's pod network when nothing configures one: the next /24 of a /14 in
/// 127.0.0.0/8 that the process ID picks (127.4.0.0/14 to 127.252.0.0/14, never the one of
/// 127.0.0.1), the runtimes of one process taking consecutive ones.
pub(super) fn default_network() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let runtime = NEXT.fetch_add(1, Ordering::Relaxed) % 1024;
    let block = 1 + std::process::id() % 63;
    let base = (127 << 24) | (block << 18) | (runtime << 8);
    format!("{}/24", Ipv4Addr::from(base))
}

/// Whether `cidr` lies in 127.0.0.0/8.
fn is_loopback(cidr: &str) -> bool {
    parse_cidr(cidr).is_some_and(|(base, _)| base >> 24 == 127)
}

/// Allocates the next free pod IP from the pod network.
pub(super) fn allocate_ip(state: &mut State) -> String {
    let (base, size) = parse_cidr(&state.pod_cidr).unwrap_or((u32::from(Ipv4Addr::LOCALHOST), 4));
    // Skip the network address and the gateway (.1), and the broadcast address.
    let usable = size.saturating_sub(3).max(1);
    for _ in 0..usable {
        let offset = 2 + state.next_ip % usable;
        state.next_ip = state.next_ip.wrapping_add(1);
        let ip = Ipv4Addr::from(base.wrapping_add(offset)).to_string();
        if !state
            .sandboxes
            .values()
            .any(|s| s.ip.as_deref() == Some(ip.as_str()))
        {
            return ip;
        }
    }
    // Exhausted: share an address rather than fail the pod.
    Ipv4Addr::from(base.wrapping_add(2)).to_string()
}

fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| (8..=30).contains(b))?;
    let mask = u32::MAX << (32 - bits);
    Some((u32::from(ip) & mask, 1 << (32 - bits)))
}

impl Runtime {
    /// Where a port of ready sandbox `id` is reached: its pod IP, or the
    /// node's loopback address for a host-network pod.
    pub(crate) fn sandbox_address(&self, id: &str) -> Result<std::net::IpAddr> {
        let state = self.state();
        let sandbox = state
            .sandboxes
            .get(id)
            .ok_or_else(|| Error::SandboxNotFound { id: id.to_owned() })?;
        if sandbox.state != crate::sandbox::SandboxState::Ready {
            return Err(Error::WrongState {
                object: "pod sandbox",
                id: id.to_owned(),
                state: "SANDBOX_NOTREADY",
                action: "forward a port to it",
            });
        }
        Ok(sandbox
            .ip
            .as_deref()
            .and_then(|ip| ip.parse().ok())
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)))
    }
}

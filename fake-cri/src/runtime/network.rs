//! Pod networking: the pod CIDR and the IPs given to sandboxes.

use super::state::{Runtime, State, invalid};
use crate::error::Result;

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
        self.state().pod_cidr = Some(cidr.to_owned());
        Ok(())
    }
}

/// Allocates the next free pod IP from the pod CIDR (default 10.88.0.0/16).
pub(super) fn allocate_ip(state: &mut State) -> String {
    let (base, size) = state
        .pod_cidr
        .as_deref()
        .and_then(parse_cidr)
        .unwrap_or((u32::from_be_bytes([10, 88, 0, 0]), 1 << 16));
    // Skip the network address and the gateway (.1), and the broadcast address.
    let usable = size.saturating_sub(3).max(1);
    for _ in 0..usable {
        let offset = 2 + state.next_ip % usable;
        state.next_ip = state.next_ip.wrapping_add(1);
        let ip = std::net::Ipv4Addr::from(base.wrapping_add(offset)).to_string();
        if !state
            .sandboxes
            .values()
            .any(|s| s.ip.as_deref() == Some(ip.as_str()))
        {
            return ip;
        }
    }
    // Exhausted: share an address rather than fail the pod.
    std::net::Ipv4Addr::from(base.wrapping_add(2)).to_string()
}

fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| (8..=30).contains(b))?;
    let mask = u32::MAX << (32 - bits);
    Some((u32::from(ip) & mask, 1 << (32 - bits)))
}

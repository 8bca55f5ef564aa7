//! The runtime's version as the node reports it (`newRuntimeVersion`): a semantic version
//! as it is, anything else as its leading dotted numbers (`1.6.20~ds1`, a distribution's
//! package version, is `1.6.20`), and `Unknown` when it has none.

/// `status.nodeInfo.containerRuntimeVersion`: `<runtime name>://<version>`.
pub fn node_info(name: &str, version: &str) -> String {
    format!(
        "{name}://{}",
        normalize(version).unwrap_or("Unknown".into())
    )
}

/// `ParseSemantic`, else `ParseGeneric`, printed back.
fn normalize(version: &str) -> Option<String> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let numeric_end = v
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (c == '.' && i > 0)))
        .map_or(v.len(), |(i, _)| i);
    let (numbers, extra) = v.split_at(numeric_end);
    let components: Vec<&str> = numbers.split('.').collect();
    if components.len() < 2 || components.iter().any(|c| c.is_empty()) {
        return None;
    }
    let zero_led = |c: &&str| c.len() > 1 && c.starts_with('0');
    let semantic =
        components.len() == 3 && is_semver_extra(extra) && !components.iter().any(zero_led);
    // Generic: a leading zero is refused in the first component only.
    if zero_led(&components[0]) {
        return None;
    }
    let numbers: Vec<String> = components
        .iter()
        .map(|c| c.parse::<u64>().map(|n| n.to_string()))
        .collect::<Result<_, _>>()
        .ok()?;
    let mut out = numbers.join(".");
    if semantic {
        out.push_str(extra.trim_end());
    }
    Some(out)
}

/// Whether `extra` is a semantic version's `-pre.release` and `+build.metadata`.
fn is_semver_extra(extra: &str) -> bool {
    let identifiers = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|id| {
                !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    let extra = extra.trim_end();
    let (pre, build) = match extra.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (extra, None),
    };
    let pre_ok = pre.is_empty() || pre.strip_prefix('-').is_some_and(identifiers);
    pre_ok && build.is_none_or(identifiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_the_kubelet_reads_them() {
        // Debian's containerd package: generic, the suffix dropped.
        assert_eq!(node_info("containerd", "1.6.20~ds1"), "containerd://1.6.20");
        assert_eq!(node_info("containerd", "v2.3.4"), "containerd://2.3.4");
        assert_eq!(
            node_info("cri-o", "1.28.1-rc.1+abc"),
            "cri-o://1.28.1-rc.1+abc"
        );
        assert_eq!(node_info("fake", "0.1"), "fake://0.1");
        assert_eq!(node_info("x", "1.2.3.4-foo"), "x://1.2.3.4");
        assert_eq!(node_info("x", "1.02.3"), "x://1.2.3");
        assert_eq!(node_info("x", "unknown"), "x://Unknown");
        assert_eq!(node_info("x", "1"), "x://Unknown");
        assert_eq!(node_info("x", "01.2"), "x://Unknown");
    }
}

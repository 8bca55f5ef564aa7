//! Services as kube-apiserver stores them: `SetDefaults_Service`, the IP families its
//! REST storage picks, and a cluster IP from the service range (`10.96.0.0/16`, what
//! kubeadm and kind configure) for services that get one.

use serde_json::{Map, Value, json};

/// `SetDefaults_Service` and the families of the service's IPs.
pub fn defaults(service: &mut Map<String, Value>) {
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let str_of = |spec: &Map<String, Value>, key: &str| {
        spec.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if str_of(spec, "sessionAffinity").is_empty() {
        spec.insert("sessionAffinity".into(), "None".into());
    }
    if str_of(spec, "type").is_empty() {
        spec.insert("type".into(), "ClusterIP".into());
    }
    let kind = str_of(spec, "type");
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port.get("protocol").is_none_or(|p| p == "") {
            port["protocol"] = "TCP".into();
        }
        let unset = port
            .get("targetPort")
            .is_none_or(|t| t == 0 || t == "" || t.is_null());
        if unset {
            port["targetPort"] = port.get("port").cloned().unwrap_or(json!(0));
        }
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer")
        && str_of(spec, "externalTrafficPolicy").is_empty()
    {
        spec.insert("externalTrafficPolicy".into(), "Cluster".into());
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer")
        && spec.get("internalTrafficPolicy").is_none()
    {
        spec.insert("internalTrafficPolicy".into(), "Cluster".into());
    }
    if kind == "ExternalName" {
        return;
    }
    let cluster_ip = str_of(spec, "clusterIP");
    if !cluster_ip.is_empty()
        && spec
            .get("clusterIPs")
            .is_none_or(|l| l.as_array().is_none_or(Vec::is_empty))
    {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    if spec
        .get("ipFamilies")
        .is_none_or(|l| l.as_array().is_none_or(Vec::is_empty))
    {
        // A headless service without a selector stands for endpoints of any family.
        let selectorless = spec
            .get("selector")
            .is_none_or(|s| s.as_object().is_none_or(Map::is_empty));
        let (policy, families) = if cluster_ip == "None" && selectorless {
            ("RequireDualStack", json!(["IPv4", "IPv6"]))
        } else {
            ("SingleStack", json!(["IPv4"]))
        };
        if spec.get("ipFamilyPolicy").is_none() {
            spec.insert("ipFamilyPolicy".into(), policy.into());
        }
        spec.insert("ipFamilies".into(), families);
    }
}

/// Gives a service that needs a cluster IP one that no service in `taken` has.
pub fn allocate_cluster_ip(service: &mut Value, taken: &[String]) {
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let unset = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty();
    if kind == "ExternalName" || !unset {
        return;
    }
    use rand::Rng;
    let mut rng = rand::rng();
    // 10.96.0.1 is the `kubernetes` service's.
    let ip = loop {
        let n: u32 = rng.random_range(2..0xfffe);
        let ip = format!("10.96.{}.{}", n >> 8, n & 0xff);
        if !taken.contains(&ip) {
            break ip;
        }
    };
    spec.insert("clusterIP".into(), ip.clone().into());
    spec.insert("clusterIPs".into(), json!([ip]));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(spec: Value) -> Value {
        let mut s = json!({"spec": spec});
        defaults(s.as_object_mut().unwrap());
        s["spec"].clone()
    }

    #[test]
    fn headless_and_external_services() {
        let h = defaulted(
            json!({"clusterIP": "None", "selector": {"a": "b"}, "ports": [{"port": 80}]}),
        );
        assert_eq!(h["type"], "ClusterIP");
        assert_eq!(
            h["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(h["ipFamilies"], json!(["IPv4"]));
        assert_eq!(h["clusterIPs"], json!(["None"]));
        assert_eq!(
            defaulted(json!({"clusterIP": "None"}))["ipFamilyPolicy"],
            "RequireDualStack"
        );
        let e = defaulted(json!({"type": "ExternalName", "externalName": "x.invalid"}));
        assert_eq!(
            e,
            json!({"type": "ExternalName", "externalName": "x.invalid", "sessionAffinity": "None"})
        );
        let mut s = json!({"spec": {"type": "ClusterIP"}});
        allocate_cluster_ip(&mut s, &[]);
        assert!(
            s["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.96.")
        );
    }
}

//! Services as kube-apiserver stores them: `SetDefaults_Service`, then what its REST
//! storage adds after the field manager has seen the object (so no manager owns it): a
//! cluster IP from the service range (`10.96.0.0/16`, what kubeadm and kind configure)
//! for services that get one, and the families of the service's IPs.

use serde_json::{Map, Value, json};

fn str_of(spec: &Map<String, Value>, key: &str) -> String {
    spec.get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn is_empty_list(v: Option<&Value>) -> bool {
    v.is_none_or(|l| l.as_array().is_none_or(Vec::is_empty))
}

/// `SetDefaults_Service`.
pub fn defaults(service: &mut Map<String, Value>) {
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
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
}

/// The `default/kubernetes` service kube-apiserver keeps for itself (its
/// `controlplane` controller): the first address of the service range, port
/// 443 named `https` to the server's own port. Every pod's containers get its
/// variables (`KUBERNETES_SERVICE_HOST` …), which in-cluster clients read.
pub fn master(port: u16) -> Value {
    json!({
        "metadata": {
            "name": "kubernetes",
            "labels": {"component": "apiserver", "provider": "kubernetes"}
        },
        "spec": {
            "clusterIP": "10.96.0.1",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
            "sessionAffinity": "None",
            "type": "ClusterIP"
        }
    })
}

/// A new service's cluster IPs (one no service in `taken` has) and their families.
pub fn allocate(service: &mut Value, taken: &[String]) {
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if str_of(spec, "type") == "ExternalName" {
        return;
    }
    if str_of(spec, "clusterIP").is_empty() {
        use rand::RngExt;
        let mut rng = rand::rng();
        // 10.96.0.1 is the `kubernetes` service's.
        let ip = loop {
            let n: u32 = rng.random_range(2..0xfffe);
            let ip = format!("10.96.{}.{}", n >> 8, n & 0xff);
            if !taken.contains(&ip) {
                break ip;
            }
        };
        spec.insert("clusterIP".into(), ip.into());
    }
    let cluster_ip = str_of(spec, "clusterIP");
    if is_empty_list(spec.get("clusterIPs")) {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    if is_empty_list(spec.get("ipFamilies")) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn created(spec: Value) -> Value {
        let mut s = json!({"spec": spec});
        defaults(s.as_object_mut().unwrap());
        allocate(&mut s, &[]);
        s["spec"].clone()
    }

    #[test]
    fn headless_external_and_cluster_ip_services() {
        let h =
            created(json!({"clusterIP": "None", "selector": {"a": "b"}, "ports": [{"port": 80}]}));
        assert_eq!(h["type"], "ClusterIP");
        assert_eq!(
            h["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(h["ipFamilies"], json!(["IPv4"]));
        assert_eq!(h["clusterIPs"], json!(["None"]));
        assert_eq!(
            created(json!({"clusterIP": "None"}))["ipFamilyPolicy"],
            "RequireDualStack"
        );
        let e = created(json!({"type": "ExternalName", "externalName": "x.invalid"}));
        assert_eq!(
            e,
            json!({"type": "ExternalName", "externalName": "x.invalid", "sessionAffinity": "None"})
        );
        let c = created(json!({"type": "ClusterIP"}));
        assert!(c["clusterIP"].as_str().unwrap().starts_with("10.96."));
        assert_eq!(c["clusterIPs"][0], c["clusterIP"]);
    }
}

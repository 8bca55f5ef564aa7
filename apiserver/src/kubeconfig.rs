//! The kubeconfig a client uses to reach the server: one cluster (with the CA when TLS is
//! on), one user (with the bearer token when auth is on), one context, current.

use base64::Engine;

/// Renders a kubeconfig for `server` (a URL), with an optional CA (PEM) and token.
pub fn render(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let mut cluster = format!("    server: {server}\n");
    if let Some(ca) = ca_pem {
        let data = base64::engine::general_purpose::STANDARD.encode(ca);
        cluster.push_str(&format!("    certificate-authority-data: {data}\n"));
    }
    let user = match token {
        // A JSON string is a valid YAML scalar, whatever the token contains.
        Some(t) => format!("  user:\n    token: {}\n", serde_json::Value::from(t)),
        None => "  user: {}\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nodeconform\n  cluster:\n{cluster}\
         contexts:\n- name: nodeconform\n  context:\n    cluster: nodeconform\n    \
         user: nodeconform\n    namespace: default\ncurrent-context: nodeconform\n\
         users:\n- name: nodeconform\n{user}preferences: {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_a_kubeconfig() {
        for (ca, token) in [(None, None), (Some("PEM"), Some("t\"x: y"))] {
            let text = render("https://127.0.0.1:1", ca, token);
            let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
            assert_eq!(kc.current_context.as_deref(), Some("nodeconform"));
            let cluster = kc.clusters[0].cluster.as_ref().unwrap();
            assert_eq!(cluster.certificate_authority_data.is_some(), ca.is_some());
            let user = kc.auth_infos[0].auth_info.as_ref();
            assert_eq!(
                user.and_then(|u| u.token.as_ref()).is_some(),
                token.is_some()
            );
        }
    }
}

//! Pods reach each other on their loopback addresses: `curl` in a container
//! and agnhost netexec's `/dial` reach a netexec server in another pod, which
//! logs each request as the image does; nothing leaves the host.

use crate::common;

use common::*;

const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

/// Runs agnhost `netexec` in a new sandbox `name`: (container id, pod IP).
async fn run_netexec(env: &mut Env, name: &str) -> (String, String) {
    env.pull(AGNHOST).await.expect("pull agnhost");
    let sandbox = env.sandbox(name).await;
    let mut config = container_config(name, &[]);
    config.image = Some(image_spec(AGNHOST));
    config.args = vec!["netexec".into()];
    let id = env.run_with(&sandbox, config).await;
    let ip = env.pod_ip(&sandbox).await;
    until_listening(&ip, 8080).await;
    (id, ip)
}

/// The stderr lines of a container's log, without Go's log timestamp.
fn logged(env: &Env, name: &str) -> Vec<String> {
    // The sandbox and its container have the same name.
    let path = env.log_dir().join(name).join(name).join("0.log");
    read_log(path.to_str().unwrap())
        .into_iter()
        .filter(|e| e.stream == "stderr")
        .map(|e| e.text.splitn(3, ' ').nth(2).unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn curl_and_dial_reach_a_handler_pod_which_logs_the_requests() {
    let mut env = Env::start().await;
    let (_, handler_ip) = run_netexec(&mut env, "handler").await;
    let client_sandbox = env.sandbox("client").await;
    let client = env.run(&client_sandbox, "c", "sleep 600").await;

    let url = format!("http://{handler_ip}:8080/echo?msg=poststart");
    let out = env
        .exec(&client, &["sh", "-c", &format!("curl {url}")], 10)
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_slice()),
        (0, &b"poststart"[..])
    );

    // `-f` turns an error status into exit 22 with curl's message.
    let failing = format!("http://{handler_ip}:8080/echo?msg=x&code=503");
    let out = env
        .exec(&client, &["curl", "-sSf", &failing], 10)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 22);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "curl: (22) The requested URL returned error: 503\n"
    );

    // netexec's /dial, from a second netexec pod, to the handler.
    let (_, redirect_ip) = run_netexec(&mut env, "redirect").await;
    let dial = format!(
        "http://{redirect_ip}:8080/dial?host={handler_ip}&port=8080&request=echo%3Fmsg%3Dprestop"
    );
    let out = env.exec(&client, &["curl", "-s", &dial], 10).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        r#"{"responses":["prestop"]}"#
    );

    assert_eq!(
        logged(&env, "handler"),
        [
            "Started HTTP server on port 8080",
            "GET /echo?msg=poststart&code=",
            "GET /echo?msg=x&code=503",
            "GET /echo?msg=prestop&code=",
        ]
    );
    assert_eq!(
        logged(&env, "redirect")[1],
        format!("GET /dial?host={handler_ip}&protocol=&port=8080&request=echo?msg=prestop&tries=")
    );
}

#[tokio::test]
async fn nothing_is_sent_off_the_host_and_refusals_are_curls() {
    let mut env = Env::start().await;
    let (_, ip) = run_netexec(&mut env, "handler").await;
    let sandbox = env.sandbox("client").await;
    let client = env.run(&sandbox, "c", "sleep 600").await;

    let out = env
        .exec(&client, &["curl", "http://10.0.0.1:80/"], 10)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 7);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("10.0.0.1 is not on this host"), "{stderr}");

    let out = env
        .exec(&client, &["curl", "http://example.com/"], 10)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 6);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "curl: (6) Could not resolve host: example.com\n"
    );

    let out = env
        .exec(&client, &["curl", &format!("http://{ip}:9/")], 10)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 7);
    assert!(String::from_utf8_lossy(&out.stderr).ends_with(": Couldn't connect to server\n"));

    let off_host = format!("http://{ip}:8080/dial?host=10.0.0.1&port=80&request=x");
    let out = env
        .exec(&client, &["curl", "-s", &off_host], 10)
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        body.starts_with(
            r#"{"errors":["Get \"http://10.0.0.1:80/x\": 10.0.0.1 is not on this host"#
        ),
        "{body}"
    );
}

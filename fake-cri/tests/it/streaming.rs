//! `Exec`, `Attach` and `PortForward`: the URLs they return, served over
//! SPDY as the kubelet and crictl use them (the client is
//! `nodeconform_stream::client`, which speaks what client-go's SPDY
//! executor and port forwarder speak).

use crate::common;

use bytes::Bytes;
use common::{Env, LIMIT, expect_code};
use nodeconform_cri::v1;
use nodeconform_stream::client;
use tokio::net::TcpStream;
use tonic::Code;

/// Connects to a streaming URL: the stream and its `Host` and path.
async fn dial(url: &str) -> (TcpStream, String, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').unwrap();
    assert!(host.starts_with("127.0.0.1:"), "served on loopback: {url}");
    (
        TcpStream::connect(host).await.unwrap(),
        host.to_owned(),
        format!("/{path}"),
    )
}

async fn exec_url(env: &mut Env, id: &str, cmd: &[&str], stdin: bool) -> String {
    env.runtime
        .exec(v1::ExecRequest {
            container_id: id.to_owned(),
            cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
            stdin,
            stdout: true,
            stderr: true,
            tty: false,
        })
        .await
        .unwrap()
        .into_inner()
        .url
}

#[tokio::test]
async fn exec_streams_output_and_the_exit_code() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env
        .run(&sandbox, "c", "echo ready > /tmp/state; sleep 600")
        .await;
    let url = exec_url(
        &mut env,
        &id,
        &["sh", "-c", "cat /tmp/state; echo oops >&2; exit 3"],
        false,
    )
    .await;
    let (io, host, path) = dial(&url).await;
    let out = tokio::time::timeout(LIMIT, client::exec(io, &host, &path, None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.protocol, "v4.channel.k8s.io");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    assert_eq!(out.exit_code(), Some(3), "{}", out.error);
    let status: serde_json::Value = serde_json::from_str(&out.error).unwrap();
    assert_eq!(
        status["message"],
        "command terminated with non-zero exit code: error executing command [sh -c cat /tmp/state; echo oops >&2; exit 3], exit code 3"
    );
    assert_eq!(status["reason"], "NonZeroExitCode");

    // A URL is good once.
    let (io, host, _) = dial(&url).await;
    match client::exec(io, &host, &path, None).await {
        Err(client::Error::Refused { status, .. }) => assert_eq!(status, 404),
        other => panic!("a used token is not found: {other:?}"),
    }

    // Success is a Success status.
    let url = exec_url(&mut env, &id, &["hostname"], false).await;
    let (io, host, path) = dial(&url).await;
    let out = client::exec(io, &host, &path, None).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pod\n");
    assert_eq!(out.exit_code(), Some(0));
}

#[tokio::test]
async fn exec_and_attach_requests_are_checked() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let request = |tty, stdout, stderr| v1::ExecRequest {
        container_id: id.clone(),
        cmd: vec!["true".into()],
        tty,
        stdout,
        stderr,
        stdin: false,
    };
    let message = expect_code(
        env.runtime.exec(request(true, true, true)).await,
        Code::InvalidArgument,
    );
    assert_eq!(message, "tty and stderr cannot both be true");
    let message = expect_code(
        env.runtime.exec(request(false, false, false)).await,
        Code::InvalidArgument,
    );
    assert_eq!(message, "one of stdin, stdout, or stderr must be set");
    let mut unknown = request(false, true, false);
    unknown.container_id = "nope".into();
    expect_code(env.runtime.exec(unknown).await, Code::NotFound);
    let done = env.run(&sandbox, "done", "exit 0").await;
    env.wait_exit(&done, LIMIT).await;
    let mut exited = request(false, true, false);
    exited.container_id = done.clone();
    expect_code(env.runtime.exec(exited).await, Code::FailedPrecondition);
    let attach = env
        .runtime
        .attach(v1::AttachRequest {
            container_id: id.clone(),
            ..Default::default()
        })
        .await;
    let message = expect_code(attach, Code::InvalidArgument);
    assert_eq!(message, "one of stdin, stdout, and stderr must be set");
    let forward = env
        .runtime
        .port_forward(v1::PortForwardRequest {
            pod_sandbox_id: String::new(),
            port: vec![80],
        })
        .await;
    expect_code(forward, Code::InvalidArgument);
}

#[tokio::test]
async fn attach_streams_what_the_container_writes() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env
        .run(&sandbox, "c", "sleep 1; echo one; echo two >&2; exit 0")
        .await;
    let url = env
        .runtime
        .attach(v1::AttachRequest {
            container_id: id,
            stdout: true,
            stderr: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .url;
    let (io, host, path) = dial(&url).await;
    let out = tokio::time::timeout(LIMIT, client::exec(io, &host, &path, None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "two\n");
    assert_eq!(out.exit_code(), Some(0));
}

#[tokio::test]
async fn port_forward_reaches_the_pods_simulated_server() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    env.run_nginx(&sandbox).await;
    common::until_listening(&env.pod_ip(&sandbox).await, 80).await;
    let forward = |port: u16| v1::PortForwardRequest {
        pod_sandbox_id: sandbox.clone(),
        port: vec![i32::from(port)],
    };
    let url = env
        .runtime
        .port_forward(forward(80))
        .await
        .unwrap()
        .into_inner()
        .url;
    let (io, host, path) = dial(&url).await;
    let request = Bytes::from_static(b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n");
    let (response, error) = tokio::time::timeout(
        LIMIT,
        client::forward_once(io, &host, &path, 80, request.clone()),
    )
    .await
    .unwrap()
    .unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(error, "");

    // Nothing listens on 81: the error stream says so.
    let url = env
        .runtime
        .port_forward(forward(81))
        .await
        .unwrap()
        .into_inner()
        .url;
    let (io, host, path) = dial(&url).await;
    let (response, error) = client::forward_once(io, &host, &path, 81, request)
        .await
        .unwrap();
    assert!(response.is_empty());
    assert!(
        error.starts_with("error forwarding port 81 to pod") && error.contains("connect"),
        "{error}"
    );
}

/// A WebSocket client of `wsstream`'s channel protocol: sends `input` on
/// channel 0, then reads until the server closes; returns each channel's bytes.
async fn websocket(url: &str, protocol: &str, input: &[(u8, &[u8])]) -> (String, Vec<Vec<u8>>) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (io, _, _) = dial(url).await;
    let mut request = url
        .replacen("http://", "ws://", 1)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", protocol.parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::client_async(request, io).await.unwrap();
    let negotiated = response
        .headers()
        .get("Sec-WebSocket-Protocol")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    for (channel, data) in input {
        let mut frame = vec![*channel];
        frame.extend_from_slice(data);
        socket.send(Message::binary(frame)).await.unwrap();
    }
    let mut channels = vec![Vec::new(); 6];
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Binary(data) = message {
            channels[usize::from(data[0])].extend_from_slice(&data[1..]);
        }
    }
    (negotiated, channels)
}

#[tokio::test]
async fn exec_and_port_forward_over_websocket() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let url = exec_url(
        &mut env,
        &id,
        &["sh", "-c", "echo out; echo err >&2; exit 2"],
        false,
    )
    .await;
    let (protocol, channels) =
        tokio::time::timeout(LIMIT, websocket(&url, "v4.channel.k8s.io", &[]))
            .await
            .unwrap();
    assert_eq!(protocol, "v4.channel.k8s.io");
    assert_eq!(String::from_utf8_lossy(&channels[1]), "out\n");
    assert_eq!(String::from_utf8_lossy(&channels[2]), "err\n");
    let status: serde_json::Value = serde_json::from_slice(&channels[3]).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "2");

    // v5 is kube-apiserver's, not a runtime's: refused with wsstream's 403.
    let url = exec_url(&mut env, &id, &["true"], false).await;
    let (io, _, _) = dial(&url).await;
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
            url.replacen("http://", "ws://", 1),
        )
        .unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "v5.channel.k8s.io".parse().unwrap(),
    );
    match tokio_tungstenite::client_async(request, io).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 403),
        other => panic!("v5 refused: {other:?}"),
    }

    // Port forwarding: channel 0 carries the data, 1 the errors, each opened by the port.
    env.run_nginx(&sandbox).await;
    common::until_listening(&env.pod_ip(&sandbox).await, 80).await;
    let forward = v1::PortForwardRequest {
        pod_sandbox_id: sandbox.clone(),
        port: vec![80],
    };
    let url = env
        .runtime
        .port_forward(forward)
        .await
        .unwrap()
        .into_inner()
        .url;
    let request: &[u8] = b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n";
    let (_, channels) =
        tokio::time::timeout(LIMIT, websocket(&url, "v4.channel.k8s.io", &[(0, request)]))
            .await
            .unwrap();
    assert_eq!(&channels[0][..2], &80u16.to_le_bytes());
    assert!(String::from_utf8_lossy(&channels[0][2..]).starts_with("HTTP/1.1 200"));
    assert_eq!(channels[1], 80u16.to_le_bytes());
}

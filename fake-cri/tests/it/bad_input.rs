//! Bad requests get precise gRPC errors, never a panic, and the server
//! keeps serving afterwards.

use crate::common;

use std::time::Duration;

use common::{Env, container_config, expect_code, image_spec, script_config};
use nodeconform_cri::v1;
use tonic::Code;

#[tokio::test]
async fn bad_sandbox_requests() {
    let mut env = Env::start().await;
    let message = expect_code(
        env.runtime
            .run_pod_sandbox(v1::RunPodSandboxRequest {
                config: None,
                runtime_handler: String::new(),
            })
            .await,
        Code::InvalidArgument,
    );
    assert!(message.contains("config"), "{message}");
    let mut config = env.sandbox_config("pod");
    config.metadata = None;
    let message = expect_code(env.run_sandbox(config).await, Code::InvalidArgument);
    assert!(message.contains("metadata"), "{message}");
    let config = env.sandbox_config("");
    let message = expect_code(env.run_sandbox(config).await, Code::InvalidArgument);
    assert!(message.contains("name"), "{message}");
    let message = expect_code(
        env.runtime
            .run_pod_sandbox(v1::RunPodSandboxRequest {
                config: Some(env.sandbox_config("pod")),
                runtime_handler: "kata".to_owned(),
            })
            .await,
        Code::InvalidArgument,
    );
    assert!(message.contains("kata"), "{message}");

    // The same metadata (name, namespace, uid, attempt) twice.
    let first = env.sandbox("pod").await;
    let message = expect_code(
        env.run_sandbox(env.sandbox_config("pod")).await,
        Code::AlreadyExists,
    );
    assert!(message.contains(&first), "names the holder: {message}");
    // A new attempt is a new sandbox.
    let mut retry = env.sandbox_config("pod");
    retry.metadata.as_mut().unwrap().attempt = 1;
    env.run_sandbox(retry).await.expect("attempt 1");
    // Stopping does not release the name; removing does.
    env.stop_sandbox(&first).await.unwrap();
    expect_code(
        env.run_sandbox(env.sandbox_config("pod")).await,
        Code::AlreadyExists,
    );
    env.remove_sandbox(&first).await.unwrap();
    env.run_sandbox(env.sandbox_config("pod"))
        .await
        .expect("name released by removal");
    assert_eq!(env.sandbox_ids(None).await.len(), 2);
}

#[tokio::test]
async fn bad_container_requests() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    env.pull("busybox").await.unwrap();
    let invalid = |message: String, needle: &str| {
        assert!(message.contains(needle), "{needle:?} in {message:?}")
    };

    invalid(
        expect_code(env.create_raw(&sandbox, None).await, Code::InvalidArgument),
        "config",
    );
    let mut config = script_config("c", "exit 0");
    config.metadata = None;
    invalid(
        expect_code(
            env.create_raw(&sandbox, Some(config)).await,
            Code::InvalidArgument,
        ),
        "metadata",
    );
    let mut config = script_config("mount", "exit 0");
    config.mounts = vec![v1::Mount {
        container_path: "/data".to_owned(),
        ..Default::default()
    }];
    invalid(
        expect_code(
            env.create_raw(&sandbox, Some(config)).await,
            Code::InvalidArgument,
        ),
        "mounts[0].host_path must not be empty",
    );
    let config = script_config("", "exit 0");
    invalid(
        expect_code(
            env.create_raw(&sandbox, Some(config)).await,
            Code::InvalidArgument,
        ),
        "name",
    );
    let mut config = script_config("c", "exit 0");
    config.image = None;
    invalid(
        expect_code(
            env.create_raw(&sandbox, Some(config)).await,
            Code::InvalidArgument,
        ),
        "image",
    );

    // Unknown sandbox; image not pulled.
    let config = script_config("c", "exit 0");
    expect_code(env.create_raw("nope", Some(config)).await, Code::NotFound);
    let mut config = script_config("c", "exit 0");
    config.image = Some(image_spec("alpine:3.20"));
    invalid(
        expect_code(env.create_raw(&sandbox, Some(config)).await, Code::NotFound),
        "alpine",
    );

    // The same name and attempt twice in a sandbox; another attempt is fine.
    let first = env.create(&sandbox, "c", "exit 0").await.unwrap();
    let message = expect_code(
        env.create(&sandbox, "c", "exit 0").await,
        Code::AlreadyExists,
    );
    assert!(message.contains(&first), "{message}");
    let mut retry = script_config("c", "exit 0");
    retry.metadata.as_mut().unwrap().attempt = 1;
    env.create_with(&sandbox, retry).await.expect("attempt 1");
    // The same name in another sandbox is fine.
    let other = env.sandbox("other").await;
    env.create(&other, "c", "exit 0")
        .await
        .expect("another pod");

    // Start twice.
    env.start_container(&first).await.unwrap();
    let message = expect_code(env.start_container(&first).await, Code::FailedPrecondition);
    assert!(
        message.contains("CONTAINER_RUNNING") || message.contains("CONTAINER_EXITED"),
        "{message}"
    );
    env.wait_exit(&first, Duration::from_secs(5)).await;
    expect_code(env.start_container(&first).await, Code::FailedPrecondition);
}

#[tokio::test]
async fn malformed_scripts_are_create_errors_naming_problem_and_position() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let cases = [
        (
            "echo a | sleep 1 &",
            &["'&'", "background", "line 1, column 18"][..],
        ),
        (
            "echo $((1 + 2)",
            &["unterminated '$(('", "line 1, column 6"],
        ),
        ("echo `date", &["no closing backquote"]),
        (
            "echo ok\necho \"$(echo a & cat)\"",
            &["background", "line 2, column 16"],
        ),
        ("echo $(oops", &["unterminated '$('", "line 1, column 6"]),
        (
            "echo 'open",
            &["unterminated quoted string", "line 1, column 6"],
        ),
        ("echo \"open", &["unterminated quoted string"]),
        ("sleep 1 &", &["'&'", "background", "line 1, column 9"]),
        ("while true; do sleep 1", &["expected 'done'"]),
        ("if true; then echo", &["expected 'fi'"]),
        ("case x in a) echo", &["expected 'esac'"]),
        ("echo a\n)", &["unexpected ')'", "line 2, column 1"]),
        ("cat 3< /etc/hosts", &["descriptor 3"]),
        ("&& true", &["unexpected"]),
        ("echo >", &["file name"]),
    ];
    for (i, (script, needles)) in cases.iter().enumerate() {
        let name = format!("bad-{i}");
        let message = expect_code(
            env.create(&sandbox, &name, script).await,
            Code::InvalidArgument,
        );
        assert!(
            message.contains(&name),
            "{script:?}: the message names the container: {message}"
        );
        for needle in *needles {
            assert!(
                message.contains(needle),
                "{script:?}: {needle:?} not in {message:?}"
            );
        }
    }
    // Nothing was created, and the names stay free.
    assert!(env.container_ids(None).await.is_empty());
    env.create(&sandbox, "bad-0", "echo a; echo b")
        .await
        .expect("valid script");
}

#[tokio::test]
async fn bad_image_requests() {
    let mut env = Env::start().await;
    for bad in [
        "",
        "Busybox",
        "busy box",
        "busybox:",
        "busybox@sha256:xyz",
        "a//b",
        "-busybox",
    ] {
        let message = expect_code(env.pull(bad).await, Code::InvalidArgument);
        assert!(
            message.contains("invalid image reference"),
            "{bad:?}: {message}"
        );
    }
    let message = expect_code(
        env.pull("registry.invalid/team/app:1.0").await,
        Code::NotFound,
    );
    assert!(
        message.contains("registry.invalid/team/app:1.0"),
        "{message}"
    );
    expect_code(env.pull("registry.invalid:5000/app").await, Code::NotFound);
    let listed = env
        .images
        .list_images(v1::ListImagesRequest { filter: None })
        .await
        .unwrap();
    assert!(
        listed.into_inner().images.is_empty(),
        "failed pulls leave nothing"
    );
}

#[tokio::test]
async fn the_server_still_serves_after_bad_input() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    // A burst of bad requests of every kind…
    for i in 0..20 {
        let _ = env.create(&sandbox, &format!("x{i}"), "echo $(oops").await;
        let _ = env.create_raw("nope", None).await;
        let _ = env.pull("NOT VALID").await;
        let _ = env.status("nope").await;
        let _ = env.exec("nope", &["true"], 1).await;
        let _ = env.start_container("").await;
        let _ = env.stop("", -5).await;
        let _ = env.remove("").await;
        let _ = env
            .create_with(&sandbox, container_config(&format!("y{i}"), &["sh", "-c"]))
            .await;
    }
    // …and it still runs a pod.
    let id = env.run(&sandbox, "ok", "echo fine; exit 0").await;
    let status = env.wait_exit(&id, Duration::from_secs(5)).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (0, "Completed"));
    env.runtime
        .version(v1::VersionRequest::default())
        .await
        .unwrap();
}

//! The command interpreter seen through the CRI: a table of scripts with
//! their exit codes, reasons, logs and timings, the termination message,
//! and SIGTERM handling through StopContainer.

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, LIMIT, container_config, read_log, script_config, stdout_lines};
use nodeconform_cri::v1;

/// A script, what it should do, and how long it should take.
struct Case {
    script: &'static str,
    env: &'static [(&'static str, &'static str)],
    exit: i32,
    stdout: &'static [&'static str],
    /// Text the stderr log must contain.
    stderr: Option<&'static str>,
    /// Bounds on finished_at − started_at.
    at_least: Duration,
    at_most: Duration,
}

const fn case(script: &'static str, exit: i32, stdout: &'static [&'static str]) -> Case {
    Case {
        script,
        env: &[],
        exit,
        stdout,
        stderr: None,
        at_least: Duration::ZERO,
        at_most: Duration::from_millis(900),
    }
}

const CASES: &[Case] = &[
    case("exit 3", 3, &[]),
    case("true", 0, &[]),
    case("false", 1, &[]),
    case(":", 0, &[]),
    case("", 0, &[]),
    case("exit", 0, &[]),
    case("false; exit", 1, &[]),
    case("exit 300", 44, &[]),
    Case {
        at_least: Duration::from_secs(1),
        at_most: Duration::from_millis(2500),
        ..case("sleep 1; exit 3", 3, &[])
    },
    Case {
        at_least: Duration::from_millis(200),
        ..case("sleep 0.2", 0, &[])
    },
    case("false || exit 4", 4, &[]),
    case("true && exit 5", 5, &[]),
    case("true || exit 6", 0, &[]),
    case("false && exit 7", 1, &[]),
    case("false; echo $?", 0, &["1"]),
    case("echo hello world", 0, &["hello world"]),
    case(
        "echo 'single  quoted' \"double $UNSET\"",
        0,
        &["single  quoted double "],
    ),
    case("for i in 1 2; do echo $i; done", 0, &["1", "2"]),
    case(
        "for x in a b c; do echo $x; done; exit 2",
        2,
        &["a", "b", "c"],
    ),
    case("while false; do :; done; exit 9", 9, &[]),
    case("until true; do exit 1; done", 0, &[]),
    case("if true; then echo yes; else echo no; fi", 0, &["yes"]),
    case(
        "if false; then echo 1; elif true; then echo 2; else echo 3; fi",
        0,
        &["2"],
    ),
    case("{ echo a; echo b; }", 0, &["a", "b"]),
    case("echo a\necho b\n# a comment\nexit 6", 6, &["a", "b"]),
    case("sh -c 'exit 7'", 7, &[]),
    case("bash -c 'echo nested'", 0, &["nested"]),
    case("touch /tmp/a; test -e /tmp/a && echo there", 0, &["there"]),
    case("touch /tmp/a; rm /tmp/a; test -e /tmp/a", 1, &[]),
    case("[ 3 -gt 2 ] && [ abc = abc ] && [ -n x ]", 0, &[]),
    case("echo saved > /tmp/f; cat /tmp/f", 0, &["saved"]),
    case(
        "echo one > /tmp/f; echo two >> /tmp/f; cat /tmp/f",
        0,
        &["one", "two"],
    ),
    case("echo hidden > /dev/null; echo shown", 0, &["shown"]),
    Case {
        stderr: Some("No such file"),
        ..case("cat /missing", 1, &[])
    },
    Case {
        stderr: Some("oops"),
        ..case("echo oops >&2; exit 1", 1, &[])
    },
    Case {
        stderr: Some("invalid number"),
        ..case("sleep abc", 1, &[])
    },
    Case {
        env: &[("MYVAR", "from env")],
        ..case("echo $MYVAR ${MYVAR}", 0, &["from env from env"])
    },
    case("echo $HOSTNAME", 0, &["pod"]),
    case("trap 'echo bye' EXIT; echo hi; exit 3", 3, &["hi", "bye"]),
];

#[tokio::test]
async fn script_table() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let mut ids = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let mut config = script_config(&format!("case-{i}"), case.script);
        config.envs = case
            .env
            .iter()
            .map(|(key, value)| v1::KeyValue {
                key: (*key).to_owned(),
                value: value.as_bytes().to_vec(),
            })
            .collect();
        ids.push(env.run_with(&sandbox, config).await);
    }
    let mut failures = Vec::new();
    for (case, id) in CASES.iter().zip(&ids) {
        let status = env.wait_exit(id, LIMIT).await;
        let mut problems = Vec::new();
        if status.exit_code != case.exit {
            problems.push(format!(
                "exit code {} (want {})",
                status.exit_code, case.exit
            ));
        }
        let reason = if case.exit == 0 { "Completed" } else { "Error" };
        if status.reason != reason {
            problems.push(format!("reason {:?} (want {reason:?})", status.reason));
        }
        let stdout = stdout_lines(&status.log_path);
        if stdout != case.stdout {
            problems.push(format!("stdout {stdout:?} (want {:?})", case.stdout));
        }
        let log = read_log(&status.log_path);
        if let Some(wanted) = case.stderr
            && !log
                .iter()
                .any(|e| e.stream == "stderr" && e.text.contains(wanted))
        {
            problems.push(format!("no stderr line with {wanted:?} in {log:?}"));
        }
        let ran = Duration::from_nanos(
            u64::try_from(status.finished_at - status.started_at).unwrap_or(0),
        );
        if ran < case.at_least || ran > case.at_most {
            problems.push(format!(
                "ran {ran:?} (want {:?}..={:?})",
                case.at_least, case.at_most
            ));
        }
        if !problems.is_empty() {
            failures.push(format!("{:?}: {}", case.script, problems.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "script table failures:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn argv_forms() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    // `command` + `args` join; sh -c's extra arguments are $0, $1, …
    let mut config = container_config("args", &["/bin/sh", "-c"]);
    config.args = vec![
        "echo $0 $1; exit $1".to_owned(),
        "name".to_owned(),
        "5".to_owned(),
    ];
    let args = env.run_with(&sandbox, config).await;
    // A builtin run directly, without a shell.
    let direct = env
        .run_with(
            &sandbox,
            container_config("direct", &["/bin/echo", "direct", "$HOME"]),
        )
        .await;
    let status = env.wait_exit(&args, LIMIT).await;
    assert_eq!(status.exit_code, 5);
    assert_eq!(stdout_lines(&status.log_path), ["name 5"]);
    let status = env.wait_exit(&direct, LIMIT).await;
    assert_eq!(status.exit_code, 0);
    assert_eq!(
        stdout_lines(&status.log_path),
        ["direct $HOME"],
        "no expansion without a shell"
    );
}

#[tokio::test]
async fn partial_lines_are_tagged_p() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env
        .run(&sandbox, "c", "echo -n partial; echo ' done'")
        .await;
    let status = env.wait_exit(&id, LIMIT).await;
    let log = read_log(&status.log_path);
    let entries: Vec<(&str, &str)> = log
        .iter()
        .map(|e| (e.tag.as_str(), e.text.as_str()))
        .collect();
    assert_eq!(entries, [("P", "partial"), ("F", " done")]);
}

#[tokio::test]
async fn termination_message_without_a_mount_goes_to_the_status() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env
        .run(&sandbox, "c", "echo msg > /dev/termination-log; exit 1")
        .await;
    let status = env.wait_exit(&id, LIMIT).await;
    assert_eq!(status.message, "msg\n");
    assert_eq!((status.exit_code, status.reason.as_str()), (1, "Error"));
    // Nothing written: no message.
    let quiet = env.run(&sandbox, "quiet", "exit 0").await;
    assert_eq!(env.wait_exit(&quiet, LIMIT).await.message, "");
}

#[tokio::test]
async fn termination_message_goes_to_the_mounted_host_file() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let host = env.dir.path().join("termination-log");
    std::fs::write(&host, "").unwrap();
    let mut config = script_config("c", "echo written > /dev/termination-log");
    config.mounts = vec![v1::Mount {
        container_path: "/dev/termination-log".to_owned(),
        host_path: host.display().to_string(),
        ..Default::default()
    }];
    let id = env.run_with(&sandbox, config).await;
    env.wait_exit(&id, LIMIT).await;
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "written\n");

    // A custom terminationMessagePath, as the kubelet annotates it.
    let custom = env.dir.path().join("custom-log");
    std::fs::write(&custom, "").unwrap();
    let mut config = script_config("custom", "echo custom > /tmp/term; exit 0");
    config.annotations = [(
        "io.kubernetes.container.terminationMessagePath".to_owned(),
        "/tmp/term".to_owned(),
    )]
    .into();
    config.mounts = vec![v1::Mount {
        container_path: "/tmp/term".to_owned(),
        host_path: custom.display().to_string(),
        ..Default::default()
    }];
    let id = env.run_with(&sandbox, config).await;
    env.wait_exit(&id, LIMIT).await;
    assert_eq!(std::fs::read_to_string(&custom).unwrap(), "custom\n");
}

/// Runs `config`, stops it with `timeout` and returns (exit code, reason, how long the stop took).
async fn stop_after_start(config: v1::ContainerConfig, timeout: i64) -> (i32, String, Duration) {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run_with(&sandbox, config).await;
    // Let the script reach its waiting point (trap set up) before signalling.
    wait_until_settled(&mut env, &id).await;
    let started = Instant::now();
    env.stop(&id, timeout).await.expect("StopContainer");
    let took = started.elapsed();
    let status = env.status(&id).await.unwrap();
    assert_eq!(
        status.state,
        v1::ContainerState::ContainerExited as i32,
        "stopped after StopContainer returned"
    );
    (status.exit_code, status.reason, took)
}

/// Waits until the container's script has run its first command: the
/// scripts below touch /tmp/ready first.
async fn wait_until_settled(env: &mut Env, id: &str) {
    tokio::time::timeout(LIMIT, async {
        loop {
            let response = env
                .exec(id, &["test", "-e", "/tmp/ready"], 5)
                .await
                .unwrap();
            if response.exit_code == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the script starts");
}

fn shared_pid(mut config: v1::ContainerConfig) -> v1::ContainerConfig {
    let options = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
        .and_then(|s| s.namespace_options.as_mut())
        .unwrap();
    options.pid = v1::NamespaceMode::Pod as i32;
    config
}

#[tokio::test]
async fn untrapped_pid1_ignores_term_and_is_killed_at_the_timeout() {
    let (exit, reason, took) =
        stop_after_start(script_config("c", "touch /tmp/ready; sleep 600"), 1).await;
    assert_eq!((exit, reason.as_str()), (137, "Error"));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "killed after {took:?}"
    );
}

#[tokio::test]
async fn a_script_waiting_in_a_command_substitution_still_stops() {
    // PID 1 without a trap: SIGTERM is dropped, SIGKILL at the timeout ends it.
    let script = "touch /tmp/ready; echo $(sleep 1000); echo after";
    let (exit, reason, took) = stop_after_start(script_config("c", script), 1).await;
    assert_eq!((exit, reason.as_str()), (137, "Error"));
    assert!(took < Duration::from_secs(3), "killed after {took:?}");
    // Not PID 1: SIGTERM ends it at once, the substitution with it.
    let config = shared_pid(script_config("c", script));
    let (exit, _, took) = stop_after_start(config, 30).await;
    assert_eq!(exit, 143);
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[tokio::test]
async fn untrapped_script_in_a_shared_pid_namespace_dies_of_term() {
    let config = shared_pid(script_config("c", "touch /tmp/ready; sleep 600"));
    let (exit, reason, took) = stop_after_start(config, 30).await;
    assert_eq!((exit, reason.as_str()), (143, "Error"));
    assert!(
        took < Duration::from_secs(1),
        "TERM ended it at once, took {took:?}"
    );
}

#[tokio::test]
async fn term_trap_in_a_sleep_loop_exits_within_a_second() {
    let config = script_config(
        "c",
        "trap 'exit 0' TERM; touch /tmp/ready; while true; do sleep 1; done",
    );
    let (exit, reason, took) = stop_after_start(config, 30).await;
    assert_eq!((exit, reason.as_str()), (0, "Completed"));
    assert!(
        took < Duration::from_millis(2000),
        "the trap runs after the current sleep 1, took {took:?}"
    );
}

#[tokio::test]
async fn term_trap_waits_for_the_running_sleep_so_the_timeout_kills() {
    let config = script_config("c", "trap 'exit 0' TERM; touch /tmp/ready; sleep 600");
    let (exit, reason, took) = stop_after_start(config, 1).await;
    assert_eq!((exit, reason.as_str()), (137, "Error"));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "killed after {took:?}"
    );
}

#[tokio::test]
async fn term_trap_exit_code_is_the_handlers() {
    let config = script_config(
        "c",
        "trap 'echo bye; exit 42' TERM; touch /tmp/ready; while true; do sleep 0.1; done",
    );
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run_with(&sandbox, config).await;
    wait_until_settled(&mut env, &id).await;
    env.stop(&id, 30).await.unwrap();
    let status = env.status(&id).await.unwrap();
    assert_eq!((status.exit_code, status.reason.as_str()), (42, "Error"));
    assert_eq!(stdout_lines(&status.log_path), ["bye"]);
}

#[tokio::test]
async fn stop_with_timeout_zero_kills_at_once() {
    let config = script_config(
        "c",
        "trap 'exit 0' TERM; touch /tmp/ready; while true; do sleep 1; done",
    );
    let (exit, reason, took) = stop_after_start(config, 0).await;
    assert_eq!((exit, reason.as_str()), (137, "Error"));
    assert!(took < Duration::from_millis(1000), "took {took:?}");
}

#[tokio::test]
async fn image_programs_and_no_command_are_servers_that_exit_0_on_term() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let nginx = env
        .run_with(
            &sandbox,
            container_config("nginx", &["nginx", "-g", "daemon off;"]),
        )
        .await;
    let default = env
        .run_with(&sandbox, container_config("default", &[]))
        .await;
    for id in [&nginx, &default] {
        let status = env.status(id).await.unwrap();
        assert_eq!(
            status.state,
            v1::ContainerState::ContainerRunning as i32,
            "a server keeps running"
        );
    }
    for id in [&nginx, &default] {
        let started = Instant::now();
        env.stop(id, 30).await.unwrap();
        // At TERM, not at the end of the 30 s grace period.
        assert!(started.elapsed() < Duration::from_secs(10));
        let status = env.status(id).await.unwrap();
        assert_eq!((status.exit_code, status.reason.as_str()), (0, "Completed"));
    }
}

/// Runs `argv` to its end and returns its exit code and its stderr lines.
async fn run_to_exit(argv: &[&str]) -> (i32, Vec<String>) {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run_with(&sandbox, container_config("c", argv)).await;
    let status = env.wait_exit(&id, LIMIT).await;
    let stderr = read_log(&status.log_path)
        .into_iter()
        .filter(|e| e.stream == "stderr")
        .map(|e| e.text)
        .collect();
    (status.exit_code, stderr)
}

#[tokio::test]
async fn a_command_the_image_lacks_is_not_found_as_busybox_sh_says() {
    assert_eq!(
        run_to_exit(&["sh", "-c", "nosuchprog --flag; echo after $?"]).await,
        (0, vec!["sh: nosuchprog: not found".to_owned()])
    );
    assert_eq!(
        run_to_exit(&["sh", "-c", "/opt/bin/tool"]).await,
        (127, vec!["sh: /opt/bin/tool: not found".to_owned()])
    );
    // A busybox applet fake-cri does not interpret says so, and fails alike.
    let (exit, stderr) = run_to_exit(&["sh", "-c", "date"]).await;
    assert_eq!(exit, 127);
    assert_eq!(
        stderr,
        ["sh: date: the busybox applet is not interpreted by fake-cri"]
    );
}

#[tokio::test]
async fn a_shell_without_input_or_a_script_file_it_cannot_open_ends() {
    // busybox's image default: `sh` with no standard input exits 0 at once.
    assert_eq!(run_to_exit(&["sh"]).await, (0, Vec::new()));
    assert_eq!(
        run_to_exit(&["sh", "/entrypoint.sh"]).await,
        (
            2,
            vec!["sh: can't open '/entrypoint.sh': No such file or directory".to_owned()]
        )
    );
}

#[tokio::test]
async fn tail_f_as_pid_1_ignores_term_and_is_killed_at_the_timeout() {
    // busybox `sh -c` execs `tail`, which as PID 1 has no SIGTERM handler.
    let (exit, reason, took) =
        stop_after_start(script_config("c", "touch /tmp/ready; tail -f /dev/null"), 1).await;
    assert_eq!((exit, reason.as_str()), (137, "Error"));
    assert!(took >= Duration::from_secs(1), "killed after {took:?}");
    // Not PID 1 (a shared process namespace): SIGTERM ends it.
    let (exit, _, _) = stop_after_start(
        shared_pid(script_config("c", "touch /tmp/ready; tail -f /dev/null")),
        30,
    )
    .await;
    assert_eq!(exit, 143);
}

#[tokio::test]
async fn tail_prints_the_last_lines_and_follows_what_is_appended() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env
        .run_with(
            &sandbox,
            script_config(
                "c",
                "echo 1 > /tmp/f; echo 2 >> /tmp/f; echo 3 >> /tmp/f; \
                 tail -n 2 /tmp/f; touch /tmp/ready; tail -n 0 -f /tmp/f",
            ),
        )
        .await;
    wait_until_settled(&mut env, &id).await;
    let appended = env
        .exec(&id, &["sh", "-c", "echo 4 >> /tmp/f"], 5)
        .await
        .unwrap();
    assert_eq!(appended.exit_code, 0);
    let log_path = env.status(&id).await.unwrap().log_path;
    tokio::time::timeout(LIMIT, async {
        while stdout_lines(&log_path) != ["2", "3", "4"] {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("followed: {:?}", stdout_lines(&log_path)));
}

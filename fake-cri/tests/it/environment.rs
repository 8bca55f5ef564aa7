//! What a container's process knows of itself, seen through the CRI: its
//! environment (`env`, `printenv`, `$VAR`), host name and user, the same in
//! the main process and in `ExecSync`; and the forms the interpreter refuses
//! when the container is created.

use crate::common;

use common::{Env, LIMIT, container_config, expect_code, script_config, stdout_lines};
use nodeconform_cri::v1;

const PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn with_envs(mut config: v1::ContainerConfig, envs: &[(&str, &str)]) -> v1::ContainerConfig {
    config.envs = envs
        .iter()
        .map(|(key, value)| v1::KeyValue {
            key: (*key).to_owned(),
            value: value.as_bytes().to_vec(),
        })
        .collect();
    config
}

fn run_as(mut config: v1::ContainerConfig, uid: i64, gid: i64) -> v1::ContainerConfig {
    let security = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
        .expect("security context");
    security.run_as_user = Some(v1::Int64Value { value: uid });
    security.run_as_group = Some(v1::Int64Value { value: gid });
    config
}

/// Runs `config` to its end: (exit code, stdout lines).
async fn run(env: &mut Env, sandbox: &str, config: v1::ContainerConfig) -> (i32, Vec<String>) {
    let id = env.run_with(sandbox, config).await;
    let status = env.wait_exit(&id, LIMIT).await;
    (status.exit_code, stdout_lines(&status.log_path))
}

#[tokio::test]
async fn env_prints_what_containerd_and_runc_set_then_the_clients_envs() {
    let mut env = Env::start().await;
    let mut sandbox_config = env.sandbox_config("pod");
    sandbox_config.hostname = "web-0".to_owned();
    let sandbox = env.run_sandbox(sandbox_config).await.unwrap();
    let envs = [("X", "1"), ("Y", "two words"), ("X", "3")];
    let (exit, stdout) = run(
        &mut env,
        &sandbox,
        with_envs(script_config("c", "env"), &envs),
    )
    .await;
    assert_eq!(exit, 0);
    assert_eq!(
        stdout,
        [
            "HOSTNAME=web-0",
            "SHLVL=1",
            "HOME=/root",
            "X=3",
            PATH,
            "Y=two words",
            "PWD=/"
        ],
        "the default PATH, the sandbox's host name, the envs (the last value wins), HOME from runc, \
         and SHLVL and PWD from sh, in the order of busybox ash's variable table"
    );

    // The classic form without a shell, and the client overriding PATH and HOME.
    let config = with_envs(
        container_config("direct", &["env"]),
        &[("PATH", "/bin"), ("HOME", "/home/app")],
    );
    let (_, stdout) = run(&mut env, &sandbox, config).await;
    assert_eq!(stdout, ["PATH=/bin", "HOSTNAME=web-0", "HOME=/home/app"]);

    let script = "printenv X; echo status $?; printenv NOPE; echo status $?; \
                  echo \"$Y|${X}|$NOPE|\"; hostname; id -u; id -g";
    let (_, stdout) = run(
        &mut env,
        &sandbox,
        with_envs(script_config("p", script), &envs),
    )
    .await;
    assert_eq!(
        stdout,
        [
            "3",
            "status 0",
            "status 1",
            "two words|3||",
            "web-0",
            "0",
            "0"
        ]
    );
}

#[tokio::test]
async fn variables_set_by_the_script() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    // An exported variable stays exported; a new one is the shell's until `export`.
    let script = "X=changed; LOCAL=l; printenv X; printenv LOCAL || echo not-exported; \
                  echo $LOCAL; export LOCAL; printenv LOCAL; FOR_ONE=yes printenv FOR_ONE; \
                  printenv FOR_ONE || echo gone; env A=1 printenv A; unset X; echo \"[$X]\"";
    let (exit, stdout) = run(
        &mut env,
        &sandbox,
        with_envs(script_config("c", script), &[("X", "1")]),
    )
    .await;
    assert_eq!(exit, 0);
    assert_eq!(
        stdout,
        [
            "changed",
            "not-exported",
            "l",
            "l",
            "yes",
            "gone",
            "1",
            "[]"
        ]
    );
}

#[tokio::test]
async fn user_and_host_name_come_from_the_request() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let config = run_as(
        script_config("c", "id -u; id -g; echo $HOME; hostname"),
        1000,
        3000,
    );
    let (_, stdout) = run(&mut env, &sandbox, config).await;
    assert_eq!(stdout, ["1000", "3000", "/", "pod"]);
}

#[tokio::test]
async fn exec_sync_sees_the_same_environment_as_the_main_process() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let config = with_envs(script_config("c", "env; sleep 600"), &[("X", "1")]);
    let id = env.run_with(&sandbox, config).await;
    let response = env.exec(&id, &["env"], 5).await.unwrap();
    let exec_env = String::from_utf8(response.stdout).unwrap();
    assert_eq!(exec_env, format!("{PATH}\nHOSTNAME=pod\nX=1\nHOME=/root\n"));
    let response = env.exec(&id, &["printenv", "X"], 5).await.unwrap();
    assert_eq!(
        (response.exit_code, response.stdout.as_slice()),
        (0, &b"1\n"[..])
    );
    let response = env.exec(&id, &["printenv", "NOPE"], 5).await.unwrap();
    assert_eq!(
        (response.exit_code, response.stdout.as_slice()),
        (1, &b""[..])
    );
    // A form the interpreter does not run: exit 2 with the reason, as `sh` would.
    let response = env.exec(&id, &["ls", "-l", "/"], 5).await.unwrap();
    assert_eq!(response.exit_code, 2);
    assert!(String::from_utf8_lossy(&response.stderr).contains("option -l"));
    env.stop(&id, 0).await.unwrap();
}

#[tokio::test]
async fn unsupported_forms_are_create_errors_naming_the_problem() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    for (script, wanted) in [
        ("echo $((1 + 2)", "unterminated '$(('"),
        ("echo `hostname -i`", "hostname: -i is not interpreted"),
        ("echo $(hostname -i)", "hostname: -i is not interpreted"),
        ("echo \"$(ls -l /)\"", "ls: option -l is not interpreted"),
        ("ls -l /etc", "ls: option -l is not interpreted"),
        ("true; stat /etc/hosts", "stat: a format is needed"),
        ("stat -c %U /f", "format %U"),
        ("id", "only 'id -u' and 'id -g'"),
        ("env -i sh", "env: option -i"),
        ("printenv -0 X", "printenv: option -0"),
        ("cat -n /f", "cat: option -n"),
        ("[ -x /bin/sh ]", "test: '-x /bin/sh' is not interpreted"),
        ("sh -c 'sleep 1 &'", "in the script of sh -c"),
    ] {
        let message = expect_code(
            env.create(&sandbox, "c", script).await,
            tonic::Code::InvalidArgument,
        );
        assert!(message.contains(wanted), "{script:?}: {message}");
        assert!(
            message.contains("at line 1, column"),
            "{script:?}: {message}"
        );
    }
    let message = expect_code(
        env.create_with(&sandbox, container_config("argv", &["/bin/ls", "-la"]))
            .await,
        tonic::Code::InvalidArgument,
    );
    assert!(message.contains("ls: option -l"), "{message}");
    // Words built from variables are checked when they run.
    let config = with_envs(script_config("late", "ls $OPT /"), &[("OPT", "-l")]);
    let (exit, _) = run(&mut env, &sandbox, config).await;
    assert_eq!(exit, 2);
}

/// The sandbox's DNS config is the container's `/etc/resolv.conf`, as containerd
/// writes it; a sandbox without one gives the container none (the host's file is
/// never read).
#[tokio::test]
async fn resolv_conf_comes_from_the_sandbox_dns_config() {
    let mut env = Env::start().await;
    let mut config = env.sandbox_config("dns");
    config.dns_config = Some(v1::DnsConfig {
        servers: vec!["10.96.0.10".into()],
        searches: vec!["ns.svc.cluster.local".into(), "cluster.local".into()],
        options: vec!["ndots:5".into()],
    });
    let sandbox = env.run_sandbox(config).await.unwrap();
    let id = env
        .run_with(&sandbox, script_config("c", "sleep 600"))
        .await;
    let response = env
        .exec(&id, &["cat", "/etc/resolv.conf"], 5)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(response.stdout).unwrap(),
        "search ns.svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
    let plain = env.sandbox("plain").await;
    let id = env.run_with(&plain, script_config("c", "sleep 600")).await;
    let response = env
        .exec(&id, &["cat", "/etc/resolv.conf"], 5)
        .await
        .unwrap();
    assert_eq!(response.exit_code, 1, "no DNS config, no file");
}

/// CRI 1.36 carries variable values as bytes (a kubelet may pass file content); the shell
/// sees text, with what is not UTF-8 replaced.
#[tokio::test]
async fn variable_values_are_bytes() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let mut config = script_config("c", "echo \"$RAW\"");
    config.envs = vec![v1::KeyValue {
        key: "RAW".to_owned(),
        value: b"a\xffb".to_vec(),
    }];
    assert_eq!(
        run(&mut env, &sandbox, config).await,
        (0, vec!["a\u{fffd}b".to_owned()])
    );
}

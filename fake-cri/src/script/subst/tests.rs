//! Command substitution and `hostname -f`: parsing (with positions) and
//! running, through a shell whose output is kept in memory.

use std::time::Duration;

use tokio::sync::mpsc;

use super::super::process_info::canonical_name;
use super::super::{Context, Outcome, Output, Program, Shell, Signal, Stream, parse};

/// The kubelet's hosts file for a pod `mypod` with hostname + subdomain.
const HOSTS: &str = "# Kubernetes-managed hosts file.\n\
    127.0.0.1\tlocalhost\n\
    ::1\tlocalhost ip6-localhost ip6-loopback\n\
    fe00::0\tip6-localnet\n\
    fe00::0\tip6-mcastprefix\n\
    fe00::1\tip6-allnodes\n\
    fe00::2\tip6-allrouters\n\
    10.88.0.5\tmypod.t.ns.svc.cluster.local\tmypod\n";

/// Output kept in memory.
#[derive(Default)]
struct Buffers {
    stdout: String,
    stderr: String,
}

impl Output for Buffers {
    fn write(&mut self, stream: Stream, data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        match stream {
            Stream::Stdout => self.stdout.push_str(&text),
            Stream::Stderr => self.stderr.push_str(&text),
        }
    }
}

fn context_with(hostname: &str, hosts: Option<&str>) -> Context {
    let context = Context {
        hostname: hostname.to_owned(),
        ..Context::default()
    };
    if let Some(hosts) = hosts {
        context
            .files
            .provide("/etc/hosts", hosts.as_bytes().to_vec());
    }
    context
}

fn program(script: &str) -> Program {
    Program::from_argv(&["sh".into(), "-c".into(), script.into()])
        .unwrap_or_else(|e| panic!("{script:?}: {e}"))
}

/// Runs a script as an exec: (exit code, stdout, stderr).
async fn run_in(context: Context, script: &str) -> (i32, String, String) {
    let mut out = Buffers::default();
    let outcome = Shell::exec(context, &mut out).run(&program(script)).await;
    (outcome.exit_code, out.stdout, out.stderr)
}

async fn run(script: &str) -> (i32, String, String) {
    run_in(context("mypod", Some(HOSTS)), script).await
}

fn err(script: &str) -> String {
    parse(script).unwrap_err().to_string()
}

#[test]
fn parse_errors_inside_a_substitution_have_the_whole_scripts_positions() {
    assert_eq!(
        err("echo $(ls -l /)"),
        "ls: option -l is not interpreted (only -1, -a and -A: names, one per line) at line 1, column 8"
    );
    assert_eq!(
        err("echo a\necho \"$(echo x & cat)\""),
        "unsupported syntax '&' (background jobs are not interpreted) at line 2, column 16"
    );
    assert_eq!(
        err("x=$(\n  echo a\n  echo $(id))"),
        "id: only 'id -u' and 'id -g' are interpreted, not 'id ' (fake-cri has no /etc/passwd to name users) at line 3, column 10"
    );
    assert_eq!(
        err("echo ok; echo $(echo 'a)"),
        "unterminated '$(' (no matching ')') at line 1, column 15"
    );
    // At the end of the inner script: its last token, as for a whole script.
    assert_eq!(
        err("echo $(if true)"),
        "expected 'then' at line 1, column 11"
    );
    assert_eq!(
        err("echo $((1 + 2)"),
        "unterminated '$((' (no matching '))') at line 1, column 6"
    );
    assert!(err("echo `hostname -i`").contains("hostname: -i is not interpreted"));
    assert!(err("echo $(hostname -i)").contains("hostname: -i is not interpreted"));
}

#[test]
fn substitutions_parse_with_quotes_comments_and_nesting() {
    for script in [
        "echo $(hostname)';'$(hostname -f)';'",
        "echo \"$(hostname)\"",
        "echo $(echo $(echo x))",
        "echo $(echo ')' \")\" \\))",
        "echo \"$(echo \")\")\"",
        "echo $(echo x # a comment with )\n)",
        "x=$(exit 3)",
        "echo $()",
        "for i in $(echo a) b; do echo $i; done",
    ] {
        parse(script).unwrap_or_else(|e| panic!("{script:?}: {e}"));
    }
}

#[tokio::test]
async fn the_upstream_fqdn_test_line() {
    let script = "echo $(hostname)';'$(hostname -f)';'";
    assert_eq!(
        run(script).await,
        (
            0,
            "mypod;mypod.t.ns.svc.cluster.local;\n".into(),
            String::new()
        )
    );
    // Without a subdomain the kubelet writes the pod name alone.
    let plain = HOSTS.replace("mypod.t.ns.svc.cluster.local\t", "");
    let context = context("mypod", Some(&plain));
    assert_eq!(run_in(context, script).await.1, "mypod;mypod;\n");
    // setHostnameAsFQDN: the host name is the FQDN, the canonical name.
    let fqdn = "mypod.t.ns.svc.cluster.local";
    let (_, stdout, _) = run_in(context_fqdn(fqdn), script).await;
    assert_eq!(stdout, format!("{fqdn};{fqdn};\n"));
}

fn context(hostname: &str, hosts: Option<&str>) -> Context {
    context_with(hostname, hosts)
}

fn context_fqdn(fqdn: &str) -> Context {
    context_with(fqdn, Some(HOSTS))
}

#[tokio::test]
async fn hostname_f_without_a_hosts_entry_is_an_unknown_host() {
    let expected = (1, String::new(), "hostname: mypod: Unknown host\n".into());
    assert_eq!(
        run_in(context("mypod", None), "hostname -f").await,
        expected
    );
    let other = "127.0.0.1 localhost\n# 10.0.0.1 mypod\n";
    assert_eq!(
        run_in(context("mypod", Some(other)), "hostname --fqdn").await,
        expected
    );
    let (code, stdout, stderr) = run_in(context("mypod", None), "echo $(hostname -f)';'").await;
    assert_eq!((code, stdout.as_str()), (0, ";\n"));
    assert_eq!(stderr, "hostname: mypod: Unknown host\n");
}

#[test]
fn canonical_names() {
    assert_eq!(
        canonical_name(HOSTS, "mypod"),
        Some("mypod.t.ns.svc.cluster.local")
    );
    assert_eq!(canonical_name(HOSTS, "ip6-localhost"), Some("localhost"));
    assert_eq!(
        canonical_name(HOSTS, "MyPod"),
        Some("mypod.t.ns.svc.cluster.local")
    );
    assert_eq!(canonical_name("1.2.3.4 a b # mypod\n", "mypod"), None);
    assert_eq!(canonical_name("mypod\n\n", "mypod"), None);
    assert_eq!(canonical_name("", "mypod"), None);
}

#[tokio::test]
async fn expansion() {
    for (script, stdout) in [
        ("echo $(echo $(echo x))", "x\n"),
        ("echo \"$(hostname)\"", "mypod\n"),
        ("echo \"$(echo 'a  b')\"", "a  b\n"),
        ("echo $(echo ')' \")\" \\))", ") ) )\n"),
        ("echo \"$(echo \")\")\"", ")\n"),
        ("echo \"[$(echo a; echo; echo)]\"", "[a]\n"),
        ("echo \"$(echo a; echo b)\"", "a\nb\n"),
        ("echo [$()]", "[]\n"),
        ("x=1; echo $(x=2; echo $x) $x", "2 1\n"),
        ("false; echo $(echo $?)", "1\n"),
        ("set_by=$(echo v); echo $set_by", "v\n"),
        ("for i in $(echo a) b; do echo $i; done", "a\nb\n"),
        ("echo $(echo hi > /tmp/f; cat /tmp/f)", "hi\n"),
        ("echo $(echo out > /dev/stdout)", "out\n"),
        // No field splitting (as for variables): the newline stays.
        ("echo $(trap 'echo bye' EXIT; echo hi)", "hi bye\n"),
    ] {
        assert_eq!(
            run(script).await,
            (0, stdout.to_owned(), String::new()),
            "{script:?}"
        );
    }
}

#[tokio::test]
async fn a_command_it_does_not_run_ends_at_once_and_says_why() {
    // Not a server: the substitution ends, with busybox's message for a program
    // the image lacks, or fake-cri's for an applet it does not interpret.
    assert_eq!(
        run("x=$(nosuchprog); echo [$x] $?").await,
        (
            0,
            "[] 127\n".to_owned(),
            "sh: nosuchprog: not found\n".to_owned()
        )
    );
    let (status, stdout, stderr) = run("echo [$(date)]").await;
    assert_eq!((status, stdout.as_str()), (0, "[]\n"));
    assert!(
        stderr.contains("date: the busybox applet is not interpreted"),
        "{stderr}"
    );
}

#[tokio::test]
async fn exit_inside_ends_only_the_subshell_and_sets_the_status() {
    assert_eq!(
        run("x=$(echo a; exit 3; echo b); echo $? $x").await.1,
        "3 a\n"
    );
    assert_eq!(run("x=$(true); echo $?").await.1, "0\n");
    assert_eq!(run("false; x=1; echo $?").await.1, "0\n");
    assert_eq!(run("x=$(exit 5)").await.0, 5);
}

#[tokio::test]
async fn stderr_is_not_captured_nor_redirected_with_the_command() {
    let (code, stdout, stderr) = run("echo [$(echo err >&2; echo out)]").await;
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "[out]\n", "err\n")
    );
    // Words are expanded before the command's redirections, as in sh.
    let (_, stdout, stderr) = run("echo $(echo err >&2) 2>/dev/null; cat /x 2>/dev/null").await;
    assert_eq!((stdout.as_str(), stderr.as_str()), ("\n", "err\n"));
}

/// Runs a script as a container's main process and sends `signal` once it
/// has started; the outcome and the stdout.
async fn signalled(script: &str, pid1: bool, signal: Signal) -> (Outcome, String) {
    let program = program(script);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let main = async {
        let mut out = Buffers::default();
        let outcome = Shell::main(context("mypod", None), &mut out, &mut rx, pid1)
            .run(&program)
            .await;
        (outcome, out.stdout)
    };
    let send = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = tx.send(signal);
    };
    let (result, ()) =
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(main, send) })
            .await
            .expect("the signal ended the script");
    result
}

#[tokio::test]
async fn signals_end_a_script_waiting_in_a_substitution() {
    let kill = Signal::Kill { oom: false };
    let (outcome, stdout) = signalled("echo $(sleep 1000); echo after", true, kill).await;
    assert_eq!((outcome.exit_code, stdout.as_str()), (137, ""));
    let (outcome, _) = signalled("x=$(sleep infinity)", false, Signal::Term).await;
    assert_eq!(outcome.exit_code, 143);
    // A trapped TERM waits for the command in progress, substitution included.
    let script = "trap 'echo trapped; exit 9' TERM; echo $(sleep 0.3; echo done)";
    let (outcome, stdout) = signalled(script, true, Signal::Term).await;
    assert_eq!((outcome.exit_code, stdout.as_str()), (9, "done\ntrapped\n"));
}

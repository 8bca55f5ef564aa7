//! `curl URL`: an HTTP GET from the container, as upstream's exec hooks run
//! it (`curl http://<handler pod IP>:8080/echo?msg=poststart`). It reaches
//! addresses on this host only (pods' addresses are on loopback; see
//! [`client`](crate::servers::client)); `localhost` is the pod's own address.
//! Messages and exit codes are curl 8's; no progress meter is drawn.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::shell::{Shell, Stream};
use crate::servers::client::{self, GetError};

/// A `curl` command line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Curl {
    /// The host as written (an address, `localhost` or a name).
    pub host: String,
    pub port: u16,
    /// The path and query.
    pub target: String,
    /// `-s`: no error messages (unless `-S`).
    pub silent: bool,
    /// `-S`: error messages even when silent.
    pub show_error: bool,
    /// `-f`: an HTTP error status is a failure (exit 22) and prints no body.
    pub fail: bool,
    /// `-m SECONDS`: the whole operation's limit.
    pub max_time: Option<Duration>,
    /// `-o FILE`: the body goes to a file instead of stdout.
    pub output: Option<String>,
}

const FORMS: &str = "only 'curl [-sSf] [-m SECONDS] [-o FILE] http://HOST[:PORT]/PATH'";

impl Curl {
    pub(super) fn parse(args: &[String]) -> Result<Self, String> {
        let (mut silent, mut show_error, mut fail) = (false, false, false);
        let (mut max_time, mut output, mut url) = (None, None, None);
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let mut value = |name: &str| {
                words
                    .next()
                    .cloned()
                    .ok_or(format!("curl: option {name}: requires parameter"))
            };
            match word.as_str() {
                "--silent" => silent = true,
                "--show-error" => show_error = true,
                "--fail" => fail = true,
                "-m" | "--max-time" | "--connect-timeout" => {
                    let seconds = value(word)?;
                    let limit = seconds
                        .parse::<f64>()
                        .ok()
                        .and_then(|s| Duration::try_from_secs_f64(s).ok())
                        .ok_or(format!(
                            "curl: option {word}: expected a proper numerical parameter"
                        ))?;
                    max_time = Some(limit);
                }
                "-o" | "--output" => output = Some(value(word)?),
                flags if flags.starts_with('-') && !flags.starts_with("--") && flags.len() > 1 => {
                    for flag in flags[1..].chars() {
                        match flag {
                            's' => silent = true,
                            'S' => show_error = true,
                            'f' => fail = true,
                            other => {
                                return Err(format!(
                                    "curl: option -{other} is not interpreted ({FORMS})"
                                ));
                            }
                        }
                    }
                }
                option if option.starts_with("--") => {
                    return Err(format!(
                        "curl: option {option} is not interpreted ({FORMS})"
                    ));
                }
                _ if url.is_some() => {
                    return Err(format!("curl: one URL is interpreted ({FORMS})"));
                }
                address => url = Some(address.to_owned()),
            }
        }
        let url = url.ok_or(format!("curl: no URL specified ({FORMS})"))?;
        let (host, port, target) = split_url(&url)?;
        Ok(Self {
            host,
            port,
            target,
            silent,
            show_error,
            fail,
            max_time,
            output,
        })
    }
}

/// `http://HOST[:PORT][/PATH][?QUERY]` → (host, port, target).
fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "curl: {scheme}:// is not interpreted (fake-cri simulates no TLS; {FORMS})"
            ));
        }
        None => url,
    };
    let (authority, target) = match rest.find(['/', '?']) {
        Some(at) if rest[at..].starts_with('/') => (&rest[..at], rest[at..].to_owned()),
        Some(at) => (&rest[..at], format!("/{}", &rest[at..])),
        None => (rest, "/".to_owned()),
    };
    let bad_port = || {
        format!(
            "curl: (3) URL rejected: Port number was not a decimal number between 0 and 65535 ({url})"
        )
    };
    let (host, port) = match authority.strip_prefix('[') {
        // `[v6]` or `[v6]:PORT`
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, "")) => (host, 80),
            Some((host, port)) => {
                let port = port.strip_prefix(':').and_then(|p| p.parse().ok());
                (host, port.ok_or_else(bad_port)?)
            }
            None => return Err(format!("curl: (3) URL rejected: Bad IPv6 address ({url})")),
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad_port())?),
            None => (authority, 80),
        },
    };
    if host.is_empty() {
        return Err(format!(
            "curl: (3) URL rejected: No host part in the URL ({url})"
        ));
    }
    Ok((host.to_owned(), port, target))
}

impl Shell<'_> {
    /// `curl`: see the module documentation.
    pub(super) async fn curl(&mut self, args: &[String]) -> i32 {
        let curl = match Curl::parse(args) {
            Ok(curl) => curl,
            Err(message) => return self.usage(&message),
        };
        let own = self.context.address.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let ip = match curl.host.as_str() {
            // The pod's own loopback: its containers' servers.
            "localhost" => own,
            host => match host.parse::<IpAddr>() {
                Ok(ip) if ip == IpAddr::from([127, 0, 0, 1]) => own,
                Ok(ip) => ip,
                Err(_) => {
                    let message = format!("Could not resolve host: {host}");
                    return self.curl_failed(&curl, 6, &message);
                }
            },
        };
        let addr = SocketAddr::new(ip, curl.port);
        let started = Instant::now();
        let limit = curl.max_time.unwrap_or(Duration::MAX);
        let reply = match client::get(addr, &curl.target, "curl/8.5.0", limit).await {
            Ok(reply) => reply,
            Err(error) => {
                let ms = started.elapsed().as_millis();
                let (code, message) = match error {
                    GetError::Timeout => (
                        28,
                        format!(
                            "Operation timed out after {ms} milliseconds with 0 bytes received"
                        ),
                    ),
                    GetError::OffHost(_) => (
                        7,
                        format!(
                            "Failed to connect to {} port {} after 0 ms: {error}",
                            curl.host, curl.port
                        ),
                    ),
                    GetError::Connect(_) => (
                        7,
                        format!(
                            "Failed to connect to {} port {} after {ms} ms: Couldn't connect to server",
                            curl.host, curl.port
                        ),
                    ),
                    GetError::Http(_) => {
                        (56, "Failure when receiving data from the peer".to_owned())
                    }
                };
                return self.curl_failed(&curl, code, &message);
            }
        };
        if curl.fail && reply.status >= 400 {
            let message = format!("The requested URL returned error: {}", reply.status);
            return self.curl_failed(&curl, 22, &message);
        }
        match &curl.output {
            None => self.emit_bytes(Stream::Stdout, &reply.body),
            Some(path) => {
                if let Err(error) = self.context.files.write(path, &reply.body, false) {
                    let message = format!("Failed to open the file {path}: {error}");
                    return self.curl_failed(&curl, 23, &message);
                }
            }
        }
        0
    }

    /// Reports curl error `code` (unless silenced) and returns it.
    fn curl_failed(&mut self, curl: &Curl, code: i32, message: &str) -> i32 {
        if !curl.silent || curl.show_error {
            self.emit(Stream::Stderr, &format!("curl: ({code}) {message}\n"));
        }
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Curl, String> {
        Curl::parse(
            &line
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn upstream_hook_forms() {
        let hook = parse("http://127.0.0.9:8080/echo?msg=poststart").unwrap();
        assert_eq!(
            (hook.host.as_str(), hook.port, hook.target.as_str()),
            ("127.0.0.9", 8080, "/echo?msg=poststart")
        );
        let quiet = parse("-sSf -m 5 -o /tmp/out localhost").unwrap();
        assert!(quiet.silent && quiet.show_error && quiet.fail);
        assert_eq!(quiet.max_time, Some(Duration::from_secs(5)));
        assert_eq!((quiet.port, quiet.target.as_str()), (80, "/"));
        assert_eq!(parse("http://[::1]:81?x=1").unwrap().target, "/?x=1");
        assert_eq!(parse("http://[::1]:81").unwrap().host, "::1");
        assert_eq!(parse("http://[::1]/").unwrap().port, 80);
    }

    #[test]
    fn refused_forms_say_why() {
        for (line, says) in [
            ("https://127.0.0.1/", "no TLS"),
            ("-X POST http://a/", "-X"),
            ("--data x http://a/", "--data"),
            ("http://a/ http://b/", "one URL"),
            ("-s", "no URL"),
            ("http://a:x/", "Port number"),
            ("-m", "requires parameter"),
        ] {
            let error = parse(line).unwrap_err();
            assert!(error.contains(says), "{line}: {error}");
        }
    }
}

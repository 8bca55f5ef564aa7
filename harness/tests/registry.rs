//! The registry a `--runtime containerd` run serves the image archives from answers the
//! distribution API's pull requests as a registry does (the manifest by tag and by digest,
//! blobs that hash to their digest, `HEAD`, the error codes), over a real socket.
//!
//! Needs Debian's busybox-static (`/bin/busybox`) to build the images; without it the
//! test is ignored and says why.

use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use nodeconform_harness::images::{self, registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let busybox = images::Sources::default().busybox;
    let no_busybox = (!busybox.is_file()).then(|| {
        format!(
            "{} is missing (Debian's busybox-static builds the test images)",
            busybox.display()
        )
    });
    let name = "images::registry-answers-as-a-registry";
    if let Some(reason) = &no_busybox
        && !args.list
    {
        eprintln!("note: {name} is ignored: {reason}");
    }
    let trial = Trial::test(name, || registry_answers().map_err(Failed::from))
        .with_ignored_flag(no_busybox.is_some());
    libtest_mimic::run(&args, vec![trial]).exit_code()
}

/// An HTTP/1.1 exchange with the registry: the status, the headers (lower-case names) and
/// the body.
async fn request(port: u16, method: &str, path: &str) -> Result<Response, String> {
    request_as(port, method, path, None).await
}

/// [`request`] with an `Authorization` header.
async fn request_as(
    port: u16,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> Result<Response, String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let authorization = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of the response head")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

struct Response {
    status: u16,
    headers: std::collections::HashMap<String, String>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    fn error_code(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v["errors"][0]["code"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

fn sha256(data: &[u8]) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, data);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn registry_answers() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    images::build(dir.path(), &images::Sources::default()).map_err(|e| e.to_string())?;
    let content = Arc::new(registry::Content::read(dir.path()).map_err(|e| e.to_string())?);
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let registry = registry::Registry::start(content)
            .await
            .map_err(|e| e.to_string())?;
        let port = registry.port();
        let hosts: Vec<&String> = registry.hosts().iter().collect();
        if hosts != ["docker.io", "gcr.io", "registry.k8s.io"] {
            return Err(format!("the registries mirrored: {hosts:?}"));
        }
        let base = request(port, "GET", "/v2/").await?;
        if base.status != 200 || base.header("docker-distribution-api-version") != "registry/2.0" {
            return Err(format!("GET /v2/: {} {:?}", base.status, base.headers));
        }
        let manifest = request(
            port,
            "GET",
            "/v2/library/busybox/manifests/1.36?ns=docker.io",
        )
        .await?;
        let digest = manifest.header("docker-content-digest").to_owned();
        if manifest.status != 200
            || manifest.header("content-type") != "application/vnd.oci.image.manifest.v1+json"
            || digest != sha256(&manifest.body)
        {
            return Err(format!(
                "GET busybox:1.36's manifest: {} {:?}",
                manifest.status, manifest.headers
            ));
        }
        let by_digest = request(
            port,
            "HEAD",
            &format!("/v2/library/busybox/manifests/{digest}"),
        )
        .await?;
        if by_digest.status != 200
            || !by_digest.body.is_empty()
            || by_digest.header("content-length") != manifest.body.len().to_string()
        {
            return Err(format!(
                "HEAD of the manifest by digest: {} {:?}",
                by_digest.status, by_digest.headers
            ));
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&manifest.body).map_err(|e| e.to_string())?;
        let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
        for blob in layers.iter().chain([&manifest["config"]]) {
            let digest = blob["digest"].as_str().unwrap_or_default();
            let got = request(port, "GET", &format!("/v2/library/busybox/blobs/{digest}")).await?;
            if got.status != 200 || sha256(&got.body) != digest {
                return Err(format!(
                    "GET blob {digest}: {} (its bytes hash to {})",
                    got.status,
                    sha256(&got.body)
                ));
            }
        }
        // The private image: a 401 with a Basic challenge without its login or with another,
        // its manifest and blobs with it.
        let private = "/v2/authenticated-image-pulling/alpine/manifests/3.7?ns=gcr.io";
        let login = images::private::basic_authorization(images::private::LOGIN);
        let wrong = images::private::basic_authorization("nodeconform:wrong");
        for authorization in [None, Some(wrong.as_str())] {
            let got = request_as(port, "GET", private, authorization).await?;
            if got.status != 401
                || got.error_code() != "UNAUTHORIZED"
                || !got.header("www-authenticate").starts_with("Basic ")
            {
                return Err(format!(
                    "GET the private manifest with {authorization:?}: {} {:?}",
                    got.status, got.headers
                ));
            }
        }
        let got = request_as(port, "GET", private, Some(&login)).await?;
        let config: serde_json::Value =
            serde_json::from_slice(&got.body).map_err(|e| e.to_string())?;
        let config = config["config"]["digest"].as_str().unwrap_or_default();
        let blob = format!("/v2/authenticated-image-pulling/alpine/blobs/{config}");
        let (without, with) = (
            request(port, "GET", &blob).await?,
            request_as(port, "GET", &blob, Some(&login)).await?,
        );
        if got.status != 200 || without.status != 401 || with.status != 200 {
            return Err(format!(
                "the private image with its login: manifest {}, config blob {} ({} without it)",
                got.status, with.status, without.status
            ));
        }
        for (method, path, status, code) in [
            (
                "GET",
                "/v2/library/busybox/manifests/9.99?ns=docker.io",
                404,
                "MANIFEST_UNKNOWN",
            ),
            (
                "GET",
                "/v2/library/busybox/manifests/1.36?ns=quay.io",
                404,
                "NAME_UNKNOWN",
            ),
            (
                "GET",
                "/v2/library/nosuch/manifests/latest",
                404,
                "NAME_UNKNOWN",
            ),
            ("HEAD", "/v2/library/busybox/blobs/sha256:0000", 404, ""),
            (
                "GET",
                "/v2/library/busybox/blobs/sha256:0000",
                404,
                "BLOB_UNKNOWN",
            ),
            (
                "POST",
                "/v2/library/busybox/blobs/uploads/",
                405,
                "UNSUPPORTED",
            ),
        ] {
            let got = request(port, method, path).await?;
            if got.status != status || (method != "HEAD" && got.error_code() != code) {
                return Err(format!(
                    "{method} {path}: {} {}, expected {status} {code}",
                    got.status,
                    String::from_utf8_lossy(&got.body)
                ));
            }
        }
        Ok(())
    })
}

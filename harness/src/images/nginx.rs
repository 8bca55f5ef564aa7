//! `registry.k8s.io/e2e-test-images/nginx:1.14-4` from Debian's `nginx` package: the
//! nginx binary with its libraries over the busybox layer (the real image is
//! `nginx:1.14-alpine`, whose shell is busybox too), with the official image's
//! configuration, layout and command.
//!
//! What the real image has and this keeps: the `nginx` user (101:101) its workers run
//! as, `/etc/nginx/nginx.conf` with `conf.d/default.conf` serving
//! `/usr/share/nginx/html` on port 80, the access log linked to `/dev/stdout` (the
//! error log goes to stderr), and `nginx -g 'daemon off;'` as the command, so the
//! master is PID 1 and SIGTERM ends it at once. What differs: nginx 1.22 (Debian
//! bookworm's), not 1.14, built with Debian's paths (`/var/lib/nginx` for its
//! temporary files, `/run/nginx.pid`).

use std::path::{Path, PathBuf};

use super::oci::Layer;
use super::{Error, dynamic};

/// Where Debian's `nginx` and `nginx-common` put the files the image takes.
#[derive(Debug, Clone)]
pub struct Files {
    /// The nginx binary (`/usr/sbin/nginx`).
    pub binary: PathBuf,
    /// Its MIME types (`/etc/nginx/mime.types`, of `nginx-common`).
    pub mime_types: PathBuf,
}

impl Files {
    /// `binary`, with `nginx-common`'s MIME types.
    pub fn with_binary(binary: PathBuf) -> Self {
        Self {
            binary,
            mime_types: PathBuf::from("/etc/nginx/mime.types"),
        }
    }

    /// Debian's paths, when the package is installed.
    pub fn debian() -> Option<Self> {
        let files = Self::with_binary(PathBuf::from("/usr/sbin/nginx"));
        (files.binary.is_file() && files.mime_types.is_file()).then_some(files)
    }
}

/// The references of the image.
pub const TAGS: [&str; 1] = ["registry.k8s.io/e2e-test-images/nginx:1.14-4"];

/// The official image's command.
pub fn command() -> Vec<String> {
    ["nginx", "-g", "daemon off;"].map(String::from).to_vec()
}

/// The official image's `/etc/nginx/nginx.conf`, without what Debian's build does not
/// need (its modules are built in).
const NGINX_CONF: &str = "user  nginx;\n\
worker_processes  1;\n\
\n\
error_log  /var/log/nginx/error.log warn;\n\
pid        /var/run/nginx.pid;\n\
\n\
events {\n    worker_connections  1024;\n}\n\
\n\
http {\n\
    include       /etc/nginx/mime.types;\n\
    default_type  application/octet-stream;\n\
    log_format  main  '$remote_addr - $remote_user [$time_local] \"$request\" '\n\
                      '$status $body_bytes_sent \"$http_referer\" '\n\
                      '\"$http_user_agent\" \"$http_x_forwarded_for\"';\n\
    access_log  /var/log/nginx/access.log  main;\n\
    sendfile        on;\n\
    keepalive_timeout  65;\n\
    include /etc/nginx/conf.d/*.conf;\n\
}\n";

/// The official image's `/etc/nginx/conf.d/default.conf`.
const DEFAULT_CONF: &str = "server {\n\
    listen       80;\n\
    server_name  localhost;\n\
    location / {\n\
        root   /usr/share/nginx/html;\n\
        index  index.html index.htm;\n\
    }\n\
    error_page   500 502 503 504  /50x.html;\n\
    location = /50x.html {\n\
        root   /usr/share/nginx/html;\n\
    }\n\
}\n";

/// The official image's welcome page, in short.
const INDEX_HTML: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n\
</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n";

/// The `nginx` user and group of the alpine image, added to busybox's.
const USER: &str = "nginx:x:101:101:nginx:/var/cache/nginx:/sbin/nologin\n";
const GROUP: &str = "nginx:x:101:nginx\n";

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// The layer over busybox's: nginx and its libraries, the configuration, the page, the
/// log links and the directories nginx writes to.
pub fn layer(files: &Files) -> Result<impl FnOnce() -> std::io::Result<Layer>, Error> {
    let programs = dynamic::files(&files.binary)?;
    let mime_types = read(&files.mime_types)?;
    Ok(move || {
        let mut layer = Layer::new();
        for (dir, mode) in [
            ("etc/nginx", 0o755),
            ("etc/nginx/conf.d", 0o755),
            ("usr/share/nginx", 0o755),
            ("usr/share/nginx/html", 0o755),
            ("var/cache/nginx", 0o755),
            ("var/lib/nginx", 0o755),
            ("var/log/nginx", 0o755),
            ("run", 0o755),
        ] {
            layer.dir(dir, mode)?;
        }
        for (path, content) in &programs {
            layer.file(path, 0o755, content)?;
        }
        layer.file("etc/nginx/nginx.conf", 0o644, NGINX_CONF.as_bytes())?;
        layer.file(
            "etc/nginx/conf.d/default.conf",
            0o644,
            DEFAULT_CONF.as_bytes(),
        )?;
        layer.file("etc/nginx/mime.types", 0o644, &mime_types)?;
        layer.file(
            "usr/share/nginx/html/index.html",
            0o644,
            INDEX_HTML.as_bytes(),
        )?;
        layer.symlink("var/log/nginx/access.log", "/dev/stdout")?;
        layer.symlink("var/log/nginx/error.log", "/dev/stderr")?;
        layer.symlink("var/run", "/run")?;
        layer.file(
            "etc/passwd",
            0o644,
            format!("{}{USER}", super::PASSWD).as_bytes(),
        )?;
        layer.file(
            "etc/group",
            0o644,
            format!("{}{GROUP}", super::GROUP).as_bytes(),
        )?;
        Ok(layer)
    })
}

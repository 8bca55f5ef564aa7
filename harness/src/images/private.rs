//! The private image of upstream's pull tests (`gcr.io/authenticated-image-pulling/alpine:3.7`,
//! runtime.go's "pull from private registry with/without secret"), as busybox: the alpine
//! image's shell is busybox too, and the tests only run `sh`.
//!
//! Upstream's registry demands a real service-account key; the run's [`super::registry`]
//! demands the login its image carries in a label instead ([`LOGIN`], which the case's pull
//! secret holds), answering `401` with a `Basic` challenge to a pull without it, as a
//! registry does. A private image is never imported into a node's containerd: it is on no
//! node until a pull with the login brings it.

/// The image config label naming the login (`user:password`) its registry demands.
pub const LOGIN_LABEL: &str = "org.nodeconform.registry-login";

/// The login of the private image, as the case's pull secret has it.
pub const LOGIN: &str = "nodeconform:not-a-secret";

/// The references of the private image.
pub const TAGS: [&str; 1] = ["gcr.io/authenticated-image-pulling/alpine:3.7"];

/// The login an image config (`{"config": {"Labels": …}}`) demands, if any.
pub fn login(config: &serde_json::Value) -> Option<&str> {
    config["config"]["Labels"][LOGIN_LABEL].as_str()
}

/// The `Authorization` header value that carries `login`.
pub fn basic_authorization(login: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(login)
    )
}

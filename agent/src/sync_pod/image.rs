//! The image manager's `EnsureImageExists`: pull policy, pull back-off and
//! image reference validation.

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::Api;
use tokio::time::Instant;

use super::{Context, PodState, earliest};
use crate::backoff::go_duration;
use crate::events::Type;
use crate::keyring;
use crate::pod_status::Reason;

/// The effective pull policy: the spec's, else `Always` for `:latest` or no tag, else `IfNotPresent`.
pub fn pull_policy(container: &Container) -> &str {
    if let Some(p) = container.image_pull_policy.as_deref() {
        if p == "Always" && crate::mutants::active(crate::mutants::Mutant::PullAlwaysIgnored) {
            return "IfNotPresent";
        }
        return p;
    }
    let image = container.image.as_deref().unwrap_or_default();
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None | Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// Whether `image` is a valid image reference (`docker/reference` grammar, simplified).
pub fn valid_reference(image: &str) -> bool {
    if image.is_empty() || image.len() > 255 || image.chars().any(|c| c.is_whitespace()) {
        return false;
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let Some((algo, hex)) = d.split_once(':') else {
            return false;
        };
        if algo.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    let (name, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if let Some(tag) = tag {
        let mut chars = tag.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !first_ok
            || tag.len() > 128
            || !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return false;
        }
    }
    let mut components: Vec<&str> = name.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        if first.contains('.') || first.contains(':') || first == "localhost" {
            let ok = !first.is_empty()
                && first
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
            if !ok {
                return false;
            }
            components.remove(0);
        }
    }
    components.iter().all(|c| {
        !c.is_empty()
            && c.chars().all(|ch| {
                ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-')
            })
            && c.chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphanumeric())
            && c.chars()
                .last()
                .is_some_and(|ch| ch.is_ascii_alphanumeric())
    })
}

/// `EnsureImageExists`: applies the pull policy and the pull back-off.
pub(super) async fn ensure_image(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    container: &Container,
    sandbox_config: &nodeconform_cri::v1::PodSandboxConfig,
    wake: &mut Option<Instant>,
) -> Result<(), Reason> {
    let image = container.image.as_deref().unwrap_or_default();
    let event = |type_, reason, message: String| {
        ctx.events
            .pod(pod, Some(&container.name), type_, reason, message.clone());
        message
    };
    if !valid_reference(image) {
        return Err(Reason {
            reason: "InvalidImageName".into(),
            message: event(
                Type::Warning,
                "InspectFailed",
                format!(
                    "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: invalid reference format"
                ),
            ),
        });
    }
    let policy = pull_policy(container);
    let present = if policy == "Always" {
        false
    } else {
        match ctx.runtime.image_size(image).await {
            Ok(size) => size.is_some(),
            Err(error) => {
                *wake = earliest(*wake, Instant::now() + ctx.timings.image_backoff_initial);
                return Err(Reason {
                    reason: "ErrImageInspect".into(),
                    message: format!(
                        "Failed to inspect image {image:?}: {}",
                        error.short_message()
                    ),
                });
            }
        }
    };
    if present {
        event(
            Type::Normal,
            "Pulled",
            format!("Container image {image:?} already present on machine"),
        );
        return Ok(());
    }
    if policy == "Never" {
        return Err(Reason {
            reason: "ErrImageNeverPull".into(),
            message: event(
                Type::Warning,
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            ),
        });
    }
    let key = format!(
        "{}_{image}",
        pod.metadata.uid.as_deref().unwrap_or_default()
    );
    let now = Instant::now();
    if state.image.is_in_backoff_since_update(&key, now) {
        *wake = earliest(*wake, state.image.expiry_since_update(&key));
        return Err(Reason {
            reason: "ImagePullBackOff".into(),
            message: event(
                Type::Normal,
                "BackOff",
                format!("Back-off pulling image {image:?}"),
            ),
        });
    }
    event(Type::Normal, "Pulling", format!("Pulling image {image:?}"));
    let started = std::time::Instant::now();
    match pull(ctx, pod, image, sandbox_config).await {
        Ok(_) => {
            state.image.reset(&key);
            let took = go_duration(started.elapsed());
            let size = match ctx.runtime.image_size(image).await {
                Ok(Some(size)) => format!(" Image size: {size} bytes."),
                _ => String::new(),
            };
            event(
                Type::Normal,
                "Pulled",
                format!(
                    "Successfully pulled image {image:?} in {took} ({took} including waiting).{size}"
                ),
            );
            Ok(())
        }
        Err(message) => {
            state.image.next(&key, now, now);
            // Sync again halfway through the back-off to report ImagePullBackOff, like a requeue.
            let half = state.image.get(&key) / 2;
            *wake = earliest(*wake, now + half);
            Err(Reason {
                reason: "ErrImagePull".into(),
                message: event(
                    Type::Warning,
                    "Failed",
                    format!("Failed to pull image {image:?}: {message}"),
                ),
            })
        }
    }
}

/// The kubelet's `PullImage`: with the credentials the pod's pull secrets
/// have for the image's registry, each in turn until one pull succeeds, else
/// without credentials. The error is the message the `Failed` event and the
/// `ErrImagePull` status show.
async fn pull(
    ctx: &Context,
    pod: &Pod,
    image: &str,
    sandbox_config: &nodeconform_cri::v1::PodSandboxConfig,
) -> Result<String, String> {
    let keyring =
        keyring::Keyring::from_secrets(&pull_secrets(ctx, pod).await).map_err(|e| e.to_string())?;
    let credentials = keyring.lookup(&keyring::repository(image));
    if credentials.is_empty() {
        return ctx
            .runtime
            .pull_image(image, None, sandbox_config.clone())
            .await
            .map_err(|e| e.short_message());
    }
    let mut errors = Vec::new();
    for keyring::Credentials { username, password } in credentials {
        let auth = nodeconform_cri::v1::AuthConfig {
            username,
            password,
            ..Default::default()
        };
        match ctx
            .runtime
            .pull_image(image, Some(auth), sandbox_config.clone())
            .await
        {
            Ok(image_ref) => return Ok(image_ref),
            Err(error) => errors.push(error.short_message()),
        }
    }
    // utilerrors.NewAggregate: one error alone, several in brackets.
    Err(match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    })
}

/// `getPullSecretsForPod`: the pod's `imagePullSecrets` that can be read; the
/// others are named in a `FailedToRetrieveImagePullSecret` warning and skipped.
async fn pull_secrets(ctx: &Context, pod: &Pod) -> Vec<Secret> {
    let names: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.as_str())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut secrets = Vec::new();
    let mut failed = Vec::new();
    for name in names {
        match api.get(name).await {
            Ok(secret) => secrets.push(secret),
            Err(error) => {
                tracing::info!(pod = %crate::runtime::pod_key(pod), secret = name, %error, "unable to retrieve pull secret, the image pull may not succeed");
                failed.push(name);
            }
        }
    }
    if !failed.is_empty() {
        ctx.events.pod(
            pod,
            None,
            Type::Warning,
            "FailedToRetrieveImagePullSecret",
            format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                failed.join(", ")
            ),
        );
    }
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            image_pull_policy: policy.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn default_pull_policy_follows_the_tag() {
        assert_eq!(pull_policy(&container("busybox", None)), "Always");
        assert_eq!(pull_policy(&container("busybox:latest", None)), "Always");
        assert_eq!(
            pull_policy(&container("busybox:1.36", None)),
            "IfNotPresent"
        );
        assert_eq!(
            pull_policy(&container("localhost:5000/busybox", None)),
            "Always"
        );
        assert_eq!(
            pull_policy(&container("busybox:1.36", Some("Never"))),
            "Never"
        );
    }

    #[test]
    fn image_references() {
        for ok in [
            "busybox",
            "busybox:1.36",
            "docker.io/library/busybox:latest",
            "localhost:5000/a/b:c",
            "registry.k8s.io/pause:3.9",
            "registry.invalid/nothing:1",
        ] {
            assert!(valid_reference(ok), "{ok}");
        }
        for bad in [
            "",
            "Busybox",
            "busy box",
            "busybox:",
            "a//b",
            "-a",
            "busybox:tag!",
        ] {
            assert!(!valid_reference(bad), "{bad}");
        }
    }
}

//! The one mapping from errors to the wire: every failure the server reports is an
//! [`Error`] and leaves as a `metav1.Status` with the upstream `code` and `reason`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use crate::resources::Resource;

/// The largest request body the server reads, like kube-apiserver's `maxRequestBodyBytes`.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A failed API request, with the upstream HTTP code and `Status.reason` it maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400 `BadRequest`: malformed input (JSON, selectors, parameters, name mismatch).
    #[error("{message}")]
    BadRequest {
        /// What was wrong with the request.
        message: String,
    },
    /// 404 `NotFound`: the named object does not exist.
    #[error("{} \"{name}\" not found", resource.qualified())]
    NotFound {
        /// The resource that was asked for.
        resource: &'static Resource,
        /// The object name.
        name: String,
    },
    /// 404 `NotFound`: the path names no resource this server serves.
    #[error("the server could not find the requested resource")]
    NoResource,
    /// 409 `AlreadyExists`: create of a name that is taken (by an object being deleted,
    /// upstream says so first).
    #[error("{}{} \"{name}\" already exists", if *deleting { "object is being deleted: " } else { "" }, resource.qualified())]
    AlreadyExists {
        /// The resource of the object.
        resource: &'static Resource,
        /// The object name.
        name: String,
        /// The object that has the name is being deleted.
        deleting: bool,
    },
    /// 409 `Conflict`: stale `resourceVersion`, or a precondition that does not hold.
    /// Upstream names the object by its resource (`pods`) for storage conflicts and by
    /// its kind (`ConfigMap`) for delete preconditions; `on` is whichever it uses.
    #[error(
        "Operation cannot be fulfilled on {} \"{name}\": {detail}",
        qualified(group, on)
    )]
    Conflict {
        /// The API group of the object.
        group: &'static str,
        /// The resource or kind the message names.
        on: &'static str,
        /// The object name.
        name: String,
        /// Why the operation could not be fulfilled.
        detail: String,
    },
    /// 409 `Conflict` of a server-side apply: fields another manager owns would change.
    #[error("{message}")]
    ApplyConflict {
        /// Upstream's message (`Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.k`).
        message: String,
        /// (manager, field path) per conflict.
        conflicts: Vec<(String, String)>,
    },
    /// 409 `Conflict` on a subresource, e.g. binding a pod that is already bound
    /// (`pods/binding`).
    #[error("Operation cannot be fulfilled on {subresource} \"{name}\": {detail}")]
    SubresourceConflict {
        /// The subresource, e.g. `pods/binding`.
        subresource: &'static str,
        /// The object name.
        name: String,
        /// Why the operation could not be fulfilled.
        detail: String,
    },
    /// 422 `Invalid`: an object or a request's options fail validation, with one cause
    /// per field error (`NewInvalid`).
    #[error(
        "{} {} is invalid: {}",
        qualified(group, kind),
        crate::field::go_quote(name),
        crate::field::aggregate(errors)
    )]
    Invalid {
        /// The API group of the kind (`meta.k8s.io` for request options).
        group: &'static str,
        /// The kind (`Pod`, `CreateOptions`); upstream names a few checks by resource.
        kind: &'static str,
        /// The object name (may be empty).
        name: String,
        /// The field errors.
        errors: Vec<crate::field::Error>,
    },
    /// 422 without causes: a JSON patch that cannot be applied (a failed `test`, a path
    /// that is not there); upstream answers with `NewGenericServerResponse`'s words.
    #[error("the server rejected our request due to an error in our request")]
    PatchRejected,
    /// The kubelet answered a proxied request (`pods/log`) with an error status
    /// other than 400 and 500: upstream's `NewGenericServerResponse`.
    #[error("{}", generic_server_message(*code, message, subresource, name))]
    Kubelet {
        /// The kubelet's HTTP status.
        code: u16,
        /// The kubelet's body.
        message: String,
        /// The subresource, e.g. `pods/log`.
        subresource: &'static str,
        /// The object name.
        name: String,
    },
    /// The kubelet could not be reached: 500 without a reason, as kube-apiserver
    /// reports an error that is not a Status.
    #[error("{message}")]
    Unreachable {
        /// The transport error.
        message: String,
    },
    /// 410 `Expired`: a watch or list from a `resourceVersion` older than the kept history.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The version the client asked for.
        requested: u64,
        /// The oldest version the server can still serve from.
        oldest: u64,
    },
    /// 401 `Unauthorized`: no or a wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403 `Forbidden` (`NewForbidden`): e.g. creating in a namespace that is being
    /// terminated, with upstream's cause when it gives one.
    #[error("{} \"{name}\" is forbidden: {reason}", resource.qualified())]
    Forbidden {
        /// The resource of the object.
        resource: &'static Resource,
        /// The object name.
        name: String,
        /// Why the request is refused.
        reason: String,
        /// A cause upstream adds: (its reason, the field, the message).
        cause: Option<(&'static str, &'static str, String)>,
    },
    /// 404 as plain text: a path outside every API group this server serves.
    #[error("404 page not found")]
    PageNotFound,
    /// 405 `MethodNotAllowed`: the verb is not served on this path.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 415 `UnsupportedMediaType`: a request body in a format the server does not read.
    #[error("{}", unsupported_media_message(content_type, accepted))]
    UnsupportedMediaType {
        /// The `Content-Type` the client sent.
        content_type: String,
        /// What the request could have sent.
        accepted: &'static [&'static str],
    },
    /// 406 `NotAcceptable`: the client accepts no format the server writes.
    #[error("only the following media types are accepted: application/json, application/yaml")]
    NotAcceptable,
    /// 413 `RequestEntityTooLarge`: a body over [`MAX_BODY_BYTES`].
    #[error("Request entity too large: limit is {MAX_BODY_BYTES}")]
    TooLarge,
    /// 500 without a reason: an error upstream returns that is not a Status (its
    /// `ErrorToAPIStatus` default), e.g. an invalid `Binding`'s field errors.
    #[error("{message}")]
    Unknown {
        /// The error text.
        message: String,
    },
    /// 500 `InternalError`: a bug or an I/O failure on the server side.
    #[error("Internal error occurred: {message}")]
    Internal {
        /// What failed.
        message: String,
    },
}

/// `kind` or `kind.group`, as upstream's `GroupKind`/`GroupResource.String()` write them.
fn qualified(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// A `Result` whose error is a wire-mappable [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn unsupported_media_message(content_type: &str, accepted: &[&str]) -> String {
    if content_type.contains("protobuf") {
        format!(
            "the body of the request was in an unknown format ({content_type}): this API server \
             double reads protobuf bodies of {} only; run the kubelet with \
             --kube-api-content-type=application/json (kubelet config field contentType: \
             application/json), or send JSON",
            crate::protobuf::KINDS.join(", ")
        )
    } else {
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        )
    }
}

/// `NewGenericServerResponse`'s message for a kubelet's answer, with the verb
/// left empty as the response checker of `pods/log` does.
fn generic_server_message(code: u16, body: &str, subresource: &str, name: &str) -> String {
    let message = match code {
        404 => "the server could not find the requested resource".to_owned(),
        401 => "the server has asked for the client to provide credentials".to_owned(),
        403 => body.to_owned(),
        405 => "the server does not allow this method on the requested resource".to_owned(),
        409 => "the server reported a conflict".to_owned(),
        422 => "the server rejected our request due to an error in our request".to_owned(),
        429 => "the server has received too many requests and has asked us to try again later"
            .to_owned(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned(),
        c if c >= 500 => format!(
            "an error on the server ({body:?}) has prevented the request from succeeding"
        ),
        c => format!("the server responded with the status code {c} but did not return more information"),
    };
    format!("{message} ( {subresource} {name})")
}

impl Error {
    /// A 422 for an object of `resource`.
    pub fn invalid(
        resource: &Resource,
        name: impl Into<String>,
        errors: Vec<crate::field::Error>,
    ) -> Self {
        Error::Invalid {
            group: resource.group,
            kind: resource.kind,
            name: name.into(),
            errors,
        }
    }

    /// A 422 for a request's options (`CreateOptions`, `ListOptions`, …: `meta.k8s.io`).
    pub fn invalid_options(kind: &'static str, error: crate::field::Error) -> Self {
        Error::Invalid {
            group: "meta.k8s.io",
            kind,
            name: String::new(),
            errors: vec![error],
        }
    }

    /// The 409 of an apply that would take fields from other managers: (manager, path)
    /// pairs, said as structured-merge-diff says them.
    pub fn apply_conflicts(conflicts: &[(String, String)]) -> Self {
        let mut sorted = conflicts.to_vec();
        sorted.sort();
        let count = match sorted.len() {
            1 => "1 conflict".to_owned(),
            n => format!("{n} conflicts"),
        };
        let said = if sorted.len() == 1 {
            format!("conflict with {}: {}", sorted[0].0, sorted[0].1)
        } else {
            let mut lines = Vec::new();
            let mut managers: Vec<&String> = sorted.iter().map(|(m, _)| m).collect();
            managers.dedup();
            for manager in managers {
                lines.push(format!("conflicts with {manager}:"));
                for (_, path) in sorted.iter().filter(|(m, _)| m == manager) {
                    lines.push(format!("- {path}"));
                }
            }
            lines.join("\n")
        };
        Error::ApplyConflict {
            message: format!("Apply failed with {count}: {said}"),
            conflicts: sorted,
        }
    }

    /// A 409 that names the object by its resource (`pods`), as storage conflicts do.
    pub fn conflict(
        resource: &Resource,
        name: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Error::Conflict {
            group: resource.group,
            on: resource.plural,
            name: name.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for a [`Error::BadRequest`].
    pub fn bad_request(message: impl Into<String>) -> Self {
        Error::BadRequest {
            message: message.into(),
        }
    }

    /// The HTTP status code upstream uses for this error.
    pub fn code(&self) -> u16 {
        match self {
            Error::BadRequest { .. } => 400,
            Error::NotFound { .. } | Error::NoResource | Error::PageNotFound => 404,
            Error::AlreadyExists { .. }
            | Error::Conflict { .. }
            | Error::ApplyConflict { .. }
            | Error::SubresourceConflict { .. } => 409,
            Error::Invalid { .. } | Error::PatchRejected => 422,
            Error::Kubelet { code, .. } => *code,
            Error::Unreachable { .. } | Error::Unknown { .. } => 500,
            Error::Expired { .. } => 410,
            Error::Unauthorized => 401,
            Error::Forbidden { .. } => 403,
            Error::MethodNotAllowed => 405,
            Error::UnsupportedMediaType { .. } => 415,
            Error::NotAcceptable => 406,
            Error::TooLarge => 413,
            Error::Internal { .. } => 500,
        }
    }

    /// The `Status.reason` upstream uses for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::BadRequest { .. } => "BadRequest",
            Error::NotFound { .. } | Error::NoResource | Error::PageNotFound => "NotFound",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Conflict { .. }
            | Error::SubresourceConflict { .. }
            | Error::ApplyConflict { .. } => "Conflict",
            Error::Invalid { .. } | Error::PatchRejected => "Invalid",
            Error::Kubelet { code, .. } => match code {
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                405 => "MethodNotAllowed",
                409 => "Conflict",
                422 => "Invalid",
                429 => "TooManyRequests",
                504 => "Timeout",
                c if *c >= 500 => "InternalError",
                _ => "",
            },
            Error::Unreachable { .. } | Error::Unknown { .. } => "",
            Error::Expired { .. } => "Expired",
            Error::Unauthorized => "Unauthorized",
            Error::Forbidden { .. } => "Forbidden",
            Error::MethodNotAllowed => "MethodNotAllowed",
            Error::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            Error::NotAcceptable => "NotAcceptable",
            Error::TooLarge => "RequestEntityTooLarge",
            Error::Internal { .. } => "InternalError",
        }
    }

    fn details(&self) -> Option<StatusDetails> {
        let (group, kind, name) = match self {
            Error::NotFound { resource, name } | Error::AlreadyExists { resource, name, .. } => {
                (resource.group, resource.plural, name)
            }
            Error::Forbidden {
                resource,
                name,
                cause,
                ..
            } => {
                return Some(StatusDetails {
                    name: Some(name.clone()),
                    group: Some(resource.group.to_string()).filter(|g| !g.is_empty()),
                    kind: Some(resource.plural.to_string()),
                    causes: cause.as_ref().map(|(reason, field, message)| {
                        // `omitempty`: a cause with only a reason is just that.
                        vec![StatusCause {
                            reason: Some((*reason).to_owned()),
                            field: Some((*field).to_owned()).filter(|f| !f.is_empty()),
                            message: Some(message.clone()).filter(|m| !m.is_empty()),
                        }]
                    }),
                    ..StatusDetails::default()
                });
            }
            Error::Conflict {
                group, on, name, ..
            } => (*group, *on, name),
            Error::Invalid {
                group,
                kind,
                name,
                errors,
            } => {
                return Some(StatusDetails {
                    name: Some(name.clone()).filter(|n| !n.is_empty()),
                    group: Some(group.to_string()).filter(|g| !g.is_empty()),
                    kind: Some(kind.to_string()),
                    causes: Some(
                        errors
                            .iter()
                            .map(|e| StatusCause {
                                field: Some(e.field.clone()),
                                message: Some(e.body()),
                                reason: Some(e.kind.reason().to_owned()),
                            })
                            .collect(),
                    ),
                    ..StatusDetails::default()
                });
            }
            Error::ApplyConflict { conflicts, .. } => {
                return Some(StatusDetails {
                    causes: Some(
                        conflicts
                            .iter()
                            .map(|(manager, path)| StatusCause {
                                reason: Some("FieldManagerConflict".into()),
                                message: Some(format!("conflict with {manager}")),
                                field: Some(path.clone()),
                            })
                            .collect(),
                    ),
                    ..StatusDetails::default()
                });
            }
            Error::Kubelet {
                subresource, name, ..
            }
            | Error::SubresourceConflict {
                subresource, name, ..
            } => ("", *subresource, name),
            // Upstream's `NewNotFound` without a name (an unknown resource or verb).
            Error::NoResource | Error::MethodNotAllowed | Error::PatchRejected => {
                return Some(StatusDetails::default());
            }
            _ => return None,
        };
        Some(StatusDetails {
            name: Some(name.clone()),
            group: Some(group.to_string()).filter(|g| !g.is_empty()),
            kind: Some(kind.to_string()),
            ..StatusDetails::default()
        })
    }

    /// The `metav1.Status` object sent to the client.
    pub fn to_status(&self) -> Status {
        Status {
            code: Some(i32::from(self.code())),
            details: self.details(),
            message: Some(self.to_string()),
            reason: Some(self.reason().to_string()).filter(|r| !r.is_empty()),
            status: Some("Failure".to_string()),
            ..Status::default()
        }
    }
}

/// A `Status` with `status: Success`, as upstream returns for an immediate delete.
pub fn success(resource: &Resource, name: &str, uid: Option<String>) -> Status {
    Status {
        status: Some("Success".to_string()),
        details: Some(StatusDetails {
            name: Some(name.to_string()),
            group: Some(resource.group.to_string()).filter(|g| !g.is_empty()),
            kind: Some(resource.plural.to_string()),
            uid,
            ..StatusDetails::default()
        }),
        ..Status::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;

    #[test]
    fn not_found_matches_upstream() {
        let err = Error::NotFound {
            resource: &resources::LEASES,
            name: "n1".into(),
        };
        let status = serde_json::to_value(err.to_status()).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(
            status["message"],
            "leases.coordination.k8s.io \"n1\" not found"
        );
        assert_eq!(status["details"]["group"], "coordination.k8s.io");
        assert_eq!(status["details"]["kind"], "leases");
    }

    #[test]
    fn protobuf_hint_names_the_kubelet_flag() {
        let err = Error::UnsupportedMediaType {
            content_type: "application/vnd.kubernetes.protobuf".into(),
            accepted: &[],
        };
        assert!(
            err.to_string()
                .contains("--kube-api-content-type=application/json")
        );
        assert_eq!(err.code(), 415);
    }
}

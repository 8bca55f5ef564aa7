//! `GET pods/{name}/log` (kube-apiserver's `LogREST` and `LogLocation`): the
//! `PodLogOptions` from the query, validated as upstream; the container picked
//! (the only one, or the one named); the request passed to the node's kubelet
//! at `/containerLogs/{namespace}/{pod}/{container}` through [`crate::kubelet_client::KubeletClient`]
//! and its answer streamed back as `text/plain`. A kubelet's error answer
//! becomes a Status carrying its body, as upstream's response checker does.

use bytes::Bytes;
use futures::Stream;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use nodeconform_stream::websocket;
use serde_json::Value;

use crate::handlers::{Context, named, require_namespace};
use crate::http::{self as h, Body};
use crate::request::{Query, Target};
use crate::resources;
use crate::status::{Error, Result};

/// How much of a kubelet's error answer is kept (upstream's `maxReadLength`).
const MAX_ERROR_BODY: usize = 50_000;

/// `PodLogOptions` as the query gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `container`.
    pub container: Option<String>,
    /// `follow`.
    pub follow: bool,
    /// `previous`.
    pub previous: bool,
    /// `timestamps`.
    pub timestamps: bool,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime` (RFC 3339, passed on as given).
    pub since_time: Option<String>,
    /// `tailLines`.
    pub tail_lines: Option<i64>,
    /// `limitBytes`.
    pub limit_bytes: Option<i64>,
}

/// Go's query booleans (`Convert_Slice_string_To_bool`, for the options of
/// every connect and log request): anything but `0` and `false` is true.
pub(crate) fn query_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

fn flag(raw: &Query, key: &str) -> bool {
    raw.get(key).is_some_and(query_bool)
}

impl Options {
    /// Decodes the query; malformed values are a 400.
    pub fn parse(query: &Query) -> Result<Options> {
        let since_time = match query.get("sinceTime") {
            Some(t) => {
                let parsed = t.parse::<k8s_openapi::jiff::Timestamp>().map_err(|_| {
                    Error::bad_request(format!(
                        "parsing time {t:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {t:?}"
                    ))
                })?;
                // Upstream passes `sinceTime` on at second precision, in RFC 3339.
                Some(
                    k8s_openapi::jiff::Timestamp::from_second(parsed.as_second())
                        .unwrap_or(parsed)
                        .to_string(),
                )
            }
            None => None,
        };
        Ok(Options {
            container: query.get("container").map(str::to_owned),
            follow: flag(query, "follow"),
            previous: flag(query, "previous"),
            timestamps: flag(query, "timestamps"),
            since_seconds: query.int("sinceSeconds")?,
            since_time,
            tail_lines: query.int("tailLines")?,
            limit_bytes: query.int("limitBytes")?,
        })
    }

    /// `ValidatePodLogOptions`: a 422 naming every bad field.
    pub fn validate(&self, name: &str) -> Result<()> {
        use crate::field::{Error as FieldError, Value};
        let mut errors = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            errors.push(FieldError::invalid(
                "tailLines",
                Value::plain(n),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            errors.push(FieldError::invalid(
                "limitBytes",
                Value::plain(n),
                "must be greater than 0",
            ));
        }
        match (self.since_seconds, &self.since_time) {
            (Some(_), Some(_)) => errors.push(FieldError::forbidden(
                "[]",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(n), None) if n < 1 => errors.push(FieldError::invalid(
                "sinceSeconds",
                Value::plain(n),
                "must be greater than 0",
            )),
            _ => {}
        }
        if errors.is_empty() {
            return Ok(());
        }
        Err(Error::Invalid {
            group: "",
            kind: "PodLogOptions",
            name: name.to_owned(),
            errors,
        })
    }

    /// The kubelet's query, in upstream's order (`url.Values.Encode` sorts by key).
    pub fn kubelet_query(&self) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if self.follow {
            q.append_pair("follow", "true");
        }
        if let Some(n) = self.limit_bytes {
            q.append_pair("limitBytes", &n.to_string());
        }
        if self.previous {
            q.append_pair("previous", "true");
        }
        if let Some(n) = self.since_seconds {
            q.append_pair("sinceSeconds", &n.to_string());
        }
        if let Some(t) = &self.since_time {
            q.append_pair("sinceTime", t);
        }
        if let Some(n) = self.tail_lines {
            q.append_pair("tailLines", &n.to_string());
        }
        if self.timestamps {
            q.append_pair("timestamps", "true");
        }
        q.finish()
    }
}

/// The container whose log is asked for: the one named (it must be in the
/// pod), else the pod's only container (`LogLocation`).
pub fn container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String> {
    let names = |list: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    if let Some(asked) = asked {
        let known = containers.iter().any(|c| c == asked)
            || names("initContainers").iter().any(|c| c == asked)
            || names("ephemeralContainers").iter().any(|c| c == asked);
        if !known {
            return Err(Error::bad_request(format!(
                "container {asked} is not valid for pod {name}"
            )));
        }
        return Ok(asked.to_owned());
    }
    match containers.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(Error::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        many => {
            let mut message = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                many.join(" ")
            );
            let init = names("initContainers");
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(Error::bad_request(message))
        }
    }
}

/// The node a pod is bound to (empty when it is not).
pub fn node_name(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `GET pods/{name}/log`.
pub async fn serve(ctx: &Context, target: &Target, query: &Query) -> Result<Response<Body>> {
    let log = open(ctx, target, query).await?;
    Ok(h::stream("text/plain", log))
}

/// `GET pods/{name}/log` asked over WebSocket (upstream's `StreamObject`
/// with `wsstream.NewReader`): once the log is open, the upgrade is answered
/// and the log goes out as messages (`binary.k8s.io`, or base64 text with
/// `base64.binary.k8s.io`); errors before that are plain HTTP answers.
pub async fn serve_websocket<B>(
    ctx: &Context,
    target: &Target,
    query: &Query,
    mut req: Request<B>,
) -> Result<Response<Body>> {
    let log = open(ctx, target, query).await?;
    let upgrade = match websocket::accept(&mut req, &websocket::READER_PROTOCOLS) {
        Ok(upgrade) => upgrade,
        Err(refusal) => {
            return Ok(refusal
                .response::<String>()
                .map(|b| http_body_util::Full::new(Bytes::from(b)).boxed_unsync()));
        }
    };
    let response = upgrade.response::<Body>();
    tokio::spawn(websocket::send_stream(upgrade, Box::pin(log)));
    Ok(response)
}

/// The log as the kubelet streams it (nothing for an unscheduled pod), once
/// the options, the pod, the container and the kubelet's answer are checked.
async fn open(
    ctx: &Context,
    target: &Target,
    query: &Query,
) -> Result<impl Stream<Item = Bytes> + Send + 'static> {
    require_namespace(target)?;
    let name = named(target)?;
    let options = Options::parse(query)?;
    options.validate(name)?;
    let pod = ctx.registry.get(&resources::PODS, target.ns(), name)?;
    let container = container(&pod.value, name, options.container.as_deref())?;
    let node_name = node_name(&pod.value);
    if node_name.is_empty() {
        // Not scheduled: upstream streams nothing.
        return Ok(futures::future::Either::Left(futures::stream::empty()));
    }
    let node = ctx.registry.get(&resources::NODES, "", node_name)?;
    let at = ctx.kubelet.locate(&node.value)?;
    let mut path = format!("/containerLogs/{}/{name}/{container}", target.ns());
    let q = options.kubelet_query();
    if !q.is_empty() {
        path = format!("{path}?{q}");
    }
    let resp = ctx.kubelet.get(&at, &path).await?;
    let code = resp.status().as_u16();
    if !(200..=206).contains(&code) {
        return Err(kubelet_error(code, resp.into_body(), name).await);
    }
    Ok(futures::future::Either::Right(body_stream(
        resp.into_body(),
    )))
}

/// A kubelet's error answer as upstream's `GenericHttpResponseChecker` maps it.
async fn kubelet_error(code: u16, body: Incoming, name: &str) -> Error {
    let mut text = Vec::new();
    let mut body = body;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            text.extend_from_slice(&data);
            if text.len() >= MAX_ERROR_BODY {
                text.truncate(MAX_ERROR_BODY);
                break;
            }
        }
    }
    let message = String::from_utf8_lossy(&text).into_owned();
    match code {
        500 => Error::Internal { message },
        400 => Error::bad_request(message),
        _ => Error::Kubelet {
            code,
            message,
            subresource: "pods/log",
            name: name.to_owned(),
        },
    }
}

/// The kubelet's body as it arrives; a broken connection ends it.
fn body_stream(body: Incoming) -> impl Stream<Item = Bytes> + Send + 'static {
    futures::stream::unfold(body, |mut body| async move {
        loop {
            match body.frame().await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some((data, body));
                    }
                }
                Err(_) => return None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(raw: &str) -> Query {
        Query::parse(Some(raw))
    }

    #[test]
    fn options_pass_to_the_kubelet_in_upstreams_order() {
        let o = Options::parse(&query(
            "container=c&tailLines=3&timestamps=true&follow=1&previous=false&limitBytes=9&sinceSeconds=5",
        ))
        .unwrap();
        assert_eq!(o.container.as_deref(), Some("c"));
        assert_eq!(
            o.kubelet_query(),
            "follow=true&limitBytes=9&sinceSeconds=5&tailLines=3&timestamps=true"
        );
        let t = Options::parse(&query("sinceTime=2026-01-02T03:04:05.5Z")).unwrap();
        assert_eq!(t.kubelet_query(), "sinceTime=2026-01-02T03%3A04%3A05Z");
        assert_eq!(
            Options::parse(&query("tailLines=x")).unwrap_err().code(),
            400
        );
        assert_eq!(
            Options::parse(&query("sinceTime=x")).unwrap_err().code(),
            400
        );
    }

    #[test]
    fn validation_is_upstreams() {
        let bad = Options::parse(&query("tailLines=-1")).unwrap();
        let err = bad.validate("p").unwrap_err();
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.to_string(),
            "PodLogOptions \"p\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        let status = serde_json::to_value(err.to_status()).unwrap();
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["kind"], "PodLogOptions");
        let two = Options::parse(&query("limitBytes=0&sinceSeconds=0")).unwrap();
        assert_eq!(
            two.validate("p").unwrap_err().to_string(),
            "PodLogOptions \"p\" is invalid: [limitBytes: Invalid value: 0: must be greater than 0, sinceSeconds: Invalid value: 0: must be greater than 0]"
        );
        let both = Options::parse(&query("sinceSeconds=1&sinceTime=2026-01-02T03:04:05Z")).unwrap();
        assert!(
            both.validate("p")
                .unwrap_err()
                .to_string()
                .contains("[]: Forbidden: at most one")
        );
        assert!(Options::default().validate("p").is_ok());
    }

    #[test]
    fn the_container_is_picked_like_log_location() {
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        assert_eq!(container(&pod, "p", Some("b")).unwrap(), "b");
        assert_eq!(container(&pod, "p", Some("i")).unwrap(), "i");
        assert_eq!(
            container(&pod, "p", Some("x")).unwrap_err().to_string(),
            "container x is not valid for pod p"
        );
        assert_eq!(
            container(&pod, "p", None).unwrap_err().to_string(),
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        let one = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(container(&one, "p", None).unwrap(), "a");
    }

    #[test]
    fn kubelet_errors_map_like_the_response_checker() {
        let err = Error::Kubelet {
            code: 404,
            message: "pod \"p\" does not exist".into(),
            subresource: "pods/log",
            name: "p".into(),
        };
        assert_eq!(
            err.to_string(),
            "the server could not find the requested resource ( pods/log p)"
        );
        let status = serde_json::to_value(err.to_status()).unwrap();
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["details"]["kind"], "pods/log");
        let unreachable = Error::Unreachable {
            message: "Get \"https://x\": refused".into(),
        };
        let status = serde_json::to_value(unreachable.to_status()).unwrap();
        assert_eq!(status["code"], 500);
        assert!(status.get("reason").is_none());
    }
}

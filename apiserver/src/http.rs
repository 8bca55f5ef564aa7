//! HTTP plumbing shared by the handlers: the response body type, JSON and Status responses,
//! request-body reading with the 3 MiB limit, and content negotiation.

use std::convert::Infallible;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;

use crate::status::{Error, MAX_BODY_BYTES, Result};

/// The body of every response: a whole buffer or a watch stream.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

pub use crate::table::JSON;

/// A response with a buffered body.
pub fn bytes(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()).boxed_unsync());
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

/// A JSON response.
pub fn json(code: u16, value: &Value) -> Response<Body> {
    bytes(code, JSON, serde_json::to_vec(value).unwrap_or_default())
}

/// A JSON response of any serializable value.
pub fn json_of<T: serde::Serialize>(code: u16, value: &T) -> Response<Body> {
    bytes(code, JSON, serde_json::to_vec(value).unwrap_or_default())
}

/// The `metav1.Status` response for an error.
pub fn error(err: &Error) -> Response<Body> {
    if matches!(err, Error::PageNotFound) {
        // What Go's mux answers for a path no API group serves.
        return bytes(
            404,
            "text/plain; charset=utf-8",
            b"404 page not found\n".to_vec(),
        );
    }
    let mut resp = json_of(err.code(), &err.to_status());
    if matches!(err, Error::Unauthorized) {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"nodeconform-apiserver\""),
        );
    }
    resp
}

/// A streamed response (watch).
pub fn stream(content_type: &str, s: impl Stream<Item = Bytes> + Send + 'static) -> Response<Body> {
    let body = StreamBody::new(s.map(|b| Ok::<_, Infallible>(Frame::data(b))));
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

/// How much of an oversized body is read and thrown away before the 413 is
/// sent, so a client still writing it reads the answer instead of a broken
/// pipe; beyond this the connection is closed.
const DRAIN_BYTES: usize = 4 * MAX_BODY_BYTES;

/// Reads a request body, at most [`MAX_BODY_BYTES`] (413 beyond).
pub async fn read_body(headers: &HeaderMap, mut body: Incoming) -> Result<Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_BYTES as u64) {
        return Err(Error::TooLarge);
    }
    let mut kept = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| Error::bad_request(format!("reading the request body: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen > DRAIN_BYTES {
            break;
        }
        if seen <= MAX_BODY_BYTES {
            kept.extend_from_slice(&data);
        }
    }
    if seen > MAX_BODY_BYTES {
        return Err(Error::TooLarge);
    }
    Ok(Bytes::from(kept))
}

/// A header as a string ("" when absent or not text).
pub fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The media type of a `Content-Type` value, without its parameters, lower case.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The body format of a create or update, from `Content-Type`: JSON, YAML or (for the kinds
/// [`crate::protobuf`] reads) protobuf; 415 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// `application/json` (also assumed when no type is given).
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl BodyFormat {
    /// Negotiates the body format.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self> {
        let ct = header_str(headers, header::CONTENT_TYPE);
        match media_type(ct).as_str() {
            "" | "application/json" | "*/*" => Ok(BodyFormat::Json),
            "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(BodyFormat::Yaml),
            crate::protobuf::MEDIA_TYPE => Ok(BodyFormat::Protobuf),
            _ => Err(Error::UnsupportedMediaType {
                content_type: ct.to_string(),
                accepted: OBJECT_TYPES,
            }),
        }
    }

    /// Parses a body that is not an object of a resource (options, a binding, …).
    pub fn parse(self, body: &[u8]) -> Result<Value> {
        match self {
            BodyFormat::Json => crate::patch::parse_json(body).map_err(Error::bad_request),
            BodyFormat::Yaml => crate::patch::parse_yaml(body).map_err(Error::bad_request),
            BodyFormat::Protobuf => crate::protobuf::decode(body),
        }
    }

    /// Parses the body of a create or update of a `kind` object; one that does not decode
    /// gets upstream's `transformDecodeError` words, quoting the start of the body.
    pub fn parse_object(self, body: &[u8], kind: &str) -> Result<Value> {
        let unrecognized = |detail: String| {
            Error::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): couldn't get \
                 version/kind; json parse error: {detail} ({})",
                crate::go_json::summarize(body)
            ))
        };
        match self {
            BodyFormat::Json => crate::patch::parse_json(body).map_err(unrecognized),
            BodyFormat::Yaml => crate::patch::parse_yaml(body).map_err(unrecognized),
            BodyFormat::Protobuf => crate::protobuf::decode(body),
        }
    }
}

/// The media types an object body may come in.
const OBJECT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    crate::protobuf::MEDIA_TYPE,
];

/// Whether the client accepts JSON (`Accept` absent, `*/*`, any JSON type); a client that
/// only takes protobuf gets 406.
pub fn accepts_json(headers: &HeaderMap) -> bool {
    let accept = header_str(headers, header::ACCEPT);
    accept.is_empty()
        || accept.split(',').any(|a| {
            let a = a.trim();
            a.starts_with("application/json")
                || a.starts_with("*/*")
                || a.starts_with("application/*")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        let mut h = HeaderMap::new();
        assert!(accepts_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
        );
        assert!(!accepts_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf, application/json"),
        );
        assert!(accepts_json(&h));
    }

    #[test]
    fn content_types_pick_the_body_format() {
        let mut h = HeaderMap::new();
        for (content_type, format) in [
            ("application/json; charset=utf-8", Some(BodyFormat::Json)),
            ("application/yaml", Some(BodyFormat::Yaml)),
            (
                "application/vnd.kubernetes.protobuf",
                Some(BodyFormat::Protobuf),
            ),
            ("application/cbor", None),
        ] {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            match format {
                Some(format) => assert_eq!(BodyFormat::from_headers(&h).unwrap(), format),
                None => assert_eq!(BodyFormat::from_headers(&h).unwrap_err().code(), 415),
            }
        }
    }
}

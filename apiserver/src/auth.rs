//! Bearer-token authentication: with a token configured, every request but the health and
//! version endpoints must carry `Authorization: Bearer <token>` or gets 401.

use http::{HeaderMap, header};

use crate::status::{Error, Result};

/// Checks the request's credentials against the configured token (`None`: no auth).
pub fn check(token: Option<&str>, headers: &HeaderMap) -> Result<()> {
    let Some(token) = token else {
        return Ok(());
    };
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match sent {
        Some(sent) if constant_time_eq(sent.as_bytes(), token.as_bytes()) => Ok(()),
        _ => Err(Error::Unauthorized),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn tokens() {
        let mut h = HeaderMap::new();
        assert!(check(None, &h).is_ok());
        assert_eq!(check(Some("t"), &h).unwrap_err().code(), 401);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer nope"),
        );
        assert!(check(Some("t"), &h).is_err());
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        assert!(check(Some("t"), &h).is_ok());
    }
}

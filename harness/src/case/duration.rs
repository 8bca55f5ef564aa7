//! Human durations in case files: `500ms`, `2s`, `1m30s`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as `500ms`, `10s`, `2m` or a combination such as `1m30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct CaseDuration(pub Duration);

impl CaseDuration {
    /// The duration as a [`std::time::Duration`].
    pub fn get(self) -> Duration {
        self.0
    }

    /// Parses `500ms`, `10s`, `2m`, `1h`, `1m30s`; a bare number is rejected so units are never guessed.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty duration".to_string());
        }
        let mut total = Duration::ZERO;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .count();
            if digits == 0 {
                return Err(format!("`{text}`: a number must come before each unit"));
            }
            let number: f64 = rest[..digits]
                .parse()
                .map_err(|_| format!("`{text}`: `{}` is not a number", &rest[..digits]))?;
            rest = &rest[digits..];
            let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
            let unit = &rest[..unit_len];
            rest = &rest[unit_len..];
            let seconds = match unit {
                "ms" => number / 1000.0,
                "s" => number,
                "m" => number * 60.0,
                "h" => number * 3600.0,
                "" => return Err(format!("`{text}`: a unit is missing (ms, s, m or h)")),
                other => return Err(format!("`{text}`: unknown unit `{other}` (ms, s, m or h)")),
            };
            if !(0.0..=86_400.0 * 7.0).contains(&seconds) {
                return Err(format!("`{text}`: out of range"));
            }
            total += Duration::from_secs_f64(seconds);
        }
        Ok(Self(total))
    }
}

impl fmt::Display for CaseDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

impl Serialize for CaseDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CaseDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = CaseDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as `500ms`, `10s` or `2m`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CaseDuration, E> {
                CaseDuration::parse(v).map_err(|m| E::custom(format!("invalid duration {m}")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CaseDuration, E> {
                Err(E::custom(format!(
                    "invalid duration `{v}`: a unit is missing, write `{v}s` or `{v}ms`"
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CaseDuration, E> {
                self.visit_u64(v.unsigned_abs())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<CaseDuration, E> {
                Err(E::custom(format!(
                    "invalid duration `{v}`: a unit is missing, write `{v}s`"
                )))
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(
            CaseDuration::parse("500ms").unwrap().get(),
            Duration::from_millis(500)
        );
        assert_eq!(
            CaseDuration::parse("2s").unwrap().get(),
            Duration::from_secs(2)
        );
        assert_eq!(
            CaseDuration::parse("1m30s").unwrap().get(),
            Duration::from_secs(90)
        );
        assert_eq!(
            CaseDuration::parse("1.5s").unwrap().get(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(
            CaseDuration::parse("10")
                .unwrap_err()
                .contains("unit is missing")
        );
        assert!(
            CaseDuration::parse("10d")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(CaseDuration::parse("s").is_err());
        assert!(CaseDuration::parse("").is_err());
    }

    #[test]
    fn displays_compactly() {
        assert_eq!(
            CaseDuration(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
        assert_eq!(CaseDuration(Duration::from_secs(120)).to_string(), "2m");
        assert_eq!(CaseDuration(Duration::from_secs(5)).to_string(), "5s");
    }
}

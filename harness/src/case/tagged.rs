//! Externally tagged enums in YAML: `- create`, `- delete: {gracePeriodSeconds: 1}`.
//!
//! serde_yaml 0.9 reads enums only from YAML tags (`!delete`); case files use the
//! single-key-mapping form Kubernetes users expect, so the enums of the case vocabulary
//! deserialize through [`deserialize_tagged`]: precise errors (unknown tag with the
//! list of valid ones, missing value, a second key) and serde_yaml's locations.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// An enum written as a bare tag (`create`) or a single-key mapping (`delete: {…}`).
pub(crate) trait TaggedEnum: Sized {
    /// What the value is, for messages ("a step").
    const WHAT: &'static str;
    /// Every valid tag.
    const TAGS: &'static [&'static str];
    /// The value for a tag that takes no value, `None` for other tags.
    fn unit(tag: &str) -> Option<Self>;
    /// Reads the value of a tag that takes one; `Ok(None)` for unknown or unit tags.
    fn with_value<'de, A: MapAccess<'de>>(tag: &str, map: &mut A)
    -> Result<Option<Self>, A::Error>;
}

/// An empty mapping: the optional value of a unit tag (`create: {}`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: TaggedEnum> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: one of {}", T::WHAT, T::TAGS.join(", "))
    }

    fn visit_str<E: de::Error>(self, tag: &str) -> Result<T, E> {
        if let Some(value) = T::unit(tag) {
            return Ok(value);
        }
        if T::TAGS.contains(&tag) {
            return Err(E::custom(format!(
                "`{tag}` needs a value: write `{tag}: …` (see cases/README.md)"
            )));
        }
        Err(E::unknown_variant(tag, T::TAGS))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(tag) = map.next_key::<String>()? else {
            return Err(de::Error::custom(format!(
                "an empty mapping, expected {} with one key: one of {}",
                T::WHAT,
                T::TAGS.join(", ")
            )));
        };
        let value = if let Some(value) = T::unit(&tag) {
            let _: Option<Empty> = map.next_value()?;
            value
        } else {
            match T::with_value(&tag, &mut map)? {
                Some(value) => value,
                None => return Err(de::Error::unknown_variant(&tag, T::TAGS)),
            }
        };
        if let Some(other) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "{} has exactly one key, found `{tag}` and `{other}` (start a new list item with `-`)",
                T::WHAT
            )));
        }
        Ok(value)
    }
}

/// Deserializes a [`TaggedEnum`].
pub(crate) fn deserialize_tagged<'de, D: Deserializer<'de>, T: TaggedEnum>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_any(TaggedVisitor(PhantomData))
}

/// Implements `Deserialize` for a [`TaggedEnum`].
macro_rules! tagged_deserialize {
    ($ty:ty) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::case::tagged::deserialize_tagged(deserializer)
            }
        }
    };
}
pub(crate) use tagged_deserialize;

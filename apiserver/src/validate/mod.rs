//! Object validation as kube-apiserver's strategies run it before a write: the metadata
//! rules every kind shares ([`object_meta`]) and the rules of the kinds a node agent
//! writes or reads ([`pod`], [`config`] for ConfigMaps and Secrets, [`event`]). Every
//! failure is a [`crate::field::Error`]; together they make one 422 `Invalid` naming the
//! object's kind, as upstream's `NewInvalid` does. Rules upstream has that no client of
//! the double is known to run into are not here (see `apiserver/README.md`).

mod config;
mod container;
mod event;
mod json;
mod object_meta;
mod pod;
mod pod_resize;

pub(crate) use pod_resize::json_eq;

use serde_json::Value;

use crate::field::Error as FieldError;
use crate::meta;
use crate::resources::{self, Resource};
use crate::status::{Error, Result};
use crate::strategy::Part;
use crate::version::Version;

/// Validates an object about to be created through `requested` (defaults applied).
pub fn create(requested: &Resource, obj: &Value, version: Version) -> Result<()> {
    let resource = requested.storage();
    let mut errors = object_meta::create(resource, obj);
    if is(resource, &resources::PODS) {
        errors.extend(pod::create(obj, version));
    } else if is(resource, &resources::CONFIGMAPS) {
        errors.extend(config::config_map(obj));
    } else if is(resource, &resources::SECRETS) {
        errors.extend(config::secret(obj));
    } else if is(resource, &resources::EVENTS) {
        let api = if requested.converted() {
            event::Api::EventsV1
        } else {
            event::Api::Core
        };
        errors.extend(event::create(obj, api));
    }
    finish(resource, obj, errors)
}

/// Validates an update of `old` to `new` (defaults applied, server-owned fields restored);
/// a status write is held to the metadata rules only, a resize to `ValidatePodResize`.
pub fn update(
    resource: &Resource,
    old: &Value,
    new: &Value,
    part: Part,
    version: Version,
) -> Result<()> {
    // `rest.BeforeUpdate` checks the metadata once and the strategy's `ValidateUpdate`
    // again: upstream lists each metadata error twice.
    let meta_errors = object_meta::update(old, new);
    let mut errors = meta_errors.clone();
    errors.extend(meta_errors);
    match part {
        Part::Status => {
            if is(resource, &resources::PODS) {
                errors.extend(pod::status_update(old, new));
            }
            return finish(resource, new, errors);
        }
        Part::Resize => {
            errors.extend(pod::create(new, version));
            errors.extend(pod_resize::resize(old, new));
            return finish(resource, new, errors);
        }
        Part::Main => {}
    }
    if is(resource, &resources::PODS) {
        errors.extend(pod::update(old, new));
    } else if is(resource, &resources::CONFIGMAPS) {
        errors.extend(config::config_map_update(old, new));
        errors.extend(config::config_map(new));
    } else if is(resource, &resources::SECRETS) {
        errors.extend(config::secret_update(old, new));
        errors.extend(config::secret(new));
    }
    finish(resource, new, errors)
}

fn is(resource: &Resource, other: &Resource) -> bool {
    resource.storage().id == other.id
}

fn finish(resource: &Resource, obj: &Value, errors: Vec<FieldError>) -> Result<()> {
    if errors.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        resources::ALL[resource.id],
        meta::str_field(obj, "name"),
        errors,
    ))
}

/// Upstream's path of a map entry: `data[key]`.
fn key_path(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

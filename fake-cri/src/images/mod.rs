//! Images: references ([`reference`]), what fake-cri knows of particular
//! images ([`catalog`]) and the images pulled so far ([`store`]).

pub mod catalog;
mod reference;
mod store;

pub use catalog::Catalog;
pub(crate) use reference::Reference;
pub use store::MISSING_REGISTRY;
pub(crate) use store::{Image, Images, fake_digest};

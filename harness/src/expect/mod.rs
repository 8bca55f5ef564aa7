//! The expectation engine: pod-state patterns over the watched timeline, invariants, node checks.
//!
//! Everything here is pure code over `Pod`/`Node` values; the runner feeds it watched states.

pub mod engine;
pub mod invariants;
pub mod matching;
pub mod node;
#[cfg(test)]
pub(crate) mod testing;
pub mod timeline;

pub use engine::{Failure, Progress, Start, evaluate};
pub use invariants::{Rule, Violation};
pub use timeline::{EventKind, State};

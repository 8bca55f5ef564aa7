//! The case format: typed vocabulary ([`model`], [`pattern`]), durations and the loader.

pub mod api_fault;
pub mod duration;
pub mod features;
pub mod load;
mod locate;
mod manifest;
pub mod model;
pub mod object_steps;
pub mod observe;
pub mod pattern;
pub mod peers;
pub mod streams;
pub(crate) mod tagged;
mod validate;
pub mod version;

pub use duration::CaseDuration;
pub use load::{CaseId, Loaded, LoadedCase, load_dir, load_file};
pub use model::{
    AgentStep, AgentTimings, Case, Delete, Fault, Object, Requirement, Step, UpstreamTest,
};
pub use object_steps::{DeleteObject, PatchStep, PatchType, Subresource, Target};
pub use observe::{EventExpectation, EventPattern, EventSubject, EventType, LogExpectation};
pub use pattern::{
    ConditionPattern, ConditionStatus, ContainerPattern, ContainerStateKind, Interval,
    NodeExpectation, Phase, PodExpectation, PodPattern, RuntimeExpectation, RuntimeResources,
};
pub use streams::{ExecStep, PortForwardStep, TextMatch};
pub use version::{MinorVersion, Versions};

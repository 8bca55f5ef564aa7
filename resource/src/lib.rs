//! Kubernetes resource arithmetic, one copy for every part that needs it: the API server
//! double compares and canonicalizes [`quantity`]s (QoS classes, defaulting, the resize
//! admission plugin) and the reference agent admits pods, sizes their containers and
//! reports their resources from the same [`pod`] requests and limits.
//!
//! Both modules follow upstream's `resource.Quantity` and
//! `k8s.io/component-helpers/resource` so that a quantity or a sum reads the same here as
//! in kube-apiserver and the kubelet.

pub mod pod;
pub mod quantity;

pub use quantity::Quantity;

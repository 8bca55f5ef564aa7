//! An in-process Kubernetes API server double for node agents, served over real HTTP(S) so
//! that any client — kube-rs, `kubectl`, client-go, a real kubelet — can use it.
//!
//! How the parts fit: [`server`] accepts connections (hyper, optional rustls from [`tls`],
//! bearer tokens from [`auth`]) and hands each request to [`handlers`], which resolves the
//! path ([`request`]) against the resource table ([`resources`]) and calls the
//! [`registry`]: create/update/delete with upstream's rules ([`strategy`] for per-resource
//! rules (the pod QoS class compares [`quantity`]s) and status/spec separation, [`defaults`]
//! for kube-apiserver's defaulting, graceful deletion, finalizers, namespaces) over the
//! [`store`] (JSON objects, one global `resourceVersion`, bounded event history). Reads go
//! through [`selectors`]; watches through [`watch`]; patches through [`patch`] and
//! [`strategic`]; `kubectl get` tables through [`table`]; discovery through [`discovery`]
//! and [`openapi`]; `pods/eviction` and `serviceaccounts/token` through [`subresources`];
//! `pods/binding` through [`binding`], used by the optional one-node [`scheduler`];
//! `pods/resize` through the registry with [`strategy`], then [`pod_resize_admission`];
//! `pods/log` through [`pod_log`], proxied to the node's kubelet by [`kubelet_client`], and
//! `pods/exec`, `pods/attach` and `pods/portforward` through [`pod_connect`], whose upgraded
//! connections are spliced to the kubelet's; `nodes/{name}/proxy` through [`node_proxy`];
//! events.k8s.io/v1 events are converted to and from core/v1 by [`events`].
//! Every error leaves as a `metav1.Status` via [`status`]. [`node_lifecycle`] optionally
//! plays the node lifecycle controller. [`version`] is the release the double answers as
//! (`--emulate-version`: 1.28 or 1.36, the newest by default).
//!
//! ```no_run
//! # async fn demo() -> Result<(), nodeconform_apiserver::Error> {
//! let api = nodeconform_apiserver::ApiServer::builder().start().await?;
//! api.write_kubeconfig("/tmp/kubeconfig")?; // KUBECONFIG=/tmp/kubeconfig kubectl get pods
//! let client = api.client();
//! # drop(client);
//! api.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod auth;
pub mod binding;
pub mod defaults;
pub mod deletion;
pub mod discovery;
pub mod events;
pub mod field;
pub mod garbage_collector;
pub mod go_json;
pub mod handlers;
pub mod http;
pub mod kubeconfig;
pub mod kubelet_client;
pub mod list;
pub mod managed_fields;
pub mod meta;
pub mod metrics_api;
pub mod node_declared_features;
pub mod node_lifecycle;
pub mod node_proxy;
pub mod openapi;
pub mod patch;
pub mod pod_connect;
pub mod pod_log;
pub mod pod_resize_admission;
pub mod protobuf;
pub use nodeconform_resource::quantity;
pub mod registry;
pub mod request;
pub mod resources;
pub mod scheduler;
pub mod selectors;
pub mod server;
pub mod service;
pub mod status;
pub mod store;
pub mod strategic;
pub mod strategy;
pub mod subresources;
pub mod table;
pub mod tls;
pub mod validate;
pub mod validation;
pub mod version;
pub mod watch;
pub mod wire;

pub use server::{ApiServer, Builder, Error};
pub use version::Version;

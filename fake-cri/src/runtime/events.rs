//! Container events: sent on every lifecycle change, streamed to subscribers
//! until the runtime restarts or shuts down.

use nodeconform_cri::v1;
use tokio::sync::{broadcast, mpsc};

use super::state::{Runtime, State, now};
use crate::container::Container;
use crate::error::Result;

impl Runtime {
    /// Sends an event for a container (or, with `container_id == sandbox_id`,
    /// for the sandbox itself, as containerd does) with the sandbox's status
    /// and all its containers' statuses, as the evented PLEG expects.
    pub(super) fn emit(
        &self,
        state: &State,
        container_id: &str,
        sandbox_id: &str,
        kind: v1::ContainerEventType,
    ) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let Some(sandbox) = state.sandboxes.get(sandbox_id) else {
            return;
        };
        let event = v1::ContainerEventResponse {
            container_id: container_id.to_owned(),
            container_event_type: kind as i32,
            created_at: now(),
            pod_sandbox_status: Some(sandbox.status()),
            containers_statuses: state
                .containers
                .values()
                .filter(|c| c.sandbox_id == sandbox_id)
                .map(Container::status)
                .collect(),
        };
        let _ = self.events.send(event);
    }

    /// A stream of container events until the runtime restarts or shuts down.
    pub(crate) fn subscribe(
        &self,
    ) -> mpsc::Receiver<Result<v1::ContainerEventResponse, tonic::Status>> {
        let mut events = self.events.subscribe();
        let mut epoch = self.epoch.subscribe();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = events.recv() => {
                        let item = match event {
                            Ok(event) => Ok(event),
                            Err(broadcast::error::RecvError::Lagged(n)) => Err(tonic::Status::resource_exhausted(
                                format!("event stream fell {n} events behind; subscribe again and relist"),
                            )),
                            Err(broadcast::error::RecvError::Closed) => break,
                        };
                        let end = item.is_err();
                        if tx.send(item).await.is_err() || end {
                            break;
                        }
                    }
                    _ = epoch.changed() => break,
                    () = tx.closed() => break,
                }
            }
        });
        rx
    }

    /// Ends every event stream (on shutdown).
    pub(crate) fn close_streams(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }
}

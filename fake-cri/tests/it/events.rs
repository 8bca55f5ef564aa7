//! GetContainerEvents: the evented PLEG's stream.

use crate::common;

use common::{Env, LIMIT};
use nodeconform_cri::v1;
use tokio_stream::StreamExt;
use tonic::Streaming;

async fn subscribe(env: &mut Env) -> Streaming<v1::ContainerEventResponse> {
    env.runtime
        .get_container_events(v1::GetEventsRequest {})
        .await
        .expect("GetContainerEvents")
        .into_inner()
}

/// The next event about `id`, skipping others.
async fn next_for(
    events: &mut Streaming<v1::ContainerEventResponse>,
    id: &str,
) -> v1::ContainerEventResponse {
    tokio::time::timeout(LIMIT, async {
        loop {
            let event = events
                .next()
                .await
                .expect("the stream stays open")
                .expect("an event, not an error");
            if event.container_id == id {
                return event;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no event for {id} within {LIMIT:?}"))
}

fn kind(event: &v1::ContainerEventResponse) -> v1::ContainerEventType {
    v1::ContainerEventType::try_from(event.container_event_type).unwrap()
}

#[tokio::test]
async fn container_lifecycle_events() {
    let mut env = Env::start().await;
    let mut events = subscribe(&mut env).await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 0.1; exit 3").await;

    let created = next_for(&mut events, &id).await;
    assert_eq!(
        kind(&created),
        v1::ContainerEventType::ContainerCreatedEvent
    );
    let pod = created
        .pod_sandbox_status
        .as_ref()
        .expect("pod_sandbox_status is set");
    assert_eq!(pod.id, sandbox);
    assert_eq!(pod.metadata.as_ref().unwrap().name, "pod");
    assert!(created.created_at > 0);
    let statuses = &created.containers_statuses;
    assert!(
        statuses
            .iter()
            .any(|s| s.id == id && s.state == v1::ContainerState::ContainerCreated as i32)
    );

    let started = next_for(&mut events, &id).await;
    assert_eq!(
        kind(&started),
        v1::ContainerEventType::ContainerStartedEvent
    );
    assert!(started.pod_sandbox_status.is_some());
    let stopped = next_for(&mut events, &id).await;
    assert_eq!(
        kind(&stopped),
        v1::ContainerEventType::ContainerStoppedEvent
    );
    let mine = stopped
        .containers_statuses
        .iter()
        .find(|s| s.id == id)
        .expect("its status");
    assert_eq!(mine.state, v1::ContainerState::ContainerExited as i32);
    assert_eq!(mine.exit_code, 3);
    assert!(started.created_at <= stopped.created_at);

    env.remove(&id).await.unwrap();
    let deleted = next_for(&mut events, &id).await;
    assert_eq!(
        kind(&deleted),
        v1::ContainerEventType::ContainerDeletedEvent
    );
    assert_eq!(deleted.pod_sandbox_status.as_ref().unwrap().id, sandbox);
    assert!(
        deleted.containers_statuses.iter().all(|s| s.id != id),
        "sent after removal"
    );
}

#[tokio::test]
async fn stop_kill_and_sandbox_events() {
    let mut env = Env::start().await;
    let mut events = subscribe(&mut env).await;
    let sandbox = env.sandbox("pod").await;
    // The sandbox's own events carry its id as the container id, as in containerd.
    assert_eq!(
        kind(&next_for(&mut events, &sandbox).await),
        v1::ContainerEventType::ContainerCreatedEvent
    );
    assert_eq!(
        kind(&next_for(&mut events, &sandbox).await),
        v1::ContainerEventType::ContainerStartedEvent
    );

    let stopped = env.run(&sandbox, "stopped", "sleep 600").await;
    let killed = env.run(&sandbox, "killed", "sleep 600").await;
    env.stop(&stopped, 0).await.unwrap();
    env.cri
        .control()
        .kill(nodeconform_fake_cri::KillTarget::Id(killed.clone()), true)
        .unwrap();
    let mut kinds: std::collections::HashMap<String, Vec<v1::ContainerEventType>> =
        Default::default();
    let stopped_event = v1::ContainerEventType::ContainerStoppedEvent;
    tokio::time::timeout(LIMIT, async {
        while [&stopped, &killed]
            .iter()
            .any(|id| !kinds.get(*id).is_some_and(|k| k.contains(&stopped_event)))
        {
            let event = events.next().await.expect("open").expect("an event");
            kinds
                .entry(event.container_id.clone())
                .or_default()
                .push(kind(&event));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("both containers stop; events so far: {kinds:?}"));
    for id in [&stopped, &killed] {
        assert_eq!(
            kinds[id],
            [
                v1::ContainerEventType::ContainerCreatedEvent,
                v1::ContainerEventType::ContainerStartedEvent,
                v1::ContainerEventType::ContainerStoppedEvent
            ]
        );
    }

    env.remove_sandbox(&sandbox).await.unwrap();
    // Until the sandbox's deletion: its stop, then its containers' deletion, then its own.
    let mut seen = Vec::new();
    tokio::time::timeout(LIMIT, async {
        loop {
            let event = events.next().await.expect("open").expect("an event");
            let done = event.container_id == sandbox
                && kind(&event) == v1::ContainerEventType::ContainerDeletedEvent;
            seen.push(event);
            if done {
                break;
            }
        }
    })
    .await
    .expect("the sandbox's deleted event");
    let summary: Vec<(&str, v1::ContainerEventType)> = seen
        .iter()
        .map(|e| {
            let who = if e.container_id == sandbox {
                "sandbox"
            } else if e.container_id == stopped {
                "stopped"
            } else {
                "killed"
            };
            (who, kind(e))
        })
        .collect();
    assert_eq!(summary.len(), 4, "{summary:?}");
    assert_eq!(
        summary[0],
        ("sandbox", v1::ContainerEventType::ContainerStoppedEvent)
    );
    assert!(summary[1..3].contains(&("stopped", v1::ContainerEventType::ContainerDeletedEvent)));
    assert!(summary[1..3].contains(&("killed", v1::ContainerEventType::ContainerDeletedEvent)));
    assert_eq!(
        seen[0].pod_sandbox_status.as_ref().unwrap().state,
        v1::PodSandboxState::SandboxNotready as i32
    );
}

#[tokio::test]
async fn every_subscriber_gets_every_event() {
    let mut env = Env::start().await;
    let mut first = subscribe(&mut env).await;
    let mut second = subscribe(&mut env).await;
    let sandbox = env.sandbox("pod").await;
    let id = env.create(&sandbox, "c", "exit 0").await.unwrap();
    for events in [&mut first, &mut second] {
        assert_eq!(
            kind(&next_for(events, &id).await),
            v1::ContainerEventType::ContainerCreatedEvent
        );
    }
}

#[tokio::test]
async fn a_restart_ends_the_stream() {
    let mut env = Env::start().await;
    let mut events = subscribe(&mut env).await;
    env.cri.control().restart();
    let end = tokio::time::timeout(LIMIT, async {
        loop {
            match events.next().await {
                None => return Ok(()),
                Some(Err(status)) => return Err(status),
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("the stream ends after a restart");
    // Ending cleanly or with an error both tell the kubelet to relist.
    let _ = end;
    // A new subscription works.
    let mut events = subscribe(&mut env).await;
    let sandbox = env.sandbox("pod").await;
    next_for(&mut events, &sandbox).await;
}

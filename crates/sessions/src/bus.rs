//! The session lifecycle bus (spec sessions §5.6): in-process, synchronous,
//! listeners called in registration order; a listener that fails or panics
//! never affects the others or the emitter. The same events are available as
//! an async `Stream` for live consumers.
//!
//! What the bus carries is a projection of the store stream: every store
//! event appended becomes one [`LifecycleEvent`] ([`lifecycle`]), published
//! by the store's writer once the event is in the log.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::Stream;
use serde::Serialize;
use serde_json::Value;

use crate::store::{Store, StoreEvent};

/// A lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleEvent {
    /// The session key.
    pub session_key: String,
    /// The agent.
    pub agent_id: Option<String>,
    /// `created`, `updated`, `reset`, `deleted`, `subagent-status`, …
    pub reason: String,
    /// The parent session, for forks and sub-agents.
    pub parent_session_key: Option<String>,
    /// The session's label.
    pub label: Option<String>,
    /// The session's display name.
    pub display_name: Option<String>,
}

/// The lifecycle event a store event becomes, read against the store as it
/// stands after the event (for the label, display name and parent): reason
/// `created` (created, imported, forked, sub-agent spawned), `reset`,
/// `deleted` (deleted, archived), `subagent-status` (a sub-agent ended), or
/// `updated` (everything else).
pub fn lifecycle(agent_id: &str, event: &StoreEvent, store: &Store) -> LifecycleEvent {
    let reason = match event {
        StoreEvent::Imported { .. }
        | StoreEvent::Created { .. }
        | StoreEvent::Forked { .. }
        | StoreEvent::SubagentSpawned { .. } => "created",
        StoreEvent::Reset { .. } => "reset",
        StoreEvent::Deleted { .. } | StoreEvent::Archived { .. } => "deleted",
        StoreEvent::SubagentEnded { .. } => "subagent-status",
        _ => "updated",
    };
    let entry = store.get(event.key()).and_then(Value::as_object);
    let field = |k: &str| entry.and_then(|e| e.get(k)).and_then(Value::as_str).map(str::to_owned);
    LifecycleEvent {
        session_key: event.key().to_owned(),
        agent_id: Some(agent_id.to_owned()),
        reason: reason.to_owned(),
        parent_session_key: field("parentSessionKey").or_else(|| field("spawnedBy")),
        label: field("label"),
        display_name: field("displayName"),
    }
}

type Listener = Arc<dyn Fn(&LifecycleEvent) -> Result<(), String> + Send + Sync>;

#[derive(Default)]
struct Listeners {
    next: AtomicU64,
    list: Mutex<Vec<(u64, Listener)>>,
}

impl Listeners {
    fn lock(&self) -> MutexGuard<'_, Vec<(u64, Listener)>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The bus. Cloning shares it.
#[derive(Clone, Default)]
pub struct Bus {
    inner: Arc<Listeners>,
}

/// A subscription; dropping it unsubscribes.
pub struct Subscription {
    id: u64,
    bus: Weak<Listeners>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(bus) = self.bus.upgrade() {
            bus.lock().retain(|(id, _)| *id != self.id);
        }
    }
}

/// What one emit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivery {
    /// Listeners that took the event.
    pub delivered: usize,
    /// Listeners that returned an error.
    pub failed: usize,
    /// Listeners that panicked.
    pub panicked: usize,
}

impl Bus {
    /// A new bus.
    pub fn new() -> Bus {
        Bus::default()
    }

    /// Adds a listener; it stays until the returned handle is dropped.
    pub fn subscribe(
        &self,
        listener: impl Fn(&LifecycleEvent) -> Result<(), String> + Send + Sync + 'static,
    ) -> Subscription {
        let id = self.inner.next.fetch_add(1, Ordering::SeqCst);
        self.inner.lock().push((id, Arc::new(listener)));
        Subscription { id, bus: Arc::downgrade(&self.inner) }
    }

    /// Calls every listener in registration order; failures and panics are
    /// counted and logged, never propagated.
    pub fn emit(&self, event: &LifecycleEvent) -> Delivery {
        // Call outside the lock: a listener may subscribe or unsubscribe.
        let listeners: Vec<Listener> = self.inner.lock().iter().map(|(_, l)| l.clone()).collect();
        let mut d = Delivery::default();
        for l in listeners {
            match catch_unwind(AssertUnwindSafe(|| l(event))) {
                Ok(Ok(())) => d.delivered += 1,
                Ok(Err(_)) => d.failed += 1,
                Err(_) => d.panicked += 1,
            }
        }
        d
    }

    /// The events from now on as an async stream; dropping the stream unsubscribes.
    pub fn stream(&self) -> impl Stream<Item = LifecycleEvent> + Send + 'static {
        let (tx, mut rx) = futures::channel::mpsc::unbounded();
        let subscription = self.subscribe(move |e| tx.unbounded_send(e.clone()).map_err(|e| e.to_string()));
        async_stream::stream! {
            let _subscription = subscription;
            while let Some(event) = futures::StreamExt::next(&mut rx).await {
                yield event;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures::StreamExt;

    use super::*;

    fn event(key: &str, reason: &str) -> LifecycleEvent {
        LifecycleEvent {
            session_key: key.into(),
            agent_id: Some("main".into()),
            reason: reason.into(),
            parent_session_key: None,
            label: None,
            display_name: None,
        }
    }

    #[test]
    fn listeners_run_in_order_and_bad_ones_do_not_stop_the_rest() {
        let bus = Bus::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s1 = seen.clone();
        let _a = bus.subscribe(move |e| {
            s1.lock().unwrap().push(format!("a:{}", e.reason));
            Ok(())
        });
        let _b = bus.subscribe(|_| panic!("listener bug"));
        let _c = bus.subscribe(|_| Err("listener failed".to_owned()));
        let s2 = seen.clone();
        let _d = bus.subscribe(move |e| {
            s2.lock().unwrap().push(format!("d:{}", e.reason));
            Ok(())
        });
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let d = bus.emit(&event("agent:main:main", "created"));
        std::panic::set_hook(hook);
        assert_eq!(d, Delivery { delivered: 2, failed: 1, panicked: 1 });
        assert_eq!(*seen.lock().unwrap(), ["a:created", "d:created"]);
    }

    #[test]
    fn store_events_project_to_lifecycle_events() {
        let store: Store = serde_json::from_value(serde_json::json!({
            "agent:main:subagent:x": {"sessionId": "s", "spawnedBy": "agent:main:main", "label": "child"}
        }))
        .unwrap();
        let spawned = StoreEvent::SubagentSpawned {
            key: "agent:main:subagent:x".into(),
            at: 1,
            session_id: "s".into(),
            spawned_by: "agent:main:main".into(),
            depth: 1,
        };
        let e = lifecycle("main", &spawned, &store);
        assert_eq!(
            (e.reason.as_str(), e.parent_session_key.as_deref(), e.label.as_deref()),
            ("created", Some("agent:main:main"), Some("child"))
        );
        let ended =
            StoreEvent::SubagentEnded { key: "agent:main:subagent:x".into(), at: 2, status: "done".into() };
        assert_eq!(lifecycle("main", &ended, &store).reason, "subagent-status");
        let gone = StoreEvent::Deleted { key: "agent:main:gone".into(), at: 3 };
        let e = lifecycle("main", &gone, &store);
        assert_eq!((e.reason.as_str(), e.label), ("deleted", None));
    }

    #[test]
    fn dropping_the_handle_unsubscribes() {
        let bus = Bus::new();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let sub = bus.subscribe(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        bus.emit(&event("k", "updated"));
        drop(sub);
        assert_eq!(bus.emit(&event("k", "updated")), Delivery::default());
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_stream_sees_events_and_unsubscribes_when_dropped() {
        let bus = Bus::new();
        let mut stream = Box::pin(bus.stream());
        bus.emit(&event("agent:main:main", "created"));
        bus.emit(&event("agent:main:main", "reset"));
        let got: Vec<String> = futures::executor::block_on(async {
            let mut out = Vec::new();
            for _ in 0..2 {
                out.push(stream.next().await.unwrap().reason);
            }
            out
        });
        assert_eq!(got, ["created", "reset"]);
        drop(stream);
        assert_eq!(bus.emit(&event("k", "x")).delivered, 0);
    }
}

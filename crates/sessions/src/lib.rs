//! OpenClaw's session layer, rebuilt as pure functions (first part).
//!
//! * [`bus`] — the lifecycle bus: handles that unsubscribe on drop, isolated
//!   listeners, and the same events as an async `Stream`.
//! * [`keys`] — session ids, the session-key grammar, normalisation that keeps
//!   provider-owned case, and the parsing helpers (agent, chat type, cron,
//!   sub-agent depth, ACP, hooks, threads).
//! * [`route`] — an inbound message to its agent (binding tiers) and key (DM scope).
//! * [`turn`] — the per-turn decision of `initSessionState`: reset triggers
//!   (structural prefixes and mentions stripped), then freshness.
//! * [`maintenance`] — which entries a save prunes (stale, over the cap) and
//!   which transcripts lose their last entry, as a pure plan.
//! * [`paths`] — transcript paths kept inside the sessions folder, archive names.
//! * [`provenance`] — input provenance on user messages.
//! * [`policy`] — reset freshness (clock passed in) and send-policy resolution.
//! * [`store`] — store events and their fold, the `sessions.json` projection,
//!   and import of an existing store as one `imported` event per entry.
//!
//! Not built yet: of `initSessionState`, the entry it builds around the
//! decision (delivery fields, group metadata, parent forks, the carry-over
//! lists that differ between explicit and automatic resets); of maintenance,
//! archive retention, store rotation and the disk budget.

pub mod bus;
pub mod keys;
pub mod maintenance;
pub mod paths;
pub mod policy;
pub mod route;
pub mod store;
pub mod turn;

pub use sessionlog_events::provenance;

pub use keys::{key_info, normalize_key, parse_agent_key, ChatType, KeyInfo, KeyShape};
pub use route::{route, Binding, DmScope, Inbound, Peer, PeerKind, Route, RouteConfig};

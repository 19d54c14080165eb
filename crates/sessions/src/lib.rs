//! OpenClaw's session layer, rebuilt as pure functions (first part).
//!
//! * [`keys`] — session ids, the session-key grammar, normalisation that keeps
//!   provider-owned case, and the parsing helpers (agent, chat type, cron,
//!   sub-agent depth, ACP, hooks, threads).
//! * [`route`] — an inbound message to its agent (binding tiers) and key (DM scope).
//!
//! Store events, the `sessions.json` projection, reset rules and import are
//! not built yet.

pub mod keys;
pub mod route;

pub use keys::{key_info, normalize_key, parse_agent_key, ChatType, KeyInfo, KeyShape};
pub use route::{route, Binding, DmScope, Inbound, Peer, PeerKind, Route, RouteConfig};

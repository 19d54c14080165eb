//! The model context, exactly as Pi (and so OpenClaw) builds it, under the
//! rules of Pi 0.58.3 or Pi 1.6.0 ([`PiRules`]).
//!
//! * [`assemble`] — `buildSessionContext`: the root→leaf path, model and
//!   thinking level from the path, the last compaction's summary and kept
//!   range, branch summaries and custom messages ([`build`], [`Leaf`],
//!   [`AgentMessage`]).
//! * [`projection`] — Pi 1.6's session projection: context edits, system
//!   messages, the compaction's system snapshot, entry by entry.
//! * [`llm`] — `convertToLlm` (the provider-facing messages, wrappers byte for
//!   byte) and `serializeConversation` (the summariser's text).
//! * [`cut`] — the compaction decision: context estimate, `shouldCompact`,
//!   cut points, turn starts, `findCutPoint`, `prepareCompaction`, file lists.
//! * [`pairing`] — tool-call/result pairs broken in a context, as diagnostics.
//! * [`engine`] — the pluggable context engine: trait, `legacy` and `pinned`
//!   engines, the registry with owners, the session-key adapter.
//! * [`prune`] — cache-TTL pruning of old tool results (`now` passed in).
//! * [`hygiene`] — per-provider-family repairs, driven by a table.
//! * [`fast`] — the `context` document straight from a transcript's bytes:
//!   each line parsed once, stored messages written from their raw slices,
//!   on all cores; the general path's document byte for byte.
//! * `doc` — the JSON documents of `sessionlog context` and `sessionlog cut`.
//! * `provider` — the provider-facing context for one model call: history
//!   limit → engine `assemble` → pruning → hygiene ([`provider_context`]).
//! * [`live`] — the same provider context kept in memory and folded entry by
//!   entry as a live loop appends ([`live::LiveContext`]).
//!
//! Pure functions over `sessionlog-events` entries: no I/O, no clock.

pub mod assemble;
pub mod cut;
mod doc;
pub mod engine;
pub mod fast;
pub mod hygiene;
pub mod live;
pub mod llm;
pub mod pairing;
pub mod projection;
mod provider;
pub mod prune;
mod time;

pub use assemble::{build, build_with, resolve_leaf, AgentMessage, Context, ContextError, Leaf, Source};
pub use cut::{CutPoint, Settings};
pub use doc::{context_doc, cut_doc, entries_doc, ContextDoc, CutOptions};
pub use provider::{
    last_cache_touch, provider_context, HistoryLimit, ProviderContext, ProviderError, ProviderRequest,
};
pub use sessionlog_events::PiRules;
pub use time::{js_date_ms, parse_time_ms};

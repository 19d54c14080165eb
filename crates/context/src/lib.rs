//! The model context, exactly as Pi (and so OpenClaw) builds it.
//!
//! * [`assemble`] — `buildSessionContext`: the root→leaf path, model and
//!   thinking level from the path, the last compaction's summary and kept
//!   range, branch summaries and custom messages ([`build`], [`Leaf`],
//!   [`AgentMessage`]).
//! * [`llm`] — `convertToLlm` (the provider-facing messages, wrappers byte for
//!   byte) and `serializeConversation` (the summariser's text).
//! * [`cut`] — the compaction decision: context estimate, `shouldCompact`,
//!   cut points, turn starts, `findCutPoint`, `prepareCompaction`, file lists.
//! * [`pairing`] — tool-call/result pairs broken in a context, as diagnostics.
//! * [`engine`] — the pluggable context engine: trait, `legacy` and `pinned`
//!   engines, the registry with owners, the session-key adapter.
//! * [`prune`] — cache-TTL pruning of old tool results (`now` passed in).
//! * [`hygiene`] — per-provider-family repairs, driven by a table.
//! * [`doc`] — the JSON documents of `sessionlog context` and `sessionlog cut`.
//!
//! Pure functions over `sessionlog-events` entries: no I/O, no clock.

pub mod assemble;
pub mod cut;
pub mod doc;
pub mod engine;
pub mod hygiene;
pub mod llm;
pub mod pairing;
pub mod prune;
mod time;

pub use assemble::{build, resolve_leaf, AgentMessage, Context, ContextError, Leaf, Source};
pub use cut::{CutPoint, Settings};
pub use doc::{context_doc, cut_doc, CutOptions};
pub use time::js_date_ms;

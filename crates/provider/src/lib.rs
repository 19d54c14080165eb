//! Streaming model clients for sessionlog's live agent loop.
//!
//! * [`sse`] — a sans-IO Server-Sent Events parser.
//! * [`partial_json`] — tool-call arguments from JSON cut short, as Pi reads them.

pub mod partial_json;
pub mod sse;

//! The typed events a model stream yields, the same for every API.
//!
//! `index` is the position of the block in the final message's `content`
//! (Pi's `contentIndex`). A stream ends with exactly one terminal delta:
//! [`Delta::Stop`] or [`Delta::Error`]. [`Delta::Retry`] may come before
//! anything else, once per failed attempt that is retried.
//!
//! Deltas serialise as JSON objects tagged by `type` (the recording and the
//! CLI's `--json` output use this form):
//! `{"type":"textDelta","index":0,"text":"Hel"}`.

use serde::{Deserialize, Serialize};

use crate::error::ProviderError;
use crate::message::StopReason;

/// Token counts a stream reported, in Pi's terms. A field that is `None`
/// keeps its earlier value (Anthropic's `message_delta` may leave some out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    /// Uncached input tokens.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub input: Option<u64>,
    /// Output tokens (reasoning included).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub output: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_read: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_write: Option<u64>,
}

/// One event of a model stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Delta {
    /// An attempt failed and will be retried after `delay_ms`.
    Retry {
        /// The attempt that failed (1 for the first).
        attempt: u32,
        /// How long the client waits before the next attempt.
        delay_ms: u64,
        /// Why the attempt failed.
        error: ProviderError,
    },
    /// The server accepted the request; content follows.
    Start,
    /// A text block opens.
    TextStart {
        /// Its content index.
        index: usize,
    },
    /// Text appended to a block.
    TextDelta {
        /// The block's content index.
        index: usize,
        /// The new text.
        text: String,
    },
    /// A text block is complete.
    TextEnd {
        /// Its content index.
        index: usize,
    },
    /// A thinking block opens.
    ThinkingStart {
        /// Its content index.
        index: usize,
        /// The initial `thinkingSignature` (Anthropic starts with `""`; an
        /// OpenAI-compatible server names the field the reasoning came in).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        signature: Option<String>,
    },
    /// Thinking text appended to a block.
    ThinkingDelta {
        /// The block's content index.
        index: usize,
        /// The new thinking text.
        text: String,
    },
    /// Signature text appended to a thinking block's `thinkingSignature`.
    ThinkingSignature {
        /// The block's content index.
        index: usize,
        /// The new signature text.
        signature: String,
    },
    /// A whole redacted thinking block (its opaque payload).
    RedactedThinking {
        /// Its content index.
        index: usize,
        /// The payload, stored as `thinkingSignature`.
        data: String,
    },
    /// A thinking block is complete.
    ThinkingEnd {
        /// Its content index.
        index: usize,
    },
    /// A tool call opens.
    ToolCallStart {
        /// Its content index.
        index: usize,
        /// The call id (may be empty until a later delta names it).
        id: String,
        /// The tool name (may be empty until a later delta names it).
        name: String,
    },
    /// Argument text appended to a tool call (or a late id or name).
    ToolCallDelta {
        /// The call's content index.
        index: usize,
        /// A call id that replaces the current one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<String>,
        /// A tool name that replaces the current one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        name: Option<String>,
        /// The new JSON text of the arguments.
        arguments: String,
    },
    /// An opaque reasoning signature attached to a tool call
    /// (`thoughtSignature`).
    ToolCallSignature {
        /// The call's content index.
        index: usize,
        /// The signature.
        signature: String,
    },
    /// A tool call is complete; its arguments are parsed.
    ToolCallEnd {
        /// Its content index.
        index: usize,
    },
    /// Token counts so far.
    Usage(TokenCounts),
    /// The stream finished normally (terminal).
    Stop {
        /// Why the model stopped.
        reason: StopReason,
    },
    /// The stream failed (terminal).
    Error {
        /// What went wrong, classified.
        error: ProviderError,
    },
}

impl Delta {
    /// True for [`Delta::Stop`] and [`Delta::Error`].
    pub fn is_terminal(&self) -> bool {
        matches!(self, Delta::Stop { .. } | Delta::Error { .. })
    }
}

//! The assistant message exactly as Pi persists it, and the accumulator
//! that builds it from a delta stream.
//!
//! ```json
//! {"role":"assistant","content":[{"type":"text","text":"Hi"}],
//!  "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5",
//!  "usage":{"input":12,"output":3,"cacheRead":0,"cacheWrite":0,"totalTokens":15,
//!           "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
//!  "stopReason":"stop","timestamp":1767225605000}
//! ```
//!
//! Key order, the `errorMessage` texts and the leftovers of an interrupted
//! block follow Pi 0.58.3's providers: a failed or aborted stream keeps the
//! blocks it had; a tool call still open keeps its raw argument text under
//! `partialArgs` (OpenAI) or `partialJson` (Anthropic) beside the arguments
//! parsed so far.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::delta::{Delta, TokenCounts};
use crate::error::{ErrorClass, ProviderError};
use crate::model::{Api, Model, ModelCost};
use crate::partial_json::parse_streaming;

/// Why the model stopped (Pi's `StopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// It finished (`stop`).
    Stop,
    /// It hit the output limit (`length`).
    Length,
    /// It called tools (`toolUse`).
    ToolUse,
    /// The request or stream failed (`error`).
    Error,
    /// The caller aborted it (`aborted`).
    Aborted,
}

impl StopReason {
    /// Pi's name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

/// Dollar costs of a call (Pi's `usage.cost`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cost {
    /// For uncached input.
    pub input: f64,
    /// For output.
    pub output: f64,
    /// For cache reads.
    pub cache_read: f64,
    /// For cache writes.
    pub cache_write: f64,
    /// The sum of the four, added in that order.
    pub total: f64,
}

/// Token usage of a call (Pi's `Usage`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache reads.
    pub cache_read: u64,
    /// Cache writes.
    pub cache_write: u64,
    /// The sum of the four.
    pub total_tokens: u64,
    /// Their price.
    pub cost: Cost,
}

impl Usage {
    fn apply(&mut self, counts: &TokenCounts, prices: &ModelCost) {
        self.input = counts.input.unwrap_or(self.input);
        self.output = counts.output.unwrap_or(self.output);
        self.cache_read = counts.cache_read.unwrap_or(self.cache_read);
        self.cache_write = counts.cache_write.unwrap_or(self.cache_write);
        self.total_tokens = self.input + self.output + self.cache_read + self.cache_write;
        let per = |price: f64, tokens: u64| (price / 1_000_000.0) * tokens as f64;
        let input = per(prices.input, self.input);
        let output = per(prices.output, self.output);
        let cache_read = per(prices.cache_read, self.cache_read);
        let cache_write = per(prices.cache_write, self.cache_write);
        self.cost =
            Cost { input, output, cache_read, cache_write, total: input + output + cache_read + cache_write };
    }
}

/// One content block of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning.
    Thinking {
        /// The reasoning text (`[Reasoning redacted]` when redacted).
        thinking: String,
        /// `thinkingSignature`, when the provider gave one.
        signature: Option<String>,
        /// The payload is opaque (Anthropic's `redacted_thinking`).
        redacted: bool,
    },
    /// A tool call.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
        /// The arguments as parsed (Pi's `parseStreamingJson`).
        arguments: Value,
        /// `thoughtSignature`, when the provider attached one.
        thought_signature: Option<String>,
        /// The raw argument text of a call the stream never closed, kept as
        /// Pi keeps it (`partialArgs` or `partialJson`).
        unfinished: Option<String>,
    },
}

/// The final assistant message (Pi's `AssistantMessage`).
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    /// The content blocks.
    pub content: Vec<Block>,
    /// The model's API.
    pub api: Api,
    /// The provider name.
    pub provider: String,
    /// The model id.
    pub model: String,
    /// Usage and cost.
    pub usage: Usage,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// When the call started (ms since the epoch).
    pub timestamp: i64,
    /// The error text for `error` and `aborted`.
    pub error_message: Option<String>,
    /// The classified error behind `error` and `aborted`.
    pub error: Option<ProviderError>,
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

impl AssistantMessage {
    /// The message as Pi stores it in a `message` entry, keys in Pi's order.
    pub fn to_json(&self) -> Value {
        let content: Vec<Value> = self.content.iter().map(|b| self.block_json(b)).collect();
        let u = &self.usage;
        let mut out = Map::new();
        out.insert("role".into(), json!("assistant"));
        out.insert("content".into(), Value::Array(content));
        out.insert("api".into(), json!(self.api.as_str()));
        out.insert("provider".into(), json!(self.provider));
        out.insert("model".into(), json!(self.model));
        out.insert(
            "usage".into(),
            json!({
                "input": u.input, "output": u.output, "cacheRead": u.cache_read,
                "cacheWrite": u.cache_write, "totalTokens": u.total_tokens,
                "cost": {
                    "input": number(u.cost.input), "output": number(u.cost.output),
                    "cacheRead": number(u.cost.cache_read), "cacheWrite": number(u.cost.cache_write),
                    "total": number(u.cost.total),
                },
            }),
        );
        out.insert("stopReason".into(), json!(self.stop_reason.as_str()));
        out.insert("timestamp".into(), json!(self.timestamp));
        if let Some(message) = &self.error_message {
            out.insert("errorMessage".into(), json!(message));
        }
        Value::Object(out)
    }

    /// `JSON.stringify` of [`AssistantMessage::to_json`].
    pub fn to_json_string(&self) -> String {
        sessionlog_events::json::to_js_string(&self.to_json()).unwrap_or_default()
    }

    fn block_json(&self, block: &Block) -> Value {
        let mut out = Map::new();
        match block {
            Block::Text { text } => {
                out.insert("type".into(), json!("text"));
                out.insert("text".into(), json!(text));
            }
            Block::Thinking { thinking, signature, redacted } => {
                out.insert("type".into(), json!("thinking"));
                out.insert("thinking".into(), json!(thinking));
                if let Some(signature) = signature {
                    out.insert("thinkingSignature".into(), json!(signature));
                }
                if *redacted {
                    out.insert("redacted".into(), json!(true));
                }
            }
            Block::ToolCall { id, name, arguments, thought_signature, unfinished } => {
                out.insert("type".into(), json!("toolCall"));
                out.insert("id".into(), json!(id));
                out.insert("name".into(), json!(name));
                out.insert("arguments".into(), arguments.clone());
                if let Some(raw) = unfinished {
                    let key = match self.api {
                        Api::OpenAiCompletions => "partialArgs",
                        Api::AnthropicMessages => "partialJson",
                    };
                    out.insert(key.into(), json!(raw));
                }
                if let Some(signature) = thought_signature {
                    out.insert("thoughtSignature".into(), json!(signature));
                }
            }
        }
        Value::Object(out)
    }

    /// The tool calls, in order: `(id, name, arguments)`.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolCall { id, name, arguments, .. } => Some((id.as_str(), name.as_str(), arguments)),
            _ => None,
        })
    }

    /// The visible text, blocks joined without separator.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A block while it streams.
#[derive(Debug)]
struct Open {
    block: Block,
    /// Raw argument text of a tool call.
    raw: String,
    ended: bool,
}

/// Folds a delta stream into the final [`AssistantMessage`], as Pi's
/// providers build their `output` object.
#[derive(Debug)]
pub struct Accumulator {
    model: Model,
    timestamp: i64,
    blocks: Vec<Open>,
    usage: Usage,
    stop: Option<StopReason>,
    error: Option<ProviderError>,
}

impl Accumulator {
    /// An empty message for `model`, stamped `timestamp` (ms; Pi stamps the
    /// time the call starts).
    pub fn new(model: &Model, timestamp: i64) -> Accumulator {
        Accumulator {
            model: model.clone(),
            timestamp,
            blocks: Vec::new(),
            usage: Usage::default(),
            stop: None,
            error: None,
        }
    }

    fn block(&mut self, index: usize) -> Option<&mut Open> {
        self.blocks.get_mut(index)
    }

    fn open(&mut self, index: usize, block: Block) {
        // Deltas number blocks in order; a gap would be a decoder bug, so
        // the block goes at the end rather than panicking.
        let open = Open { block, raw: String::new(), ended: false };
        if index < self.blocks.len() {
            self.blocks[index] = open;
        } else {
            self.blocks.push(open);
        }
    }

    /// Applies one delta.
    pub fn push(&mut self, delta: &Delta) {
        match delta {
            Delta::Retry { .. } | Delta::Start => {}
            Delta::TextStart { index } => self.open(*index, Block::Text { text: String::new() }),
            Delta::TextDelta { index, text } => {
                if let Some(Open { block: Block::Text { text: t }, .. }) = self.block(*index) {
                    t.push_str(text);
                }
            }
            Delta::ThinkingStart { index, signature } => self.open(
                *index,
                Block::Thinking { thinking: String::new(), signature: signature.clone(), redacted: false },
            ),
            Delta::ThinkingDelta { index, text } => {
                if let Some(Open { block: Block::Thinking { thinking, .. }, .. }) = self.block(*index) {
                    thinking.push_str(text);
                }
            }
            Delta::ThinkingSignature { index, signature } => {
                if let Some(Open { block: Block::Thinking { signature: s, .. }, .. }) = self.block(*index) {
                    s.get_or_insert_with(String::new).push_str(signature);
                }
            }
            Delta::RedactedThinking { index, data } => self.open(
                *index,
                Block::Thinking {
                    thinking: "[Reasoning redacted]".to_owned(),
                    signature: Some(data.clone()),
                    redacted: true,
                },
            ),
            Delta::ToolCallStart { index, id, name } => self.open(
                *index,
                Block::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Map::new()),
                    thought_signature: None,
                    unfinished: None,
                },
            ),
            Delta::ToolCallDelta { index, id, name, arguments } => {
                if let Some(open) = self.block(*index) {
                    open.raw.push_str(arguments);
                    if let Block::ToolCall { id: i, name: n, .. } = &mut open.block {
                        if let Some(id) = id.as_ref().filter(|s| !s.is_empty()) {
                            i.clone_from(id);
                        }
                        if let Some(name) = name.as_ref().filter(|s| !s.is_empty()) {
                            n.clone_from(name);
                        }
                    }
                }
            }
            Delta::ToolCallSignature { index, signature } => {
                if let Some(Open { block: Block::ToolCall { thought_signature, .. }, .. }) =
                    self.block(*index)
                {
                    *thought_signature = Some(signature.clone());
                }
            }
            Delta::TextEnd { index } | Delta::ThinkingEnd { index } | Delta::ToolCallEnd { index } => {
                if let Some(open) = self.block(*index) {
                    open.ended = true;
                }
            }
            Delta::Usage(counts) => self.usage.apply(counts, &self.model.cost),
            Delta::Stop { reason } => self.stop = Some(*reason),
            Delta::Error { error } => self.error = Some(error.clone()),
        }
    }

    /// The message so far, as it would be persisted if the stream stopped
    /// here (a stream that ended with neither `Stop` nor `Error` reads as
    /// cut off: `error`, "terminated").
    pub fn finish(&self) -> AssistantMessage {
        let failed = self.error.is_some() || !matches!(self.stop, Some(r) if r != StopReason::Error);
        let content = self
            .blocks
            .iter()
            .map(|open| match &open.block {
                Block::ToolCall { id, name, thought_signature, .. } => Block::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: parse_streaming(&open.raw),
                    thought_signature: thought_signature.clone(),
                    unfinished: (failed && !open.ended).then(|| open.raw.clone()),
                },
                other => other.clone(),
            })
            .collect();
        let (stop_reason, error) = match (&self.error, self.stop) {
            (Some(error), _) => {
                let reason =
                    if error.class == ErrorClass::Aborted { StopReason::Aborted } else { StopReason::Error };
                (reason, Some(error.clone()))
            }
            (None, Some(StopReason::Error | StopReason::Aborted)) => (
                StopReason::Error,
                Some(ProviderError::new(ErrorClass::Fatal, None, "An unknown error occurred")),
            ),
            (None, Some(reason)) => (reason, None),
            (None, None) => {
                (StopReason::Error, Some(ProviderError::new(ErrorClass::Transient, None, "terminated")))
            }
        };
        AssistantMessage {
            content,
            api: self.model.api,
            provider: self.model.provider.clone(),
            model: self.model.id.clone(),
            usage: self.usage,
            stop_reason,
            timestamp: self.timestamp,
            error_message: error.as_ref().map(|e| e.message.clone()),
            error,
        }
    }
}

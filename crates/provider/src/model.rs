//! What a request is made of: the model and its endpoint, the messages in
//! Pi's LLM form, the system prompt, the tools and the limits.

use serde_json::Value;

/// The wire protocol a model speaks, named as Pi names it (the assistant
/// message's `api` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI Chat Completions (`POST {base_url}/chat/completions`).
    OpenAiCompletions,
    /// Anthropic Messages (`POST {base_url}/v1/messages`).
    AnthropicMessages,
}

impl Api {
    /// Pi's name: `openai-completions` or `anthropic-messages`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::AnthropicMessages => "anthropic-messages",
        }
    }

    /// The API named by Pi's name.
    pub fn from_name(name: &str) -> Option<Api> {
        match name {
            "openai-completions" => Some(Api::OpenAiCompletions),
            "anthropic-messages" => Some(Api::AnthropicMessages),
            _ => None,
        }
    }
}

/// Prices in dollars per million tokens (Pi's `model.cost`); usage costs
/// are computed from them as Pi's `calculateCost` does.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelCost {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the prompt cache.
    pub cache_write: f64,
}

/// Which field carries the output limit on an OpenAI-compatible endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI's current name; Pi's default).
    MaxCompletionTokens,
    /// `max_tokens` (older servers).
    MaxTokens,
}

/// How far an OpenAI-compatible endpoint follows OpenAI (Pi's
/// `OpenAICompletionsCompat`); the defaults are Pi's for an unknown server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenAiCompat {
    /// Send `store: false`.
    pub store: bool,
    /// Send the system prompt as a `developer` message to reasoning models.
    pub developer_role: bool,
    /// Send `reasoning_effort` to reasoning models.
    pub reasoning_effort: bool,
    /// Ask for usage in the stream (`stream_options.include_usage`).
    pub usage_in_streaming: bool,
    /// The field that carries the output limit.
    pub max_tokens_field: MaxTokensField,
    /// Send `strict: false` in tool definitions.
    pub strict_mode: bool,
}

impl Default for OpenAiCompat {
    fn default() -> OpenAiCompat {
        OpenAiCompat {
            store: true,
            developer_role: true,
            reasoning_effort: true,
            usage_in_streaming: true,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            strict_mode: true,
        }
    }
}

/// A model at an endpoint (Pi's `Model`).
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The wire protocol.
    pub api: Api,
    /// The provider name recorded in the assistant message (`openai`,
    /// `anthropic`, or any name for a compatible server).
    pub provider: String,
    /// The model id sent to the server and recorded as `model`.
    pub id: String,
    /// The endpoint's base URL: `https://api.openai.com/v1` for OpenAI,
    /// `https://api.anthropic.com` for Anthropic.
    pub base_url: String,
    /// The model thinks (reasoning effort, thinking budgets, developer role).
    pub reasoning: bool,
    /// The model reads images (otherwise image blocks are left out).
    pub images: bool,
    /// The context window in tokens.
    pub context_window: u64,
    /// The most output tokens the model produces.
    pub max_tokens: u64,
    /// Prices for the usage cost.
    pub cost: ModelCost,
    /// Extra request headers (after the defaults, so they may override them).
    pub headers: Vec<(String, String)>,
    /// OpenAI-compatible quirks (ignored for Anthropic).
    pub compat: OpenAiCompat,
}

impl Model {
    /// A model with Pi's defaults for an unknown endpoint: no reasoning, no
    /// images, a 128 000-token window, 16 384 output tokens, no prices.
    pub fn new(api: Api, provider: &str, id: &str, base_url: &str) -> Model {
        Model {
            api,
            provider: provider.to_owned(),
            id: id.to_owned(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            reasoning: false,
            images: false,
            context_window: 128_000,
            max_tokens: 16_384,
            cost: ModelCost::default(),
            headers: Vec::new(),
            compat: OpenAiCompat::default(),
        }
    }
}

/// A tool the model may call (Pi's `Tool`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments as a JSON Schema object.
    pub parameters: Value,
}

/// How hard a reasoning model thinks (Pi's `ThinkingLevel`, `off` being no
/// level at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingLevel {
    /// `minimal`.
    Minimal,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `xhigh` (sent as `high` where the model has no higher level).
    XHigh,
}

impl ThinkingLevel {
    /// Pi's name of the level.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::XHigh => "xhigh",
        }
    }

    /// The level Pi's name stands for; `off` and unknown names are `None`.
    pub fn from_name(name: &str) -> Option<ThinkingLevel> {
        Some(match name {
            "minimal" => ThinkingLevel::Minimal,
            "low" => ThinkingLevel::Low,
            "medium" => ThinkingLevel::Medium,
            "high" => ThinkingLevel::High,
            "xhigh" => ThinkingLevel::XHigh,
            _ => return None,
        })
    }
}

/// One model call (Pi's `Context` plus the stream options the agent sets).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    /// The system prompt, if any.
    pub system_prompt: Option<String>,
    /// The conversation in Pi's LLM form: `user`, `assistant` and
    /// `toolResult` messages as `convertToLlm` produces them
    /// (`sessionlog_context::llm::LlmMessage::to_json`).
    pub messages: Vec<Value>,
    /// The tools; `Some(vec![])` still sends an empty list, as Pi does when
    /// its context has a tools array.
    pub tools: Option<Vec<Tool>>,
    /// The output limit; Pi's default is the model's, at most 32 000.
    pub max_tokens: Option<u64>,
    /// The sampling temperature, if set.
    pub temperature: Option<f64>,
    /// The thinking level; `None` is `off`.
    pub thinking: Option<ThinkingLevel>,
}

impl Request {
    /// The output limit Pi sends: the request's, else `min(model, 32000)`.
    pub fn effective_max_tokens(&self, model: &Model) -> u64 {
        self.max_tokens.filter(|n| *n > 0).unwrap_or(model.max_tokens.min(32_000))
    }
}

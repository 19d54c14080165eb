//! Streaming model clients for sessionlog's live agent loop.
//!
//! A [`Provider`] turns a [`Request`] (Pi's LLM messages, a system prompt,
//! tools, limits) into a stream of [`Delta`]s; an [`Accumulator`] folds the
//! stream into the [`AssistantMessage`] exactly as Pi persists it, so the
//! agent appends it as a `message` entry. Errors come classified
//! ([`ErrorClass`]: context overflow, rate limit, transient, fatal,
//! aborted), failed attempts are retried by a [`RetryPolicy`], and every
//! exchange can be recorded and replayed byte for byte.
//!
//! * [`HttpProvider`] — OpenAI Chat Completions ([`openai`]) and Anthropic
//!   Messages ([`anthropic`]) over a [`transport::Transport`].
//! * [`Recorded`] — a recording replayed ([`record`]); [`Scripted`] — deltas
//!   from a list.
//! * [`summarize`] — the model summariser behind compaction, with its
//!   content-addressed cache.
//! * [`sse`] — a sans-IO Server-Sent Events parser; [`partial_json`] — tool
//!   arguments from JSON cut short, as Pi reads them.
//!
//! This crate may use tokio and the network; the pure crates may not.

pub mod anthropic;
mod client;
mod config;
mod convert;
mod delta;
pub mod error;
mod message;
mod model;
pub mod openai;
pub mod partial_json;
pub mod record;
pub mod retry;
pub mod sse;
pub mod summarize;
pub mod transport;

pub use client::{
    build_request, complete, ClientOptions, DeltaStream, HttpProvider, Provider, Recorded, Scripted,
};
pub use config::{ModelConfig, ModelConfigError};
pub use delta::{Delta, TokenCounts};
pub use error::{is_context_overflow, ErrorClass, ProviderError};
pub use message::{Accumulator, AssistantMessage, Block, Cost, StopReason, Usage};
pub use model::{Api, MaxTokensField, Model, ModelCost, OpenAiCompat, Request, ThinkingLevel, Tool};
pub use retry::RetryPolicy;
pub use tokio_util::sync::CancellationToken;

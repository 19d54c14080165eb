//! The provider-facing context for one model call, as one function: the
//! projection at a leaf ([`crate::build`]), OpenClaw's history limit (the
//! last N user turns), `convertToLlm`, the context engine's `assemble` with
//! the token budget, cache-TTL pruning, and transcript hygiene for the
//! provider family — in that order, every step reported in the result.
//!
//! The live loop calls [`provider_context`] before each model call with the
//! session's engine; `sessionlog context --engine/--provider/…` prints
//! [`ProviderContext::to_json`].

use serde_json::{json, Value};
use sessionlog_events::{Entry, EntryKind, PiRules, Transcript};
use sessionlog_tokens::TokenCounter;

use crate::assemble::{build_with, model_json, resolve_leaf, Context, ContextError, Leaf};
use crate::engine::{message_tokens, AssembleRequest, ContextEngine, EngineError, SessionRef};
use crate::hygiene::{family, history_limit_start, hygiene, Family, Repair, FAMILIES};
use crate::llm::convert_to_llm_with;
use crate::prune::{prune, PruneConfig, PruneInput, PruneOutcome};

/// What to build the provider context for.
#[derive(Debug, Clone, Default)]
pub struct ProviderRequest<'a> {
    /// Which leaf (Pi's default: the last entry).
    pub leaf: Leaf<'a>,
    /// The session key, when the host has one (passed to the engine).
    pub session_key: Option<String>,
    /// Keep only the last N user turns (OpenClaw's `historyLimit`; 0 = no limit).
    pub history_limit: Option<usize>,
    /// The model's context window, given to the engine and the pruner.
    pub token_budget: Option<u64>,
    /// Prune with cache-TTL rules as of this time (Unix ms); `None` = no pruning.
    pub prune_at_ms: Option<i64>,
    /// The pruning settings.
    pub prune: PruneConfig,
    /// Repair the messages for this provider family (see [`FAMILIES`]).
    pub provider: Option<&'a str>,
    /// Whose projection and `convertToLlm`: Pi 0.58.3's (the default) or 1.6.0's.
    pub rules: PiRules,
}

/// How many messages the history limit dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryLimit {
    /// The limit in user turns.
    pub limit: usize,
    /// Messages dropped from the start of the context.
    pub dropped_messages: usize,
}

/// The messages a provider receives, and how they were made.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderContext {
    /// The engine that assembled them.
    pub engine: String,
    /// The engine compacts by itself.
    pub owns_compaction: bool,
    /// The provider family the messages were repaired for.
    pub provider: Option<String>,
    /// The leaf the context was built for.
    pub leaf_id: Option<String>,
    /// Their size: the engine's estimate, or the counter's.
    pub estimated_tokens: u64,
    /// Text the engine adds to the system prompt.
    pub system_prompt_addition: Option<String>,
    /// What the history limit dropped.
    pub history_limit: Option<HistoryLimit>,
    /// What pruning did.
    pub prune: Option<PruneOutcome>,
    /// Every repair hygiene made.
    pub repairs: Vec<Repair>,
    /// The messages, as the provider receives them.
    pub messages: Vec<Value>,
}

impl ProviderContext {
    /// The JSON document `sessionlog context --engine …` prints.
    pub fn to_json(&self) -> Value {
        let history_limit =
            self.history_limit.map(|h| json!({"limit": h.limit, "droppedMessages": h.dropped_messages}));
        json!({
            "engine": self.engine,
            "ownsCompaction": self.owns_compaction,
            "provider": self.provider,
            "leafId": self.leaf_id,
            "estimatedTokens": self.estimated_tokens,
            "systemPromptAddition": self.system_prompt_addition,
            "historyLimit": history_limit,
            "prune": self.prune,
            "repairs": self.repairs,
            "messageCount": self.messages.len(),
            "messages": self.messages,
        })
    }
}

/// Why the provider context could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The projection failed (unknown leaf, a cycle).
    #[error(transparent)]
    Context(#[from] ContextError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// No such provider family.
    #[error("unknown provider family `{name}` (known: {known})")]
    UnknownFamily {
        /// The name asked for.
        name: String,
        /// The families known, comma-separated.
        known: String,
    },
}

/// When the prompt cache was last touched on the context's path: the latest
/// `openclaw.cache-ttl` custom entry's `data.timestamp`.
pub fn last_cache_touch(transcript: &Transcript, ctx: &Context<'_>) -> Option<i64> {
    ctx.path.iter().rev().find_map(|&i| cache_touch(&transcript.entries[i]))
}

/// The cache touch one entry records: an `openclaw.cache-ttl` custom
/// entry's `data.timestamp`.
pub(crate) fn cache_touch(e: &Entry) -> Option<i64> {
    match &e.kind {
        EntryKind::Custom { custom_type: Some(t) } if t == "openclaw.cache-ttl" => e
            .to_value()
            .get("data")
            .and_then(|d| d.get("timestamp"))
            .and_then(Value::as_f64)
            .map(|t| t as i64),
        _ => None,
    }
}

/// Builds what the provider receives for the next call on `transcript`,
/// through `engine` (the caller owns its lifecycle: bootstrap, dispose).
pub fn provider_context(
    transcript: &Transcript,
    request: &ProviderRequest<'_>,
    engine: &mut dyn ContextEngine,
    counter: &dyn TokenCounter,
) -> Result<ProviderContext, ProviderError> {
    let fam = resolve_family(request)?;
    let tree = transcript.tree();
    let index = resolve_leaf(transcript, &tree, request.leaf)?;
    let ctx = build_with(transcript, &tree, index, request.rules).map_err(ContextError::from)?;
    // OpenClaw limits the session's turns before the provider sees them.
    let start = request.history_limit.map_or(0, |limit| history_limit_start(&ctx.messages, limit));
    let history_limit = request.history_limit.map(|limit| HistoryLimit { limit, dropped_messages: start });
    let messages: Vec<Value> =
        convert_to_llm_with(&ctx.messages[start..], request.rules).iter().map(|m| m.to_json()).collect();
    let leaf_id = ctx.path.last().and_then(|&i| transcript.entries[i].id.clone());
    let projected = Projected {
        messages,
        history_limit,
        model: ctx.model,
        cache_touch: request.prune_at_ms.and_then(|_| last_cache_touch(transcript, &ctx)),
        leaf_id,
    };
    finish(transcript, request, fam, projected, engine, counter)
}

/// The provider family a request names, checked.
pub(crate) fn resolve_family(
    request: &ProviderRequest<'_>,
) -> Result<Option<&'static Family>, ProviderError> {
    match request.provider {
        None => Ok(None),
        Some(name) => Ok(Some(family(name).ok_or_else(|| ProviderError::UnknownFamily {
            name: name.to_owned(),
            known: FAMILIES.iter().map(|f| f.name).collect::<Vec<_>>().join(", "),
        })?)),
    }
}

/// What the projection gives the rest of [`provider_context`]: the
/// converted messages after the history limit, and what pruning reads.
pub(crate) struct Projected<'a> {
    /// The provider messages (`convertToLlm`), after the history limit.
    pub messages: Vec<Value>,
    /// What the history limit dropped.
    pub history_limit: Option<HistoryLimit>,
    /// The last model change or assistant message on the path.
    pub model: Option<&'a Entry>,
    /// The last cache touch on the path (read only when pruning).
    pub cache_touch: Option<i64>,
    /// The leaf's id.
    pub leaf_id: Option<String>,
}

/// Engine `assemble` → pruning → hygiene → the estimate: the steps after
/// the projection, shared by [`provider_context`] and the incremental
/// [`crate::live::LiveContext`].
pub(crate) fn finish(
    transcript: &Transcript,
    request: &ProviderRequest<'_>,
    fam: Option<&'static Family>,
    projected: Projected<'_>,
    engine: &mut dyn ContextEngine,
    counter: &dyn TokenCounter,
) -> Result<ProviderContext, ProviderError> {
    let info = engine.info();
    let session = SessionRef {
        session_id: transcript.session_id().unwrap_or_default().to_owned(),
        session_key: request.session_key.clone(),
    };
    let assembled = engine.assemble(AssembleRequest {
        session,
        messages: projected.messages,
        token_budget: request.token_budget,
    })?;
    let mut messages = assembled.messages;
    let prune = request.prune_at_ms.map(|now_ms| {
        let model = model_json(projected.model);
        let text = |k: &str| model.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let input = PruneInput {
            context_window: request.token_budget.unwrap_or(200_000),
            now_ms,
            last_cache_touch_ms: projected.cache_touch,
            provider: text("provider"),
            model_id: text("modelId"),
        };
        prune(&mut messages, &request.prune, &input)
    });
    let mut repairs = Vec::new();
    if let Some(fam) = fam {
        let (fixed, r) = hygiene(messages, fam);
        messages = fixed;
        repairs = r;
    }
    let estimated_tokens = if assembled.estimated_tokens > 0 {
        assembled.estimated_tokens
    } else {
        messages.iter().map(|m| message_tokens(m, counter)).sum()
    };
    Ok(ProviderContext {
        engine: info.id,
        owns_compaction: info.owns_compaction,
        provider: request.provider.map(str::to_owned),
        leaf_id: projected.leaf_id,
        estimated_tokens,
        system_prompt_addition: assembled.system_prompt_addition,
        history_limit: projected.history_limit,
        prune,
        repairs,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use sessionlog_events::Entry;
    use sessionlog_tokens::PiEstimator;

    use super::*;
    use crate::engine::Legacy;

    fn transcript() -> Transcript {
        let line = |s: &str| Entry::parse(s).unwrap();
        let header = line(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        );
        let entries = vec![
            line(
                r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"first","timestamp":1}}"#,
            ),
            line(
                r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"one"}],"stopReason":"stop","timestamp":2}}"#,
            ),
            line(
                r#"{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"second","timestamp":3}}"#,
            ),
        ];
        Transcript::from_objects(header, entries).unwrap()
    }

    #[test]
    fn the_history_limit_applies_before_the_engine_and_every_step_is_reported() {
        let t = transcript();
        let request = ProviderRequest { history_limit: Some(1), ..ProviderRequest::default() };
        let ctx = provider_context(&t, &request, &mut Legacy, &PiEstimator).unwrap();
        // One user turn kept: u2 alone; u1 and a1 dropped.
        assert_eq!(ctx.history_limit, Some(HistoryLimit { limit: 1, dropped_messages: 2 }));
        assert_eq!(ctx.messages.len(), 1);
        assert_eq!(ctx.messages[0]["content"], "second");
        assert_eq!((ctx.engine.as_str(), ctx.leaf_id.as_deref()), ("legacy", Some("u2")));
        // ceil(6 / 4) = 2 tokens, counted because the legacy engine leaves the estimate to the caller.
        assert_eq!(ctx.estimated_tokens, 2);
        assert_eq!(ctx.to_json()["historyLimit"], json!({"limit": 1, "droppedMessages": 2}));
    }

    #[test]
    fn an_unknown_family_names_the_known_ones() {
        let request = ProviderRequest { provider: Some("carrier-pigeon"), ..ProviderRequest::default() };
        let err = provider_context(&transcript(), &request, &mut Legacy, &PiEstimator).unwrap_err();
        assert!(
            err.to_string().starts_with("unknown provider family `carrier-pigeon` (known: anthropic"),
            "{err}"
        );
    }
}

//! The token counters `sessions.json` keeps per session (`inputTokens`,
//! `outputTokens`, `cacheRead`, `cacheWrite`, `totalTokens`,
//! `totalTokensFresh`, and `contextTokens` when the window is known), as a
//! projection of the transcript: Pi's context-size fold
//! ([`sessionlog_tokens::ContextSize`]) along the current path, written into
//! the store as a `usage_recorded` event whenever its last usage changes.
//!
//! A live session folds each appended entry ([`crate::TranscriptWriter`]);
//! `sessionlog usage` rebuilds the same numbers from whole files
//! ([`path_counters`]). Both end in [`usage_event`].

use serde_json::{Map, Value};
use sessionlog_events::PiRules;
use sessionlog_events::{CycleError, StoreEvent, Transcript};
use sessionlog_tokens::{ContextSize, TokenCounter};

/// The fold along the transcript's current path (Pi's default leaf).
pub fn path_counters(
    transcript: &Transcript,
    rules: PiRules,
    counter: &dyn TokenCounter,
) -> Result<ContextSize, CycleError> {
    let mut size = ContextSize::new(rules);
    for i in transcript.default_path()? {
        size.push_entry(&transcript.entries[i], counter);
    }
    Ok(size)
}

fn count(v: Option<f64>) -> u64 {
    v.unwrap_or(0.0).max(0.0) as u64
}

/// The `usage_recorded` event that brings the stored `entry` of `key` to the
/// fold's last usage (and to `context_window`, when given); `None` when the
/// fold has no usage or the entry already holds these numbers.
pub fn usage_event(
    key: &str,
    entry: Option<&Map<String, Value>>,
    size: &ContextSize,
    context_window: Option<u64>,
) -> Option<StoreEvent> {
    let reported = size.last_usage()?;
    let u = &reported.usage;
    let total = if reported.tokens.is_finite() { reported.tokens as u64 } else { 0 };
    let stored = |field: &str| entry.and_then(|e| e.get(field)).and_then(Value::as_u64);
    let same = stored("inputTokens") == Some(count(u.input))
        && stored("outputTokens") == Some(count(u.output))
        && stored("totalTokens") == Some(total)
        && context_window.is_none_or(|w| stored("contextTokens") == Some(w));
    if same {
        return None;
    }
    Some(StoreEvent::UsageRecorded {
        key: key.to_owned(),
        at: reported.timestamp.map_or(0, |t| t as i64),
        input: count(u.input),
        output: count(u.output),
        cache_read: count(u.cache_read),
        cache_write: count(u.cache_write),
        total,
        context_tokens: context_window,
    })
}

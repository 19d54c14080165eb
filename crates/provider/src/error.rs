//! Provider errors, classified into what the caller does next.
//!
//! | class | examples | the client | the agent |
//! |---|---|---|---|
//! | [`ErrorClass::ContextOverflow`] | "prompt is too long", "maximum context length", 413 | never retries | compacts, then retries |
//! | [`ErrorClass::RateLimit`] | 429, `rate_limit_error` | retries after `retry-after` | reports |
//! | [`ErrorClass::Transient`] | 5xx, 529 overloaded, 408, 409, reset, timeout | retries with backoff | reports |
//! | [`ErrorClass::Fatal`] | 401/403 auth, 400 bad request, 404, billing | never retries | reports |
//! | [`ErrorClass::Aborted`] | the caller cancelled | stops | writes `stopReason: "aborted"` |
//!
//! Overflow is recognised as OpenClaw 2026.9.6 recognises it (its pattern
//! tables, checked against OpenClaw's own classifier in
//! `tests/overflow_oracle.rs`): an explicit overflow wording wins; a message
//! that reads as a rate limit (per-minute token limits included), a billing
//! or an auth problem is not an overflow; then Pi's assistant-error patterns
//! and OpenClaw's looser hints decide.

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the caller does about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorClass {
    /// The prompt does not fit the model's context window.
    ContextOverflow,
    /// Too many requests; wait as long as the server says.
    RateLimit,
    /// Worth retrying: server errors, overload, dropped connections.
    Transient,
    /// Retrying cannot help: authentication, a bad request, billing.
    Fatal,
    /// The caller cancelled the request.
    Aborted,
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[error("{message}")]
pub struct ProviderError {
    /// What to do about it.
    pub class: ErrorClass,
    /// The HTTP status, when the server answered with one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status: Option<u16>,
    /// The text Pi stores as `errorMessage` (e.g. `429 {"type":"error",...}`).
    pub message: String,
    /// How long the server asked the client to wait (`retry-after`,
    /// `retry-after-ms`), in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retry_after_ms: Option<u64>,
    /// The server's `x-should-retry` answer, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub should_retry: Option<bool>,
}

impl ProviderError {
    /// An error of `class` with Pi's message text.
    pub fn new(class: ErrorClass, status: Option<u16>, message: impl Into<String>) -> ProviderError {
        ProviderError { class, status, message: message.into(), retry_after_ms: None, should_retry: None }
    }

    /// The caller aborted (the SDKs' text, as Pi records it).
    pub fn aborted() -> ProviderError {
        ProviderError::new(ErrorClass::Aborted, None, "Request was aborted.")
    }

    /// The client retries this error (subject to the attempt limit).
    pub fn is_retryable(&self) -> bool {
        match self.should_retry {
            Some(answer) => answer && self.class != ErrorClass::Aborted,
            None => matches!(self.class, ErrorClass::RateLimit | ErrorClass::Transient),
        }
    }

    /// The token count a context-overflow message states the prompt had
    /// ("prompt is too long: 213462 tokens > 200000 maximum"), if any.
    pub fn observed_prompt_tokens(&self) -> Option<u64> {
        static RE: OnceLock<Vec<Regex>> = OnceLock::new();
        let patterns = RE.get_or_init(|| {
            [
                r"(?i)prompt is too long:\s*([\d,]+)\s*tokens",
                r"(?i)resulted in\s*([\d,]+)\s*tokens",
                r"(?i)requested about\s*([\d,]+)\s*tokens",
                r"(?i)prompt contains\s*([\d,]+)\s*tokens",
                r"(?i)input \(([\d,]+) tokens\)",
                r"(?i)input token count \(([\d,]+)\)",
                r"(?i)prompt has\s*([\d,]+)\s*tokens",
            ]
            .iter()
            .map(|p| Regex::new(p).expect("valid pattern"))
            .collect()
        });
        patterns
            .iter()
            .find_map(|re| re.captures(&self.message)?.get(1)?.as_str().replace(',', "").parse().ok())
    }
}

fn regexes(patterns: &[&str]) -> Vec<Regex> {
    patterns.iter().map(|p| Regex::new(p).expect("valid pattern")).collect()
}

fn any(set: &[Regex], text: &str) -> bool {
    set.iter().any(|re| re.is_match(text))
}

struct Tables {
    /// OpenClaw's "failover-explicit" overflow wordings.
    explicit: Vec<Regex>,
    /// "provider-fallback" wordings, trusted when the text also names the
    /// prompt and a limit.
    fallback: Vec<Regex>,
    signal: Regex,
    action: Regex,
    /// Pi's assistant-error wordings (`isContextOverflow`).
    assistant: Vec<Regex>,
    /// What keeps Pi from reading a rate limit as an overflow.
    non_overflow: Vec<Regex>,
    /// OpenClaw's loose "failover-hint".
    hint: Regex,
    tpm: Regex,
    rate_limit_hint: Regex,
    window_too_small: Regex,
    request_size_ceiling: Regex,
    rate_limit: Vec<Regex>,
    billing: Vec<Regex>,
    auth: Vec<Regex>,
    overloaded: Vec<Regex>,
    server: Vec<Regex>,
    timeout: Vec<Regex>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        explicit: regexes(&[
            r"(?i)request_too_large",
            r"(?i)context_overflow",
            r"(?i)prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
            r"(?is)invalid_argument.*maximum number of tokens",
            r"(?i)request exceeds the maximum size",
            r"(?i)context length exceeded",
            r"(?i)maximum context length",
            r"(?i)prompt is too long",
            r"(?i)prompt too long",
            r"(?i)exceeds model context window",
            r"(?i)model token limit",
            r"(?is)input exceeds.*maximum number of tokens",
            r"(?is)request size exceeds.*context window",
            r"(?i)context overflow:",
            r"(?i)exceed context limit",
            r"(?i)exceeds the model'?s maximum context",
            r"(?is)max_tokens.*exceed.*context",
            r"(?is)input(?: length.*exceed.*context| \([\d,]+\s*tokens?\) is longer than (?:the )?model'?s context length)",
            r"(?is)413.*too large",
            r"(?i)context_window_exceeded",
            r"(?i)input length [\d,]+\s+tokens? exceeds the model limit",
            r"上下文过长|上下文超出|上下文长度超|超出最大上下文|请压缩上下文",
        ]),
        fallback: regexes(&[
            r"(?i)\binput token count exceeds the maximum number of input tokens\b",
            r"(?i)\binput is too long for this model\b",
            r"(?i)\binput exceeds the maximum number of tokens\b",
            r"(?i)\bollama error:\s*context length exceeded(?:,\s*too many tokens)?\b",
            r"(?i)\btotal tokens?.*exceeds? (?:the )?(?:model(?:'s)? )?(?:max|maximum|limit)",
            r"(?i)\b(?:(?:request|prompt) \(\d[\d,]*\s*tokens?\) exceeds (?:the )?available context size|context size has been exceeded)\b",
            r"(?i)\binput (?:is )?too long for (?:the )?model\b",
        ]),
        signal: Regex::new(r"(?i)\b(?:context|window|prompt|token|tokens|input|request|model)\b").expect("valid"),
        action: Regex::new(r"(?i)\b(?:too\s+(?:large|long|many)|exceed(?:s|ed|ing)?|overflow|limit|maximum|max)\b")
            .expect("valid"),
        assistant: regexes(&[
            r"(?i)prompt is too long",
            r"(?i)request_too_large",
            r"(?i)input length and `?max_tokens`? exceed context limit: [\d,]+ \+ [\d,]+ > [\d,]+",
            r"(?i)input is too long for requested model",
            r"(?i)exceeds the context window",
            r"(?i)exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
            r"(?i)input token count.*exceeds the maximum",
            r"(?i)maximum prompt length is \d+",
            r"(?i)reduce the length of the messages",
            r"(?i)maximum context length is \d+ tokens",
            r"(?i)exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
            r"(?i)input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
            r"(?i)exceeds the limit of \d+",
            r"(?i)(?:exceeds the available context size|context size has been exceeded)",
            r"(?i)greater than the context length",
            r"(?i)context window exceeds limit",
            r"(?i)exceeded model token limit",
            r"(?i)tokens? in request more than max tokens? allowed",
            r"(?i)prompt exceeds max(?:imum)? length",
            r"(?i)too large for model with \d+ maximum context length",
            r"(?i)prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
            r"(?i)model_context_window_exceeded",
            r"(?i)prompt too long; exceeded (?:max )?context length",
            r"(?i)context[_ ]length[_ ]exceeded",
            r"(?i)too many tokens",
            r"(?i)token limit exceeded",
            r"(?i)^413\s*(?:status code)?\s*\(no body\)",
        ]),
        non_overflow: regexes(&[r"(?i)^(Throttling error|Service unavailable):", r"(?i)rate limit", r"(?i)too many requests"]),
        hint: Regex::new(
            r"(?i)context.*overflow|context window.*(too (?:large|long)|exceed|over|limit|max(?:imum)?|requested|sent|tokens)|prompt.*(too (?:large|long)|exceed|over|limit|max(?:imum)?)|(?:request|input).*(?:context|window|length|token).*(too (?:large|long)|exceed|over|limit|max(?:imum)?)",
        )
        .expect("valid"),
        tpm: Regex::new(r"(?i)\btpm\b|tokens per minute").expect("valid"),
        rate_limit_hint: Regex::new(
            r"(?i)rate limit|too many requests|requests per (?:minute|hour|day)|quota|throttl|429\b|tokens per day",
        )
        .expect("valid"),
        window_too_small: Regex::new(r"(?i)context window.*(too small|minimum is)").expect("valid"),
        request_size_ceiling: Regex::new(
            r"(?i)(?:\btpm\b|tokens per minute)[^.\n]*?\blimit\s+([\d,]+)[^.\n]*?\brequested\s+([\d,]+)",
        )
        .expect("valid"),
        rate_limit: regexes(&[
            r"(?i)rate[_ ]limit|too many requests",
            r#"(?i)^\s*429\b|\b(?:https?|status(?:[ _-]?code)?|response(?:[ _-]?code)?|http(?:[ _-]?status)?)\b[\s:=#"'(]{0,6}429\b|["'](?:status|code)["']\s*:\s*429\b"#,
            r"(?i)too many (?:concurrent )?requests",
            r"(?i)\bthrottl(?:ing[_]?exception|ing|ed)\b",
            r"(?i)model_cooldown|exceeded your current quota|usage limit|tokens per minute|tokens per day",
            r"(?i)\bresource[_ -]?exhausted\b|\bquota[_ -]?exceeded\b|\btpm\b",
        ]),
        billing: regexes(&[
            r"(?i)payment required|insufficient credits|credit balance|insufficient[_ ]quota|insufficient[_ ]balance",
            r"(?i)used\s+all\s+available\s+credits|requires?\s+more\s+credits|out of budget|plans & billing",
            r#"(?i)["']?(?:status|code)["']?\s*[:=]\s*402\b|\bhttp\s*402\b|^\s*402\s+payment"#,
        ]),
        auth: regexes(&[
            r"(?i)invalid[_ ]?api[_ ]?key|incorrect api key|invalid token|authentication|unauthorized|forbidden",
            r"(?i)access denied|insufficient permissions?|permission_error|no api key found|\b401\b|\b403\b",
        ]),
        overloaded: regexes(&[
            r"(?i)overloaded|\b(?:selected\s+)?model\s+(?:is\s+)?at capacity\b|high demand|high load",
            r"(?i)\bservice(?:[_ ]temporarily)?[_ ]unavailable\b",
        ]),
        server: regexes(&[
            r"(?i)an error occurred while processing|internal server error|internal_error|server_error|api_error",
            r"(?i)bad gateway|gateway timeout|upstream (?:connect )?error|connection reset|\bHTTP\s+5\d\d\b",
        ]),
        timeout: regexes(&[
            r"(?i)timeout|timed out|deadline exceeded|connection error|network error|fetch failed|socket hang up",
            r"(?i)^terminated$|\bstream (?:was )?(?:closed|aborted)\b|stream ended (?:before|without)",
            r"(?i)\b(?:econn(?:refused|reset|aborted)|enet(?:unreach|reset)|ehost(?:unreach|down)|e(?:socket)?timedout|epipe)\b",
        ]),
    })
}

fn is_request_size_ceiling(t: &Tables, text: &str) -> bool {
    let Some(caps) = t.request_size_ceiling.captures(text) else { return false };
    let read = |i: usize| {
        caps.get(i).and_then(|m| m.as_str().replace(',', "").parse::<f64>().ok()).filter(|n| *n > 0.0)
    };
    matches!((read(1), read(2)), (Some(limit), Some(requested)) if requested > limit)
}

fn is_reasoning_constraint(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("reasoning is mandatory")
        || lower.contains("reasoning is required")
        || lower.contains("requires reasoning")
        || (lower.contains("reasoning") && lower.contains("cannot be disabled"))
}

fn ran_out_of_room(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("context window")
        && (lower.contains("ran out of room") || lower.contains("ran out of space"))
}

/// OpenClaw's explicit overflow tables (`isContextOverflowErrorFromTables`).
fn overflow_from_tables(t: &Tables, text: &str) -> bool {
    if t.tpm.is_match(text) && !is_request_size_ceiling(t, text) {
        return false;
    }
    if is_reasoning_constraint(text) {
        return false;
    }
    let candidate = !any(&t.rate_limit, text) && t.signal.is_match(text) && t.action.is_match(text);
    any(&t.explicit, text) || ran_out_of_room(text) || (candidate && any(&t.fallback, text))
}

/// True when a provider's error text says the prompt did not fit the
/// model's context window, as OpenClaw decides it for an assistant error.
pub fn is_context_overflow(text: &str) -> bool {
    let t = tables();
    if text.trim().is_empty() {
        return false;
    }
    if overflow_from_tables(t, text) {
        return true;
    }
    // Another failure reason named first keeps it from being an overflow.
    if any(&t.rate_limit, text) || any(&t.billing, text) || any(&t.overloaded, text) || any(&t.auth, text) {
        return false;
    }
    if !any(&t.non_overflow, text) && any(&t.assistant, text) {
        return true;
    }
    // OpenClaw's looser reading (`isLikelyContextOverflowError`).
    if t.window_too_small.is_match(text) || t.rate_limit_hint.is_match(text) {
        return false;
    }
    if any(&t.server, text) || any(&t.timeout, text) {
        return false;
    }
    if text.to_lowercase().contains("prompt template") {
        return false;
    }
    t.hint.is_match(text)
}

/// The class of an error text without an HTTP status (a stream's error
/// event, a dropped connection), by OpenClaw's wordings.
pub fn classify_text(text: &str) -> ErrorClass {
    let t = tables();
    if is_context_overflow(text) {
        ErrorClass::ContextOverflow
    } else if any(&t.billing, text) {
        ErrorClass::Fatal
    } else if any(&t.rate_limit, text) {
        ErrorClass::RateLimit
    } else if any(&t.overloaded, text) || any(&t.server, text) || any(&t.timeout, text) {
        ErrorClass::Transient
    } else {
        ErrorClass::Fatal
    }
}

/// The class of an HTTP error response: overflow wording (or 413) first,
/// then the status — 429 a rate limit unless it is billing, 408, 409, 5xx
/// and 529 transient, any other status fatal.
pub fn classify_status(status: u16, message: &str) -> ErrorClass {
    if status == 413 || is_context_overflow(message) {
        return ErrorClass::ContextOverflow;
    }
    match status {
        429 if any(&tables().billing, message) => ErrorClass::Fatal,
        429 => ErrorClass::RateLimit,
        408 | 409 | 500..=599 => ErrorClass::Transient,
        _ => ErrorClass::Fatal,
    }
}

/// The class of an Anthropic `error` object's `type`, when it names one.
pub fn classify_anthropic_type(kind: &str, message: &str) -> ErrorClass {
    match kind {
        "request_too_large" => ErrorClass::ContextOverflow,
        "rate_limit_error" => ErrorClass::RateLimit,
        "overloaded_error" | "api_error" | "timeout_error" => ErrorClass::Transient,
        "authentication_error" | "permission_error" | "billing_error" | "not_found_error" => {
            ErrorClass::Fatal
        }
        _ => classify_text(message),
    }
}

/// Pi's `errorMessage` for an HTTP error response, as the provider SDKs
/// build it: `"{status} {text}"`, where the text is the error object's
/// `message` (OpenAI reads `error.message`, Anthropic the top-level
/// `message`), else the JSON of the error object, else the raw body, else
/// `"{status} status code (no body)"`.
pub fn http_error_message(api: crate::model::Api, status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let detail = match parsed {
        Some(value) => {
            let error = match api {
                crate::model::Api::OpenAiCompletions => match value.get("error") {
                    Some(inner) if !inner.is_null() => inner.clone(),
                    _ => value,
                },
                crate::model::Api::AnthropicMessages => value,
            };
            match error.get("message") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(other) if !other.is_null() && other != &Value::Bool(false) => js(other),
                _ => js(&error),
            }
        }
        None => text.into_owned(),
    };
    if detail.is_empty() {
        format!("{status} status code (no body)")
    } else {
        format!("{status} {detail}")
    }
}

/// `JSON.stringify` of a value.
pub(crate) fn js(value: &Value) -> String {
    sessionlog_events::json::to_js_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Api;

    #[test]
    fn error_messages_are_built_as_the_sdks_build_them() {
        // Anthropic's SDK prints the whole body; OpenAI's the inner message.
        let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#;
        assert_eq!(
            http_error_message(Api::AnthropicMessages, 429, body),
            r#"429 {"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#
        );
        let body = br#"{ "error": { "message": "Bad key", "type": "invalid_request_error" } }"#;
        assert_eq!(http_error_message(Api::OpenAiCompletions, 401, body), "401 Bad key");
        assert_eq!(
            http_error_message(Api::OpenAiCompletions, 502, b"<html>bad gateway</html>"),
            "502 <html>bad gateway</html>"
        );
        assert_eq!(http_error_message(Api::OpenAiCompletions, 413, b""), "413 status code (no body)");
    }

    #[test]
    fn observed_tokens_are_read_from_overflow_messages() {
        let e = ProviderError::new(
            ErrorClass::ContextOverflow,
            Some(400),
            "prompt is too long: 213,462 tokens > 200000 maximum",
        );
        assert_eq!(e.observed_prompt_tokens(), Some(213_462));
        let e = ProviderError::new(ErrorClass::ContextOverflow, Some(400), "413 status code (no body)");
        assert_eq!(e.observed_prompt_tokens(), None);
    }
}

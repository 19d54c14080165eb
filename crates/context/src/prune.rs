//! Session pruning: cache-TTL trimming of old tool results before a call
//! (spec context-engine §5.1). A pure transform of the provider messages,
//! with `now` passed in; never written to the log.

use serde::Serialize;
use serde_json::{json, Value};

/// Pruning settings (OpenClaw `agents.defaults.contextPruning`, mode `cache-ttl`).
#[derive(Debug, Clone, PartialEq)]
pub struct PruneConfig {
    /// Prune only when the prompt cache went cold: this long since the last touch.
    pub ttl_ms: i64,
    /// Assistant messages at the end whose surroundings are never pruned.
    pub keep_last_assistants: usize,
    /// Soft-trim when the context exceeds this share of the window (in chars).
    pub soft_trim_ratio: f64,
    /// Hard-clear when it still exceeds this share.
    pub hard_clear_ratio: f64,
    /// Hard-clear only when the prunable tool results hold at least this many chars.
    pub min_prunable_tool_chars: usize,
    /// Soft trim applies to results longer than this.
    pub soft_trim_max_chars: usize,
    /// Characters kept from the head.
    pub soft_trim_head_chars: usize,
    /// Characters kept from the tail.
    pub soft_trim_tail_chars: usize,
    /// Hard clear on or off.
    pub hard_clear_enabled: bool,
    /// What a cleared result says.
    pub hard_clear_placeholder: String,
    /// Tools that may be pruned (`*` wildcards, case-insensitive; empty = all).
    pub tools_allow: Vec<String>,
    /// Tools never pruned (wins over allow).
    pub tools_deny: Vec<String>,
}

impl Default for PruneConfig {
    fn default() -> Self {
        PruneConfig {
            ttl_ms: 5 * 60 * 1000,
            keep_last_assistants: 3,
            soft_trim_ratio: 0.3,
            hard_clear_ratio: 0.5,
            min_prunable_tool_chars: 50_000,
            soft_trim_max_chars: 4_000,
            soft_trim_head_chars: 1_500,
            soft_trim_tail_chars: 1_500,
            hard_clear_enabled: true,
            hard_clear_placeholder: "[Old tool result content cleared]".to_owned(),
            tools_allow: Vec::new(),
            tools_deny: Vec::new(),
        }
    }
}

/// The moment and the model a prune is evaluated for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneInput {
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Now, in ms (passed in; no clock here).
    pub now_ms: i64,
    /// When the prompt cache was last touched (the `openclaw.cache-ttl` entries).
    pub last_cache_touch_ms: Option<i64>,
    /// The provider of the model.
    pub provider: String,
    /// The model id.
    pub model_id: String,
}

/// One change a prune made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum PruneAction {
    /// Kept head and tail of a long result.
    #[serde(rename_all = "camelCase")]
    SoftTrim {
        /// Message index.
        index: usize,
        /// The tool.
        tool: String,
        /// Characters before.
        chars: usize,
        /// Head kept.
        head: usize,
        /// Tail kept.
        tail: usize,
    },
    /// Replaced a result with the placeholder.
    #[serde(rename_all = "camelCase")]
    HardClear {
        /// Message index.
        index: usize,
        /// The tool.
        tool: String,
        /// Characters removed.
        chars: usize,
    },
}

/// What a prune did, or why it did nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneOutcome {
    /// Why nothing was pruned, if so.
    pub skipped: Option<&'static str>,
    /// Context chars / (window × 4) before.
    pub ratio_before: f64,
    /// The same after.
    pub ratio_after: f64,
    /// The changes, in order.
    pub actions: Vec<PruneAction>,
}

fn text_len(s: &str) -> usize {
    sessionlog_tokens::utf16_len(s) as usize
}

fn blocks(m: &Value) -> Vec<&Value> {
    match m.get("content") {
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    }
}

/// Characters a message counts for pruning (images 8000, unknown roles 256).
pub fn message_chars(m: &Value) -> usize {
    let role = m.get("role").and_then(Value::as_str);
    let content_text = |m: &Value| -> usize {
        match m.get("content") {
            Some(Value::String(s)) => text_len(s),
            _ => blocks(m)
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).map_or(0, text_len),
                    Some("image") => 8_000,
                    _ => 0,
                })
                .sum(),
        }
    };
    match role {
        Some("user" | "toolResult") => content_text(m),
        Some("assistant") => blocks(m)
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map_or(0, text_len),
                Some("thinking") => b.get("thinking").and_then(Value::as_str).map_or(0, text_len),
                Some("toolCall") => b.get("arguments").map_or(0, |a| text_len(&a.to_string())),
                _ => 0,
            })
            .sum(),
        _ => 256,
    }
}

fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.to_lowercase(), name.to_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == n;
    }
    let mut rest = n.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

fn prunable(cfg: &PruneConfig, tool: &str) -> bool {
    if cfg.tools_deny.iter().any(|p| glob_match(p, tool)) {
        return false;
    }
    cfg.tools_allow.is_empty() || cfg.tools_allow.iter().any(|p| glob_match(p, tool))
}

fn result_text(m: &Value) -> String {
    blocks(m)
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect()
}

fn has_image(m: &Value) -> bool {
    blocks(m).iter().any(|b| b.get("type").and_then(Value::as_str) == Some("image"))
}

/// Prunes `messages` in place.
pub fn prune(messages: &mut [Value], cfg: &PruneConfig, input: &PruneInput) -> PruneOutcome {
    let char_window = (input.context_window * 4).max(1) as f64;
    let total = |ms: &[Value]| ms.iter().map(message_chars).sum::<usize>() as f64;
    let before = total(messages) / char_window;
    let mut out =
        PruneOutcome { skipped: None, ratio_before: before, ratio_after: before, actions: Vec::new() };
    let eligible = input.provider == "anthropic"
        || (input.provider == "openrouter" && input.model_id.starts_with("anthropic/"));
    let skip = |mut out: PruneOutcome, why| {
        out.skipped = Some(why);
        out
    };
    if !eligible {
        return skip(out, "provider not eligible (anthropic only)");
    }
    match input.last_cache_touch_ms {
        None => return skip(out, "no cache touch recorded"),
        Some(t) if input.now_ms - t < cfg.ttl_ms => return skip(out, "cache still warm"),
        Some(_) => {}
    }
    let assistants: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .map(|(i, _)| i)
        .collect();
    let cutoff = if cfg.keep_last_assistants == 0 {
        messages.len()
    } else if assistants.len() < cfg.keep_last_assistants {
        return skip(out, "fewer assistant messages than the protected tail");
    } else {
        assistants[assistants.len() - cfg.keep_last_assistants]
    };
    let Some(start) = messages.iter().position(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return skip(out, "no user message");
    };
    if before < cfg.soft_trim_ratio {
        return skip(out, "below the soft-trim ratio");
    }
    let candidates: Vec<usize> = (start..cutoff.max(start))
        .filter(|&i| {
            let m = &messages[i];
            m.get("role").and_then(Value::as_str) == Some("toolResult")
                && !has_image(m)
                && prunable(cfg, m.get("toolName").and_then(Value::as_str).unwrap_or(""))
        })
        .collect();
    for &i in &candidates {
        let text = result_text(&messages[i]);
        let chars: Vec<char> = text.chars().collect();
        let n = text_len(&text);
        if n > cfg.soft_trim_max_chars && cfg.soft_trim_head_chars + cfg.soft_trim_tail_chars < chars.len() {
            let head: String = chars[..cfg.soft_trim_head_chars].iter().collect();
            let tail: String = chars[chars.len() - cfg.soft_trim_tail_chars..].iter().collect();
            let note = format!(
                "[Tool result trimmed: kept first {} chars and last {} chars of {n} chars.]",
                cfg.soft_trim_head_chars, cfg.soft_trim_tail_chars
            );
            messages[i]["content"] =
                json!([{"type": "text", "text": format!("{head}\n...\n{tail}\n\n{note}")}]);
            let tool = messages[i].get("toolName").and_then(Value::as_str).unwrap_or("").to_owned();
            out.actions.push(PruneAction::SoftTrim {
                index: i,
                tool,
                chars: n,
                head: cfg.soft_trim_head_chars,
                tail: cfg.soft_trim_tail_chars,
            });
        }
    }
    let mut ratio = total(messages) / char_window;
    let prunable_chars: usize = candidates.iter().map(|&i| text_len(&result_text(&messages[i]))).sum();
    if ratio >= cfg.hard_clear_ratio
        && cfg.hard_clear_enabled
        && prunable_chars >= cfg.min_prunable_tool_chars
    {
        for &i in &candidates {
            if ratio < cfg.hard_clear_ratio {
                break;
            }
            let chars = text_len(&result_text(&messages[i]));
            messages[i]["content"] = json!([{"type": "text", "text": cfg.hard_clear_placeholder}]);
            let tool = messages[i].get("toolName").and_then(Value::as_str).unwrap_or("").to_owned();
            out.actions.push(PruneAction::HardClear { index: i, tool, chars });
            ratio = total(messages) / char_window;
        }
    }
    out.ratio_after = ratio;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn messages(image_in_first: bool) -> Vec<Value> {
        let mut first = json!([{"type": "text", "text": "a".repeat(10_000)}]);
        if image_in_first {
            first
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "image", "data": "x", "mimeType": "image/png"}));
        }
        vec![
            json!({"role": "user", "content": "start"}),
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}]}),
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": first}),
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c2", "name": "bash", "arguments": {}}]}),
            json!({"role": "toolResult", "toolCallId": "c2", "toolName": "bash", "content": [{"type": "text", "text": "b".repeat(60_000)}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "a"}]}),
            json!({"role": "user", "content": "more"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "b"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "c"}]}),
        ]
    }

    fn input(window: u64, minutes_since_touch: Option<i64>) -> PruneInput {
        PruneInput {
            context_window: window,
            now_ms: 100 * MIN,
            last_cache_touch_ms: minutes_since_touch.map(|m| 100 * MIN - m * MIN),
            provider: "anthropic".into(),
            model_id: "claude-opus-4-6".into(),
        }
    }

    fn summary(o: &PruneOutcome) -> String {
        match o.skipped {
            Some(why) => format!("skip: {why}"),
            None => o
                .actions
                .iter()
                .map(|a| match a {
                    PruneAction::SoftTrim { index, .. } => format!("soft {index}"),
                    PruneAction::HardClear { index, .. } => format!("hard {index}"),
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    #[test]
    fn each_threshold_in_turn() {
        let base = PruneConfig::default();
        let no_soft = PruneConfig { soft_trim_max_chars: 1_000_000, ..PruneConfig::default() };
        let cases: Vec<(&str, PruneConfig, PruneInput, bool, &str)> = vec![
            (
                "cache touched 4 min ago: warm",
                base.clone(),
                input(50_000, Some(4)),
                false,
                "skip: cache still warm",
            ),
            ("no cache touch", base.clone(), input(50_000, None), false, "skip: no cache touch recorded"),
            (
                "not anthropic",
                base.clone(),
                PruneInput { provider: "openai".into(), ..input(50_000, Some(6)) },
                false,
                "skip: provider not eligible (anthropic only)",
            ),
            (
                "openrouter anthropic model is eligible",
                base.clone(),
                PruneInput {
                    provider: "openrouter".into(),
                    model_id: "anthropic/claude".into(),
                    ..input(50_000, Some(6))
                },
                false,
                "soft 2, soft 4",
            ),
            // 70k chars in a 400k-char window: ratio 0.18 < 0.3.
            (
                "below the soft-trim ratio",
                base.clone(),
                input(100_000, Some(6)),
                false,
                "skip: below the soft-trim ratio",
            ),
            // 200k-char window: ratio 0.35: both old results soft-trimmed; afterwards far below 0.5.
            ("soft trim", base.clone(), input(50_000, Some(6)), false, "soft 2, soft 4"),
            // No soft trim; 120k-char window, ratio 0.58 >= 0.5: clear oldest first until below.
            ("hard clear", no_soft.clone(), input(30_000, Some(6)), false, "hard 2, hard 4"),
            (
                "hard clear needs 50000 prunable chars",
                PruneConfig { min_prunable_tool_chars: 80_000, ..no_soft.clone() },
                input(30_000, Some(6)),
                false,
                "",
            ),
            ("an image protects its result", base.clone(), input(50_000, Some(6)), true, "soft 4"),
            (
                "denied tools are never pruned",
                PruneConfig { tools_deny: vec!["BA*".into()], ..base.clone() },
                input(50_000, Some(6)),
                false,
                "soft 2",
            ),
            (
                "the last five assistants protect everything after the first",
                PruneConfig { keep_last_assistants: 5, ..base.clone() },
                input(50_000, Some(6)),
                false,
                "",
            ),
        ];
        for (name, cfg, inp, image, expect) in cases {
            let mut m = messages(image);
            let out = prune(&mut m, &cfg, &inp);
            assert_eq!(summary(&out), expect, "{name}");
            if out.actions.is_empty() {
                assert_eq!(m, messages(image), "{name}: unchanged");
            } else {
                assert!(out.ratio_after < out.ratio_before, "{name}");
            }
        }
    }

    #[test]
    fn soft_trim_keeps_head_and_tail_with_a_note() {
        let mut m = messages(false);
        prune(&mut m, &PruneConfig::default(), &input(50_000, Some(6)));
        let text = m[4]["content"][0]["text"].as_str().unwrap();
        let expect = format!(
            "{}\n...\n{}\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 60000 chars.]",
            "b".repeat(1500),
            "b".repeat(1500)
        );
        assert_eq!(text, expect);
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_match("ba*", "BASH"));
        assert!(glob_match("*_search", "web_search"));
        assert!(glob_match("mem*get", "memory_get"));
        assert!(!glob_match("read", "reader"));
    }
}

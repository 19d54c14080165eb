//! A deterministic generator of realistic Pi v3 transcripts.
//!
//! Same options, same bytes: the output depends only on [`GenOptions`]. Lines
//! are written as Pi writes them (`JSON.stringify`, Pi's key orders), so they
//! double as byte-level round-trip cases. Conversations are turns of a user
//! request, assistant thinking and tool calls, tool results and a final answer,
//! with usage and cost; identifiers (UUIDs, paths, URLs, hashes, host:port,
//! ticket ids) are planted in the text for identifier-preservation tests.

use crate::json::to_js_string;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenOptions {
    /// Seed of the random stream.
    pub seed: u64,
    /// Entries after the header (at least this many; a turn is never cut).
    pub entries: usize,
    /// Times the conversation returns to an earlier entry and continues there.
    pub branches: usize,
    /// Compaction entries spread over the conversation.
    pub compactions: usize,
    /// Mean length in characters of a tool result's text.
    pub tool_output_chars: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions { seed: 1, entries: 200, branches: 0, compactions: 0, tool_output_chars: 1200 }
    }
}

const START_MS: i64 = 1_767_607_200_000; // 2026-01-05T10:00:00.000Z
const WORDS: &[&str] = &[
    "the",
    "build",
    "fails",
    "because",
    "config",
    "loader",
    "retries",
    "session",
    "token",
    "cache",
    "index",
    "parser",
    "returns",
    "empty",
    "result",
    "when",
    "input",
    "has",
    "trailing",
    "newline",
    "check",
    "handler",
    "migration",
    "schema",
    "version",
    "timeout",
    "after",
    "deploy",
    "branch",
    "merge",
    "test",
    "flaky",
    "increase",
    "limit",
    "compaction",
    "summary",
    "keeps",
    "recent",
    "turns",
    "and",
    "drops",
    "old",
    "tool",
    "output",
    "we",
    "should",
    "fix",
    "this",
    "before",
    "release",
    "näive",
    "café",
    "日本語",
    "emoji 🚀",
];
const TOOLS: &[&str] = &["read", "edit", "write", "bash", "grep"];
const DIRS: &[&str] = &["src", "crates/core/src", "tests", "docs", "scripts", "web/app"];
const FILES: &[&str] = &["main.rs", "config.ts", "loader.py", "index.md", "session.go", "retry.rs", "api.ts"];
const HOSTS: &[&str] = &["db.internal", "10.0.3.17", "cache-01.example.net", "localhost"];
const LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high"];

struct Gen {
    rng: ChaCha8Rng,
    options: GenOptions,
    lines: Vec<String>,
    ids: std::collections::HashSet<String>,
    /// Entries on the current branch, root first.
    path: Vec<PathItem>,
    clock_ms: i64,
    /// Tokens the next pushed entry adds to the context.
    pending_tokens: u64,
    /// The context size a provider would report (system prompt included), kept
    /// as Pi builds the context: the last compaction's summary and kept range.
    context_tokens: u64,
    files_read: Vec<String>,
    files_modified: Vec<String>,
}

/// One entry of the current branch.
struct PathItem {
    id: String,
    is_user: bool,
    tokens: u64,
    /// For a compaction: the path index of its first kept entry.
    keeps_from: Option<usize>,
}

/// Tokens of the system prompt and tool schemas a provider counts on every call.
const SYSTEM_TOKENS: u64 = 3000;

fn iso(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

impl Gen {
    fn id(&mut self) -> String {
        loop {
            let id = format!("{:08x}", self.rng.gen::<u32>());
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }

    fn uuid(&mut self) -> String {
        let a: u128 = self.rng.gen();
        let h = format!("{a:032x}");
        format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
    }

    fn tick(&mut self) -> i64 {
        self.clock_ms += self.rng.gen_range(200..20_000);
        self.clock_ms
    }

    fn path_name(&mut self) -> String {
        let dir = DIRS.choose(&mut self.rng).copied().unwrap_or("src");
        let file = FILES.choose(&mut self.rng).copied().unwrap_or("main.rs");
        format!("{dir}/{file}")
    }

    fn identifier(&mut self) -> String {
        match self.rng.gen_range(0..7) {
            0 => self.uuid(),
            1 => format!("/{}", self.path_name()),
            2 => format!("https://git.example.com/acme/app/pull/{}", self.rng.gen_range(1..5000)),
            3 => format!("{:040x}", self.rng.gen::<u128>()),
            4 => {
                let host = HOSTS.choose(&mut self.rng).copied().unwrap_or("localhost");
                format!("{host}:{}", self.rng.gen_range(1024..65535))
            }
            5 => format!("OPS-{}", self.rng.gen_range(10..9999)),
            _ => format!("{:07x}", self.rng.gen_range(0x100_0000u32..0xfff_ffff)),
        }
    }

    fn sentence(&mut self, words: usize) -> String {
        let mut out = Vec::with_capacity(words + 1);
        for _ in 0..words {
            out.push(WORDS.choose(&mut self.rng).copied().unwrap_or("x").to_owned());
        }
        if self.rng.gen_bool(0.5) {
            let at = self.rng.gen_range(0..=out.len());
            let ident = self.identifier();
            out.insert(at, ident);
        }
        out.join(" ")
    }

    fn text(&mut self, chars: usize) -> String {
        let mut out = String::new();
        while out.len() < chars {
            if !out.is_empty() {
                out.push(if self.rng.gen_bool(0.2) { '\n' } else { ' ' });
            }
            let n = self.rng.gen_range(4..14);
            out.push_str(&self.sentence(n));
            out.push('.');
        }
        out
    }

    fn push(&mut self, value: Value, is_user: bool) {
        let id = value.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        // serde_json values of our own making always serialise.
        self.lines.push(to_js_string(&value).unwrap_or_default());
        let tokens = std::mem::take(&mut self.pending_tokens);
        self.context_tokens += tokens;
        self.path.push(PathItem { id, is_user, tokens, keeps_from: None });
    }

    /// Recomputes the context after the path changed shape (compaction, branch).
    fn recount(&mut self) {
        let last = self.path.iter().rposition(|p| p.keeps_from.is_some());
        let tokens = |items: &[PathItem]| items.iter().map(|p| p.tokens).sum::<u64>();
        self.context_tokens = SYSTEM_TOKENS
            + match last {
                Some(c) => {
                    let keep = self.path[c].keeps_from.unwrap_or(c);
                    self.path[c].tokens + tokens(&self.path[keep..c]) + tokens(&self.path[c + 1..])
                }
                None => tokens(&self.path),
            };
    }

    fn parent(&self) -> Value {
        self.path.last().map_or(Value::Null, |p| Value::from(p.id.clone()))
    }

    fn entry_count(&self) -> usize {
        self.lines.len() - 1
    }

    fn message(&mut self, message: Value, is_user: bool) {
        let id = self.id();
        let ms = message.get("timestamp").and_then(Value::as_i64).unwrap_or(self.clock_ms);
        let value = json!({"type": "message", "id": id, "parentId": self.parent(), "timestamp": iso(ms), "message": message});
        self.push(value, is_user);
    }

    fn usage(&mut self, output: u64) -> Value {
        // The prompt is the context; it splits into cached, newly cached and fresh input.
        let cache_read = self.context_tokens.saturating_sub(2000);
        let fresh = self.context_tokens - cache_read;
        let cache_write = self.rng.gen_range(0..800u64).min(fresh);
        let input = fresh - cache_write;
        let cost_in = input as f64 * 3e-6;
        let cost_out = output as f64 * 1.5e-5;
        let cost_cr = cache_read as f64 * 3e-7;
        let cost_cw = cache_write as f64 * 3.75e-6;
        json!({
            "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": input + output + cache_read + cache_write,
            "cost": {"input": cost_in, "output": cost_out, "cacheRead": cost_cr, "cacheWrite": cost_cw,
                     "total": cost_in + cost_out + cost_cr + cost_cw}
        })
    }

    fn turn(&mut self) {
        let words = self.rng.gen_range(6..40);
        let request = self.sentence(words);
        let ms = self.tick();
        self.pending_tokens = chars_to_tokens(&request);
        self.message(
            json!({"role": "user", "content": [{"type": "text", "text": request}], "timestamp": ms}),
            true,
        );

        let calls = self.rng.gen_range(0..4);
        let mut blocks = Vec::new();
        if self.rng.gen_bool(0.6) {
            let thought = {
                let n = self.rng.gen_range(40..400);
                self.text(n)
            };
            let signature = format!("sig_{:016x}", self.rng.gen::<u64>());
            blocks.push(json!({"type": "thinking", "thinking": thought, "thinkingSignature": signature}));
        }
        let mut pending = Vec::new();
        for _ in 0..calls {
            let tool = TOOLS.choose(&mut self.rng).copied().unwrap_or("read");
            let call_id = format!("toolu_{:024x}", self.rng.gen::<u128>() >> 32);
            let path = self.path_name();
            let arguments = match tool {
                "bash" => {
                    json!({"command": format!("cargo test -p {} -- --nocapture", path.replace('/', "-"))})
                }
                "grep" => json!({"pattern": self.sentence(2), "path": path}),
                "edit" => json!({"path": path, "oldText": self.sentence(5), "newText": self.sentence(6)}),
                "write" => json!({"path": path, "content": self.text(200)}),
                _ => json!({"path": path, "offset": self.rng.gen_range(1..400), "limit": 200}),
            };
            match tool {
                "read" | "grep" => self.files_read.push(path.clone()),
                "edit" | "write" => self.files_modified.push(path.clone()),
                _ => {}
            }
            blocks.push(json!({"type": "toolCall", "id": call_id, "name": tool, "arguments": arguments}));
            pending.push((call_id, tool));
        }
        if pending.is_empty() || self.rng.gen_bool(0.3) {
            let answer = {
                let n = self.rng.gen_range(20..300);
                self.text(n)
            };
            blocks.push(json!({"type": "text", "text": answer}));
        }
        // Output tokens close to the reply's size, as a tokenizer would count it.
        let output = blocks_tokens(&blocks) + self.rng.gen_range(0..8);
        let usage = self.usage(output);
        self.pending_tokens = output;
        let stop = if pending.is_empty() { "stop" } else { "toolUse" };
        let ms = self.tick();
        self.message(
            json!({"role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": "anthropic",
                   "model": "claude-sonnet-4-5", "usage": usage, "stopReason": stop, "timestamp": ms}),
            false,
        );
        for (call_id, tool) in &pending {
            let mean = self.options.tool_output_chars.max(1);
            let chars = self.rng.gen_range(mean / 4..mean * 7 / 4 + 1);
            let output = self.text(chars);
            let is_error = self.rng.gen_bool(0.08);
            self.pending_tokens = chars_to_tokens(&output);
            let ms = self.tick();
            let mut result = json!({"role": "toolResult", "toolCallId": call_id, "toolName": tool,
                                    "content": [{"type": "text", "text": output}]});
            if *tool == "bash" {
                result["details"] = json!({"exitCode": if is_error { 1 } else { 0 }});
            }
            result["isError"] = Value::from(is_error);
            result["timestamp"] = Value::from(ms);
            self.message(result, false);
        }
        if !pending.is_empty() {
            let answer = {
                let n = self.rng.gen_range(20..600);
                self.text(n)
            };
            let output = chars_to_tokens(&answer) + self.rng.gen_range(0..8);
            let usage = self.usage(output);
            self.pending_tokens = output;
            let ms = self.tick();
            self.message(
                json!({"role": "assistant", "content": [{"type": "text", "text": answer}],
                       "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                       "usage": usage, "stopReason": "stop", "timestamp": ms}),
                false,
            );
        }
    }

    fn simple(&mut self, mut value: Value, custom: bool) {
        let id = self.id();
        let ms = self.tick();
        let base =
            json!({"type": value["type"].clone(), "id": id, "parentId": self.parent(), "timestamp": iso(ms)});
        let mut merged = serde_json::Map::new();
        let fields = value.as_object_mut().map(std::mem::take).unwrap_or_default();
        if custom {
            // Pi writes custom entries as type, customType, data, id, parentId, timestamp.
            merged.extend(fields);
            merged.extend(
                base.as_object().cloned().unwrap_or_default().into_iter().filter(|(k, _)| k != "type"),
            );
        } else {
            merged.extend(base.as_object().cloned().unwrap_or_default());
            merged.extend(fields.into_iter().filter(|(k, _)| k != "type"));
        }
        self.push(Value::Object(merged), false);
    }

    fn compaction(&mut self) {
        // Keep from a user message a few turns back on the current path.
        let users: Vec<usize> =
            self.path.iter().enumerate().filter(|(_, p)| p.is_user).map(|(i, _)| i).collect();
        let Some(&keep) = users.iter().rev().nth(self.rng.gen_range(1..4).min(users.len().saturating_sub(1)))
        else {
            return;
        };
        let first_kept = self.path[keep].id.clone();
        let mut summary = String::from("## Goal\n");
        let words = self.rng.gen_range(10..30);
        summary.push_str(&self.sentence(words));
        summary.push_str("\n\n## Progress\n");
        let bullets = self.rng.gen_range(2..6);
        for _ in 0..bullets {
            let line = self.sentence(8);
            summary.push_str(&format!("- {line}\n"));
        }
        let read = sorted_unique(&self.files_read);
        let modified = sorted_unique(&self.files_modified);
        let tokens_before = self.context_tokens;
        self.pending_tokens = summary.len() as u64 / 4;
        self.simple(
            json!({"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept,
                   "tokensBefore": tokens_before,
                   "details": {"readFiles": read, "modifiedFiles": modified}, "fromHook": false}),
            false,
        );
        if let Some(last) = self.path.last_mut() {
            last.keeps_from = Some(keep);
        }
        self.recount();
    }

    fn branch(&mut self) {
        // Go back to an earlier assistant or user entry and continue from it.
        if self.path.len() < 4 {
            return;
        }
        let back = self.rng.gen_range(2..self.path.len().min(40));
        let cut = self.path.len() - back;
        // Pi's tree navigation leaves the leaf on the parent of a user message.
        let cut = if self.path[cut - 1].is_user { cut - 1 } else { cut };
        self.path.truncate(cut.max(1));
        self.recount();
        let summary = self.sentence(12);
        let from = self.parent();
        self.simple(json!({"type": "branch_summary", "fromId": from, "summary": summary}), false);
    }
}

/// Pi's estimate of a text: UTF-16 length / 4, rounded up.
fn chars_to_tokens(text: &str) -> u64 {
    (text.encode_utf16().count() as u64).div_ceil(4)
}

/// Pi's estimate of assistant blocks: text, thinking, tool name and arguments.
fn blocks_tokens(blocks: &[Value]) -> u64 {
    let chars: usize = blocks
        .iter()
        .map(|b| {
            let text = |k: &str| b.get(k).and_then(Value::as_str).map_or(0, |t| t.encode_utf16().count());
            let args =
                b.get("arguments").map_or(0, |a| to_js_string(a).map_or(0, |t| t.encode_utf16().count()));
            text("text") + text("thinking") + text("name") + args
        })
        .sum();
    (chars as u64).div_ceil(4)
}

fn sorted_unique(items: &[String]) -> Vec<String> {
    let mut v = items.to_vec();
    v.sort();
    v.dedup();
    v
}

/// Generates a transcript: header line first, each line without `\n`.
pub fn generate(options: GenOptions) -> Vec<String> {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(options.seed),
        options,
        lines: Vec::new(),
        ids: Default::default(),
        path: Vec::new(),
        clock_ms: START_MS,
        pending_tokens: 0,
        context_tokens: SYSTEM_TOKENS,
        files_read: Vec::new(),
        files_modified: Vec::new(),
    };
    let session_id = g.uuid();
    g.lines.push(
        to_js_string(&json!({"type": "session", "version": 3, "id": session_id, "timestamp": iso(START_MS),
                             "cwd": "/home/dev/project"}))
        .unwrap_or_default(),
    );
    g.simple(json!({"type": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}), false);
    let level = LEVELS.choose(&mut g.rng).copied().unwrap_or("off");
    g.simple(json!({"type": "thinking_level_change", "thinkingLevel": level}), false);

    let target = options.entries.max(4);
    let every = |k: usize| if k == 0 { usize::MAX } else { target / k.saturating_add(1) };
    let (compaction_every, branch_every) = (every(options.compactions), every(options.branches));
    let (mut compactions, mut branches) = (0, 0);
    let mut next_compaction = compaction_every;
    let mut next_branch = branch_every.saturating_add(branch_every / 2);
    while g.entry_count() < target {
        g.turn();
        let n = g.entry_count();
        if compactions < options.compactions && n >= next_compaction {
            g.compaction();
            compactions += 1;
            next_compaction = next_compaction.saturating_add(compaction_every);
        }
        if branches < options.branches && n >= next_branch {
            g.branch();
            branches += 1;
            next_branch = next_branch.saturating_add(branch_every);
        }
        if g.rng.gen_bool(0.03) {
            let data = json!({"turn": n, "ref": g.identifier()});
            g.simple(json!({"type": "custom", "customType": "sessionlog.gen", "data": data}), true);
        }
        if g.rng.gen_bool(0.02) {
            let target_id = g.path[g.rng.gen_range(0..g.path.len())].id.clone();
            let label = format!("checkpoint {}", g.rng.gen_range(1..100));
            g.simple(json!({"type": "label", "targetId": target_id, "label": label}), false);
        }
        if g.rng.gen_bool(0.01) {
            let name = g.sentence(3);
            g.simple(json!({"type": "session_info", "name": name}), false);
        }
    }
    g.lines
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use serde_json::Value;

    use super::*;

    #[test]
    fn generated_trees_are_well_formed() {
        for seed in 0..20 {
            let options =
                GenOptions { seed, entries: 300, branches: 3, compactions: 3, tool_output_chars: 80 };
            let lines = generate(options);
            let values: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(values[0]["type"], "session");
            assert!(values.len() > 300);
            let mut ids = HashSet::new();
            let mut by_id: HashMap<String, &Value> = HashMap::new();
            for v in &values[1..] {
                let id = v["id"].as_str().unwrap().to_owned();
                assert!(ids.insert(id.clone()), "seed {seed}: duplicate id {id}");
                if let Some(parent) = v["parentId"].as_str() {
                    assert!(by_id.contains_key(parent), "seed {seed}: parent {parent} not before {id}");
                }
                by_id.insert(id, v);
            }
            let count = |ty: &str| values.iter().filter(|v| v["type"] == ty).count();
            assert_eq!(count("compaction"), 3, "seed {seed}");
            assert_eq!(count("branch_summary"), 3, "seed {seed}");
            // Every tool call is answered by a result among its descendants' first entries.
            for v in &values[1..] {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "toolCall" {
                        let call = block["id"].as_str().unwrap();
                        assert!(
                            values.iter().any(|r| r["message"]["toolCallId"] == call),
                            "seed {seed}: call {call} has no result"
                        );
                    }
                }
            }
        }
    }
}

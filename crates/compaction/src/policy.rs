//! Compaction policy: the knobs a user tunes, and the presets we ship.

use serde::{Deserialize, Serialize};
use sessionlog_events::PiRules;

use crate::ids::SecretPolicy;

/// When a compaction fires.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Trigger {
    /// Pi/OpenClaw: context > window − reserve.
    Threshold,
    /// A share of the window: context > ratio × window (Codex-like 0.9, goose-like 0.8).
    Ratio(f64),
}

impl TryFrom<String> for Trigger {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Trigger> for String {
    fn from(t: Trigger) -> String {
        t.to_string()
    }
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::Threshold => f.write_str("threshold"),
            Trigger::Ratio(r) => write!(f, "ratio:{r}"),
        }
    }
}

impl std::str::FromStr for Trigger {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "threshold" {
            return Ok(Trigger::Threshold);
        }
        let ratio =
            s.strip_prefix("ratio:").ok_or_else(|| format!("unknown trigger `{s}` (threshold, ratio:R)"))?;
        match ratio.parse::<f64>() {
            Ok(r) if r > 0.0 && r <= 1.0 => Ok(Trigger::Ratio(r)),
            _ => Err(format!("trigger ratio must be in (0, 1], got `{ratio}`")),
        }
    }
}

/// Pre-compaction memory flush settings (OpenClaw `compaction.memoryFlush`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryFlush {
    /// Tokens below the compaction threshold at which the flush turn runs
    /// (at most half of what the window leaves after the flush's reserve:
    /// see [`Policy::memory_flush_threshold`]).
    pub soft_threshold_tokens: u64,
    /// A flush also runs once the transcript reaches this many bytes (its
    /// JSONL size), once per compaction cycle, even on stale token counters;
    /// 0 = off. A number or a size such as `"2mb"`.
    #[serde(default = "default_force_flush_bytes")]
    pub force_flush_transcript_bytes: ByteSize,
}

impl MemoryFlush {
    /// OpenClaw 2026.9's defaults: 4000 soft tokens, 2 MiB transcripts.
    pub const OPENCLAW: MemoryFlush = MemoryFlush {
        soft_threshold_tokens: DEFAULT_MEMORY_FLUSH_SOFT_TOKENS,
        force_flush_transcript_bytes: ByteSize(DEFAULT_FORCE_FLUSH_TRANSCRIPT_BYTES),
    };

    /// Whether the transcript size alone calls for a flush in this cycle:
    /// the trigger is on and `bytes` reached it, and no flush ran since the
    /// last compaction.
    pub fn forced_by_size(&self, bytes: u64, compaction_count: u32, flushed_at_count: Option<u32>) -> bool {
        let limit = self.force_flush_transcript_bytes.0;
        limit > 0 && bytes >= limit && flushed_at_count != Some(compaction_count)
    }
}

fn default_force_flush_bytes() -> ByteSize {
    ByteSize(DEFAULT_FORCE_FLUSH_TRANSCRIPT_BYTES)
}

/// A size in bytes, read from a number or from a string such as `"2mb"`,
/// `"512kb"` or `"1.5m"` (units b, k/kb, m/mb, g/gb, t/tb in powers of
/// 1024, as OpenClaw's config reads them); written as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ByteSizeInput", into = "u64")]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(b: ByteSize) -> u64 {
        b.0
    }
}

/// What a config file may hold for a [`ByteSize`].
#[derive(Deserialize)]
#[serde(untagged)]
enum ByteSizeInput {
    Number(u64),
    Text(String),
}

impl TryFrom<ByteSizeInput> for ByteSize {
    type Error = String;
    fn try_from(input: ByteSizeInput) -> Result<Self, String> {
        match input {
            ByteSizeInput::Number(n) => Ok(ByteSize(n)),
            ByteSizeInput::Text(s) => s.parse(),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        let s = raw.trim().to_ascii_lowercase();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let bad = || format!("invalid byte size `{raw}` (a number of bytes, or e.g. \"2mb\", \"512kb\")");
        let value: f64 = number.parse().map_err(|_| bad())?;
        let multiplier: u64 = match unit {
            "" | "b" => 1,
            "k" | "kb" => 1 << 10,
            "m" | "mb" => 1 << 20,
            "g" | "gb" => 1 << 30,
            "t" | "tb" => 1 << 40,
            _ => return Err(format!("invalid byte size `{raw}`: unknown unit `{unit}` (b, kb, mb, gb, tb)")),
        };
        let bytes = (value * multiplier as f64).round();
        if !(0.0..=9_007_199_254_740_991.0).contains(&bytes) {
            return Err(bad());
        }
        Ok(ByteSize(bytes as u64))
    }
}

/// The `memoryFlush` fields of a `[compaction]` table (OpenClaw 2026.9's
/// keys: `enabled`, `softThresholdTokens`, `forceFlushTranscriptBytes`,
/// `model`); a field left out keeps the base policy's value. `prompt` and
/// `systemPrompt`, which OpenClaw 2026.9 no longer takes, are refused with
/// its reason.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryFlushOverrides {
    /// `false` turns the flush off; `true` turns it on with OpenClaw's
    /// defaults when the base policy has none.
    pub enabled: Option<bool>,
    /// Tokens below the compaction threshold.
    pub soft_threshold_tokens: Option<u64>,
    /// The transcript size that forces a flush (0 = off).
    pub force_flush_transcript_bytes: Option<ByteSize>,
    /// OpenClaw's model for the flush turn alone (`provider/model` or a
    /// model id; no fallbacks). No policy reads it: the front end says
    /// whether it honours it.
    pub model: Option<String>,
    /// `prompt`: refused (see [`RetiredFlushPrompt`]).
    pub prompt: Option<RetiredFlushPrompt>,
    /// `systemPrompt`: refused (see [`RetiredFlushPrompt`]).
    pub system_prompt: Option<RetiredFlushPrompt>,
}

/// A custom memory-flush prompt or system prompt, which OpenClaw 2026.9 no
/// longer takes: its config check refuses `memoryFlush.prompt` and
/// `memoryFlush.systemPrompt` and `openclaw doctor --fix` removes them; the
/// flush always sends OpenClaw's own prompts. Reading one is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetiredFlushPrompt;

impl<'de> Deserialize<'de> for RetiredFlushPrompt {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "OpenClaw 2026.9 no longer takes a custom memory-flush prompt or system prompt (its \
             config check refuses `prompt` and `systemPrompt`, `openclaw doctor --fix` removes \
             them): the flush sends OpenClaw's own; remove the key",
        ))
    }
}

impl MemoryFlushOverrides {
    /// `base` with these fields set.
    pub fn apply(&self, base: Option<MemoryFlush>) -> Option<MemoryFlush> {
        let touched = self.soft_threshold_tokens.is_some() || self.force_flush_transcript_bytes.is_some();
        let on = self.enabled.unwrap_or(base.is_some() || touched);
        if !on {
            return None;
        }
        let base = base.unwrap_or(MemoryFlush::OPENCLAW);
        Some(MemoryFlush {
            soft_threshold_tokens: self.soft_threshold_tokens.unwrap_or(base.soft_threshold_tokens),
            force_flush_transcript_bytes: self
                .force_flush_transcript_bytes
                .unwrap_or(base.force_flush_transcript_bytes),
        })
    }
}

/// A compaction policy. Fields left out of a policy file take Pi's defaults
/// ([`Policy::pi`]); [`Policy::openclaw`] adds OpenClaw's floor, its cap on
/// the reserve and its memory flush.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Policy {
    /// Name shown in reports.
    pub name: String,
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Tokens kept free for the reply (Pi's `reserveTokens`).
    pub reserve_tokens: u64,
    /// OpenClaw's reserve floor (`reserveTokensFloor`, 20000 in OpenClaw); 0 = Pi (no floor).
    /// OpenClaw 2026.9 always uses 20000 (its config refuses the key); a
    /// policy may still set it.
    pub reserve_tokens_floor: u64,
    /// The reserve in force is at most this share of a known window
    /// (OpenClaw 2026.9's `MAX_COMPACTION_RESERVE_RATIO`, 0.25, in the
    /// `openclaw` preset); 0 = no such cap: Pi's reserve as is, or, with a
    /// floor, the older rule of spec compaction §2.1 (see
    /// [`Policy::effective_reserve`]).
    #[serde(skip_serializing_if = "is_zero", deserialize_with = "reserve_share")]
    pub max_reserve_share: f64,
    /// Recent tokens kept verbatim (Pi's `keepRecentTokens`).
    pub keep_recent_tokens: u64,
    /// When to compact.
    pub trigger: Trigger,
    /// Chunk size as a share of the window; `None` = OpenClaw's adaptive ratio.
    pub chunk_ratio: Option<f64>,
    /// Parts for staged summarisation (OpenClaw: 2).
    pub parts: usize,
    /// Largest share of the window the summarised history may take (OpenClaw: 0.5).
    pub max_history_share: f64,
    /// Overflow-recovery compactions allowed per run (OpenClaw: 3).
    pub max_overflow_attempts: u32,
    /// Memory flush before compaction (OpenClaw); `None` = off (Pi).
    pub memory_flush: Option<MemoryFlush>,
    /// What the identifier ledger keeps of secrets.
    pub secret_policy: SecretPolicy,
    /// User turns at the end of the summarised range kept verbatim in the
    /// summary (OpenClaw's `recentTurnsPreserve`: 3; at most 12; 0 = off).
    pub recent_turns_preserve: u32,
    /// List failed tool calls in a `## Tool Failures` section (OpenClaw's safeguard).
    pub tool_failures_section: bool,
    /// Whose cut rules prepare each compaction: Pi `"0.58"` (0.58.3) or
    /// `"1.6"` (1.6.0: kept entries summarised again, every context message
    /// counted toward `keepRecentTokens`, nothing prepared when nothing is left
    /// to summarise).
    pub pi_rules: PiRules,
    /// The summariser a front end uses with this policy unless told
    /// otherwise (the live loop's `[compaction] summarizer`); `None` leaves
    /// the front end's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<SummarizerChoice>,
    /// Longest summary text in characters (OpenClaw's
    /// `MAX_COMPACTION_SUMMARY_CHARS`, 16000): the text after the visible
    /// identifier section is cut to fit, with a marker; what the cut removes
    /// goes to the ledger.
    pub summary_max_chars: u64,
    /// Characters of ledger lines shown in the visible identifier section at
    /// the top of the summary (the whole ledger is always in `details`).
    pub ledger_visible_max_chars: u64,
    /// A compaction reclaiming less than this share of its context is a
    /// no-op (replay's `noopCompactions`; 0.05).
    pub noop_reclaim_share: f64,
    /// OpenClaw's fix for compaction loops: a no-op compaction counts as no
    /// overflow-recovery attempt and is not repeated until the context has
    /// grown by `noopReclaimShare` of itself (off in the presets, which
    /// predate it).
    pub skip_noop_compactions: bool,
    /// Three compactions within this many model calls are a compaction loop
    /// (replay's `compactionLoops`; 10).
    pub loop_window_calls: u64,
    /// Observation masking: before each turn, tool results from this many
    /// user turns back or older (at least 1) are replaced in the context by
    /// [`MASK_PLACEHOLDER`] (persisted as a Pi 1.6 `context_edit` entry);
    /// `None` = off (every preset), alone or beside compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mask_tool_results_after_turns: Option<u32>,
}

fn is_zero(share: &f64) -> bool {
    *share == 0.0
}

/// A `maxReserveShare`: a number from 0 to 1 (a share of the window above
/// 1, negative or not finite is refused).
fn reserve_share<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let share = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err(serde::de::Error::custom(format!(
            "maxReserveShare must be a number from 0 to 1 (OpenClaw 2026.9: 0.25; 0 = the older \
             floor rule), got {share}"
        )))
    }
}

fn reserve_share_override<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    reserve_share(d).map(Some)
}

/// The text a masked tool result is replaced by.
pub const MASK_PLACEHOLDER: &str = "[earlier tool output masked]";

/// A summariser named in a policy: `extractive`, `recorded` or `model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SummarizerChoice {
    /// [`crate::Extractive`]: deterministic, no model.
    Extractive,
    /// [`crate::Recorded`]: a recorded compaction's summary where the cut matches.
    Recorded,
    /// A model (the provider crate's model summariser).
    Model,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::pi()
    }
}

/// Policy fields set over a preset or a policy file: `sessionlog replay`'s
/// flags, or the fields of a `[compaction]` table beside its `preset`. A
/// field left out keeps the base policy's value.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PolicyOverrides {
    /// The model's context window.
    pub context_window: Option<u64>,
    /// Tokens kept free for the reply.
    pub reserve_tokens: Option<u64>,
    /// OpenClaw's reserve floor (0 = Pi's behaviour).
    pub reserve_tokens_floor: Option<u64>,
    /// The reserve's cap as a share of the window (0 = none: the older rule).
    #[serde(deserialize_with = "reserve_share_override")]
    pub max_reserve_share: Option<f64>,
    /// Recent tokens kept verbatim.
    pub keep_recent_tokens: Option<u64>,
    /// Chunk size as a share of the window.
    pub chunk_ratio: Option<f64>,
    /// When to compact.
    pub trigger: Option<Trigger>,
    /// User turns kept verbatim in each summary.
    pub recent_turns_preserve: Option<u32>,
    /// Whose cut prepares each compaction (Pi 0.58 or 1.6).
    pub pi_rules: Option<PiRules>,
    /// Longest summary text in characters.
    pub summary_max_chars: Option<u64>,
    /// Characters of the visible identifier section.
    pub ledger_visible_max_chars: Option<u64>,
    /// OpenClaw's fix: no-op compactions not repeated.
    pub skip_noop_compactions: Option<bool>,
    /// Observation masking: tool results this many turns old are masked.
    pub mask_tool_results_after_turns: Option<u32>,
    /// The memory flush (OpenClaw's `memoryFlush`).
    pub memory_flush: Option<MemoryFlushOverrides>,
}

impl PolicyOverrides {
    /// `base` with these fields set.
    pub fn apply(&self, base: Policy) -> Policy {
        Policy {
            context_window: self.context_window.unwrap_or(base.context_window),
            reserve_tokens: self.reserve_tokens.unwrap_or(base.reserve_tokens),
            reserve_tokens_floor: self.reserve_tokens_floor.unwrap_or(base.reserve_tokens_floor),
            max_reserve_share: self.max_reserve_share.unwrap_or(base.max_reserve_share),
            keep_recent_tokens: self.keep_recent_tokens.unwrap_or(base.keep_recent_tokens),
            chunk_ratio: self.chunk_ratio.or(base.chunk_ratio),
            trigger: self.trigger.unwrap_or(base.trigger),
            recent_turns_preserve: self.recent_turns_preserve.unwrap_or(base.recent_turns_preserve),
            pi_rules: self.pi_rules.unwrap_or(base.pi_rules),
            summary_max_chars: self.summary_max_chars.unwrap_or(base.summary_max_chars),
            ledger_visible_max_chars: self.ledger_visible_max_chars.unwrap_or(base.ledger_visible_max_chars),
            skip_noop_compactions: self.skip_noop_compactions.unwrap_or(base.skip_noop_compactions),
            mask_tool_results_after_turns: self
                .mask_tool_results_after_turns
                .or(base.mask_tool_results_after_turns),
            memory_flush: match &self.memory_flush {
                Some(m) => m.apply(base.memory_flush),
                None => base.memory_flush,
            },
            ..base
        }
    }
}

/// Share of its context a compaction must reclaim not to be a no-op.
pub const DEFAULT_NOOP_RECLAIM_SHARE: f64 = 0.05;
/// Model calls within which three compactions are a loop.
pub const DEFAULT_LOOP_WINDOW_CALLS: u64 = 10;
/// OpenClaw's `MAX_COMPACTION_SUMMARY_CHARS`.
pub const DEFAULT_SUMMARY_MAX_CHARS: u64 = 16_000;
/// Characters of ledger lines in a summary's visible identifier section.
pub const DEFAULT_LEDGER_VISIBLE_MAX_CHARS: u64 = 2_000;
/// OpenClaw's reserve floor: `DEFAULT_PI_COMPACTION_RESERVE_TOKENS_FLOOR`,
/// `DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR` in 2026.9.
pub const DEFAULT_RESERVE_FLOOR: u64 = 20_000;
/// OpenClaw's `DEFAULT_MEMORY_FLUSH_SOFT_TOKENS`.
pub const DEFAULT_MEMORY_FLUSH_SOFT_TOKENS: u64 = 4_000;
/// OpenClaw's `DEFAULT_MEMORY_FLUSH_FORCE_TRANSCRIPT_BYTES` (2 MiB).
pub const DEFAULT_FORCE_FLUSH_TRANSCRIPT_BYTES: u64 = 2 * 1024 * 1024;
/// The window OpenClaw assumes when a model's is unknown
/// (`resolveContextTokens`' fallback), for the memory flush's threshold.
pub const UNKNOWN_WINDOW_TOKENS: u64 = 200_000;
/// OpenClaw 2026.9's `MAX_COMPACTION_RESERVE_RATIO`: the compaction reserve
/// (the `openclaw` preset's [`Policy::max_reserve_share`]) and the memory
/// flush's reserve are at most this share of the window.
pub const MAX_COMPACTION_RESERVE_RATIO: f64 = 0.25;
/// OpenClaw's `MIN_PROMPT_BUDGET_TOKENS` (the older reserve rule).
pub const MIN_PROMPT_BUDGET_TOKENS: u64 = 8_000;
/// OpenClaw's `BASE_CHUNK_RATIO`.
pub const BASE_CHUNK_RATIO: f64 = 0.4;
/// OpenClaw's `MIN_CHUNK_RATIO`.
pub const MIN_CHUNK_RATIO: f64 = 0.15;
/// OpenClaw's `SAFETY_MARGIN` for chars/4 under-counting.
pub const SAFETY_MARGIN: f64 = 1.2;
/// OpenClaw's `SUMMARIZATION_OVERHEAD_TOKENS`.
pub const SUMMARIZATION_OVERHEAD_TOKENS: u64 = 4_096;

/// The presets [`Policy::preset`] knows, by name.
pub const PRESETS: [&str; 4] = ["openclaw", "pi", "claude-code", "codex"];

/// Claude Code's `AUTOCOMPACT_BUFFER_TOKENS`.
pub const CLAUDE_CODE_AUTOCOMPACT_BUFFER: u64 = 13_000;
/// Claude Code's cap on the output reserve (`COMPACT_MAX_OUTPUT_TOKENS`).
pub const CLAUDE_CODE_MAX_OUTPUT_CAP: u64 = 20_000;
/// Max output tokens of the models Claude Code runs by default (Opus 4.5, Sonnet 4.5).
pub const CLAUDE_CODE_MAX_OUTPUT_TOKENS: u64 = 64_000;
/// Context window of Codex's gpt-5 / gpt-5-codex family (`CONTEXT_WINDOW_272K`).
pub const CODEX_CONTEXT_WINDOW: u64 = 272_000;

/// The reserve below the window at which Claude Code compacts, for a model
/// with `max_output` output tokens: `min(max_output, 20000) + 13000`.
pub fn claude_code_reserve(max_output: u64) -> u64 {
    max_output.min(CLAUDE_CODE_MAX_OUTPUT_CAP) + CLAUDE_CODE_AUTOCOMPACT_BUFFER
}

impl Policy {
    /// OpenClaw's defaults: 200k window, reserve 16384 raised to the 20000
    /// floor and capped at a quarter of the window (OpenClaw 2026.9; the
    /// floor rule before it is `maxReserveShare = 0`), keep 20000, memory
    /// flush at 4000, the safeguard's 3 preserved turns and tool-failure
    /// list, and the cut of the pre-1.x Pi of the embedded-Pi-runner
    /// generation (0.58 rules; OpenClaw 2026.9 bundles no Pi package, and its
    /// in-tree fork matches neither rule set).
    pub fn openclaw() -> Policy {
        Policy {
            name: "openclaw-default".to_owned(),
            pi_rules: PiRules::V0_58,
            reserve_tokens_floor: DEFAULT_RESERVE_FLOOR,
            max_reserve_share: MAX_COMPACTION_RESERVE_RATIO,
            memory_flush: Some(MemoryFlush::OPENCLAW),
            recent_turns_preserve: crate::safeguard::DEFAULT_RECENT_TURNS_PRESERVE,
            tool_failures_section: true,
            ..Policy::pi()
        }
    }

    /// Pi's defaults as of Pi 1.6.0: reserve 16384 (no floor), keep 20000,
    /// no memory flush, no safeguard sections, Pi 1.6's cut rules.
    pub fn pi() -> Policy {
        Policy {
            name: "pi-default".to_owned(),
            context_window: 200_000,
            reserve_tokens: 16_384,
            reserve_tokens_floor: 0,
            max_reserve_share: 0.0,
            keep_recent_tokens: 20_000,
            trigger: Trigger::Threshold,
            chunk_ratio: None,
            parts: 2,
            max_history_share: 0.5,
            max_overflow_attempts: 3,
            memory_flush: None,
            secret_policy: SecretPolicy::Reference,
            recent_turns_preserve: 0,
            tool_failures_section: false,
            pi_rules: PiRules::V1_6,
            summarizer: None,
            summary_max_chars: DEFAULT_SUMMARY_MAX_CHARS,
            ledger_visible_max_chars: DEFAULT_LEDGER_VISIBLE_MAX_CHARS,
            noop_reclaim_share: DEFAULT_NOOP_RECLAIM_SHARE,
            skip_noop_compactions: false,
            loop_window_calls: DEFAULT_LOOP_WINDOW_CALLS,
            mask_tool_results_after_turns: None,
        }
    }

    /// Claude Code's auto-compact trigger as a policy: it compacts when the
    /// context reaches `window − min(max output, 20000) − 13000`
    /// (anthropics/claude-code#31806), 167000 tokens of a 200k window
    /// (83.5%) for every current model (all have ≥ 20000 output tokens), so
    /// the reserve is 33000. Claude Code summarises the whole conversation;
    /// Pi's cut keeps at least the last message, so `keepRecentTokens` is 0.
    pub fn claude_code() -> Policy {
        Policy {
            name: "claude-code".to_owned(),
            context_window: 200_000,
            reserve_tokens: claude_code_reserve(CLAUDE_CODE_MAX_OUTPUT_TOKENS),
            keep_recent_tokens: 0,
            ..Policy::pi()
        }
    }

    /// Codex's auto-compact limit as a policy: `auto_compact_token_limit`
    /// defaults to 90% of the model's context window (`context_window * 9 /
    /// 10` in codex-rs), and the gpt-5 / gpt-5-codex family's window is
    /// 272000 tokens, so the limit is 244800 (a reserve of 27200). Codex then
    /// keeps up to 20000 tokens of the most recent user messages beside the
    /// summary (`COMPACT_USER_MESSAGE_MAX_TOKENS`); Pi's cut keeps the most
    /// recent 20000 tokens of any messages.
    pub fn codex() -> Policy {
        Policy {
            name: "codex".to_owned(),
            context_window: CODEX_CONTEXT_WINDOW,
            reserve_tokens: CODEX_CONTEXT_WINDOW - CODEX_CONTEXT_WINDOW * 9 / 10,
            keep_recent_tokens: 20_000,
            ..Policy::pi()
        }
    }

    /// A built-in preset by name: `openclaw`, `pi`, `claude-code` or `codex`.
    pub fn preset(name: &str) -> Option<Policy> {
        match name {
            "openclaw" => Some(Policy::openclaw()),
            "pi" => Some(Policy::pi()),
            "claude-code" => Some(Policy::claude_code()),
            "codex" => Some(Policy::codex()),
            _ => None,
        }
    }

    /// The reserve in force, `r = max(reserveTokens, floor)` bounded by the
    /// window `w` when it is known (above 0):
    ///
    /// - with a [`Policy::max_reserve_share`] `s` (OpenClaw 2026.9's
    ///   `resolveEffectiveCompactionReserveTokens`, `s = 0.25`):
    ///   `min(r, ⌊w × s⌋)` — the floor binds from 80k windows up;
    /// - without (`s = 0`; spec compaction §2.1, the embedded-Pi-runner
    ///   generation): only the floor is capped, at `w − min(8000, ⌊w/2⌋)`,
    ///   and Pi's `reserveTokens` is kept as is.
    ///
    /// With no floor and no share this is Pi's `reserveTokens`.
    pub fn effective_reserve(&self) -> u64 {
        let share = self.max_reserve_share;
        if share > 0.0 && share.is_finite() {
            let reserve = self.reserve_tokens.max(self.reserve_tokens_floor);
            if self.context_window == 0 {
                return reserve;
            }
            return reserve.min((self.context_window as f64 * share).floor() as u64);
        }
        let mut floor = self.reserve_tokens_floor;
        if self.context_window > 0 {
            let min_prompt = MIN_PROMPT_BUDGET_TOKENS.min((self.context_window / 2).max(1));
            let max_reserve = self.context_window.saturating_sub(min_prompt);
            floor = floor.min(max_reserve);
        }
        self.reserve_tokens.max(floor)
    }

    /// Pi's cut settings under this policy (automatic compaction on, the
    /// effective reserve, keep-recent).
    pub fn cut_settings(&self) -> sessionlog_context::cut::Settings {
        sessionlog_context::cut::Settings {
            enabled: true,
            reserve_tokens: self.effective_reserve(),
            keep_recent_tokens: self.keep_recent_tokens,
        }
    }

    /// Context tokens above which the trigger fires.
    pub fn threshold(&self) -> f64 {
        match self.trigger {
            Trigger::Threshold => self.context_window as f64 - self.effective_reserve() as f64,
            Trigger::Ratio(r) => r * self.context_window as f64,
        }
    }

    /// True when `context_tokens` fires the trigger (strictly above the threshold).
    pub fn should_compact(&self, context_tokens: f64) -> bool {
        context_tokens > self.threshold()
    }

    /// OpenClaw's adaptive chunk ratio for messages averaging `avg_tokens`.
    pub fn chunk_ratio_for(&self, avg_tokens: f64) -> f64 {
        if let Some(r) = self.chunk_ratio {
            return r;
        }
        let avg_ratio = avg_tokens * SAFETY_MARGIN / self.context_window.max(1) as f64;
        if avg_ratio > 0.1 {
            MIN_CHUNK_RATIO.max(BASE_CHUNK_RATIO - (2.0 * avg_ratio).min(0.25))
        } else {
            BASE_CHUNK_RATIO
        }
    }

    /// The context size at which the memory flush runs (0 = never), as
    /// OpenClaw 2026.9's `buildMemoryFlushPlan` resolves it: the window `w`
    /// (an unknown window, 0, is taken as OpenClaw's 200,000); the flush's
    /// reserve is OpenClaw's *default* floor — the configured
    /// `reserveTokensFloor`, `reserveTokens` and `maxReserveShare` are not
    /// read — capped at a quarter of the window,
    /// `r = min(20000, ⌊w / 4⌋)`; the soft threshold is capped at half of
    /// what is left, `s = min(soft, ⌊(w − r) / 2⌋)`; the flush runs at
    /// `w − r − s`. `None` without a flush.
    pub fn memory_flush_threshold(&self) -> Option<u64> {
        let flush = self.memory_flush?;
        let window = if self.context_window > 0 { self.context_window } else { UNKNOWN_WINDOW_TOKENS };
        let reserve =
            DEFAULT_RESERVE_FLOOR.min((window as f64 * MAX_COMPACTION_RESERVE_RATIO).floor() as u64);
        let soft = flush.soft_threshold_tokens.min(window.saturating_sub(reserve) / 2);
        Some(window.saturating_sub(reserve).saturating_sub(soft))
    }

    /// Whether a silent memory-flush turn is due on the token count (OpenClaw
    /// §6): enabled, tokens at or above [`Policy::memory_flush_threshold`]
    /// (which must be above 0), once per compaction cycle.
    pub fn memory_flush_due(
        &self,
        tokens: f64,
        compaction_count: u32,
        flushed_at_count: Option<u32>,
    ) -> bool {
        let Some(threshold) = self.memory_flush_threshold() else { return false };
        threshold > 0 && tokens >= threshold as f64 && flushed_at_count != Some(compaction_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openclaw_reserve_is_2026_9s_capped_at_a_quarter_of_the_window() {
        // By hand from OpenClaw 2026.9.6: applyAgentCompactionSettingsFromConfig
        // (src/agents/agent-settings.ts) asks for max(Pi's reserveTokens 16384,
        // DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR 20000) and
        // resolveEffectiveCompactionReserveTokens
        // (src/agents/agent-compaction-constants.ts) caps it at
        // ⌊window × MAX_COMPACTION_RESERVE_RATIO 0.25⌋; an unknown window is
        // not capped. The configured reserveTokensFloor is not read there.
        let at = |window: u64| Policy { context_window: window, ..Policy::openclaw() };
        let reserve = |window: u64| at(window).effective_reserve();
        assert_eq!(reserve(200_000), 20_000, "min(20000, 50000)");
        assert_eq!(at(200_000).threshold(), 180_000.0);
        assert_eq!(reserve(1_000_000), 20_000, "min(20000, 250000)");
        assert_eq!(reserve(80_000), 20_000, "min(20000, 20000): the floor binds from 80k up");
        assert_eq!(reserve(79_999), 19_999, "⌊79999 / 4⌋");
        // 30000: min(20000, 7500) — compaction above 22500, not 10000.
        assert_eq!(reserve(30_000), 7_500);
        assert_eq!(at(30_000).threshold(), 22_500.0);
        assert!(!at(30_000).should_compact(22_500.0) && at(30_000).should_compact(22_501.0));
        assert_eq!(reserve(16_384), 4_096, "⌊16384 / 4⌋");
        assert_eq!(reserve(1), 0, "⌊1 / 4⌋");
        assert_eq!(reserve(0), 20_000, "an unknown window: max(16384, 20000), uncapped");
        // A larger reserveTokens is capped too: min(max(60000, 20000), 50000).
        assert_eq!(Policy { reserve_tokens: 60_000, ..at(200_000) }.effective_reserve(), 50_000);
        // A configured floor (which OpenClaw 2026.9 refuses in its config)
        // takes the default's place under the same cap.
        let floor = |window: u64, floor: u64, reserve: u64| {
            Policy { reserve_tokens_floor: floor, reserve_tokens: reserve, ..at(window) }.effective_reserve()
        };
        assert_eq!(floor(30_000, 0, 2_048), 2_048, "min(max(2048, 0), 7500)");
        assert_eq!(floor(4_000, 0, 2_048), 1_000, "min(2048, ⌊4000 / 4⌋)");
        assert_eq!(floor(200_000, 50_000, 16_384), 50_000, "min(50000, 50000)");
        assert_eq!(floor(100_000, 50_000, 16_384), 25_000, "min(50000, 25000)");
        assert_eq!(floor(200_000, 0, 16_384), 16_384, "min(max(16384, 0), 50000)");
        // The memory flush's reserve stays min(20000, ⌊w/4⌋): at 30000 it
        // runs at 30000 − 7500 − 4000, before compaction at 22500.
        assert_eq!(at(30_000).memory_flush_threshold(), Some(18_500));
        assert_eq!(at(200_000).memory_flush_threshold(), Some(176_000));
    }

    #[test]
    fn max_reserve_share_0_is_the_older_floor_rule_and_policies_choose() {
        let older =
            |window: u64| Policy { context_window: window, max_reserve_share: 0.0, ..Policy::openclaw() };
        // Spec compaction §2.1: floor min(20000, 30000 − 8000) = 20000 -> 20000.
        assert_eq!(older(30_000).effective_reserve(), 20_000);
        assert_eq!(older(30_000).threshold(), 10_000.0);
        assert_eq!(older(200_000).effective_reserve(), 20_000);
        let file: Policy = serde_json::from_str(r#"{"maxReserveShare": 0.25}"#).unwrap();
        assert_eq!((file.max_reserve_share, file.effective_reserve()), (0.25, 16_384), "Pi's fields, capped");
        let o: PolicyOverrides =
            serde_json::from_str(r#"{"maxReserveShare": 0, "contextWindow": 30000}"#).unwrap();
        assert_eq!(o.apply(Policy::openclaw()).effective_reserve(), 20_000);
        let o: PolicyOverrides = serde_json::from_str(r#"{"contextWindow": 30000}"#).unwrap();
        assert_eq!(o.apply(Policy::openclaw()).effective_reserve(), 7_500);
        // A share outside [0, 1] or not a number is refused, naming the key.
        for bad in ["1.5", "-0.5", "2.0"] {
            let text = format!(r#"{{"maxReserveShare": {bad}}}"#);
            let err = serde_json::from_str::<Policy>(&text).unwrap_err().to_string();
            assert!(err.contains("maxReserveShare must be a number from 0 to 1"), "{bad}: {err}");
            let err = serde_json::from_str::<PolicyOverrides>(&text).unwrap_err().to_string();
            assert!(err.contains("maxReserveShare must be a number from 0 to 1"), "{bad}: {err}");
        }
        // TOML's nan and inf (JSON has neither) reach the same check.
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let d = serde::de::value::F64Deserializer::<serde::de::value::Error>::new(bad);
            assert!(reserve_share(d).unwrap_err().to_string().contains("maxReserveShare"), "{bad}");
        }
        for good in ["0", "0.0", "0.25", "1", "1.0"] {
            let text = format!(r#"{{"maxReserveShare": {good}}}"#);
            assert!(serde_json::from_str::<Policy>(&text).is_ok(), "{good}");
            assert!(serde_json::from_str::<PolicyOverrides>(&text).is_ok(), "{good}");
        }
        // Only a policy with a cap writes the field.
        let json = serde_json::to_value(Policy::pi()).unwrap();
        assert!(json.get("maxReserveShare").is_none(), "{json}");
        assert_eq!(serde_json::to_value(Policy::openclaw()).unwrap()["maxReserveShare"], 0.25);
    }

    #[test]
    fn reserve_floor_follows_the_spec_examples() {
        // compaction.md §2.1 (the rule before OpenClaw 2026.9's cap,
        // `maxReserveShare = 0`): 200k window -> 20000.
        let older = Policy { max_reserve_share: 0.0, ..Policy::openclaw() };
        assert_eq!(older.effective_reserve(), 20_000);
        // 16384 window, nothing configured: floor 8384, but Pi's 16384 wins.
        let small = Policy { context_window: 16_384, ..older };
        assert_eq!(small.effective_reserve(), 16_384);
        // ... with reserveTokens 2048 -> 8384.
        assert_eq!(Policy { reserve_tokens: 2_048, ..small.clone() }.effective_reserve(), 8_384);
        // ... with floor 0 and reserveTokens 2048 -> 2048.
        assert_eq!(
            Policy { reserve_tokens: 2_048, reserve_tokens_floor: 0, ..small }.effective_reserve(),
            2_048
        );
        assert_eq!(Policy::pi().effective_reserve(), 16_384);
    }

    #[test]
    fn adaptive_chunk_ratio_matches_the_worked_example() {
        // window 200k, average 20k tokens: avgRatio .12 -> ratio .16.
        let r = Policy::openclaw().chunk_ratio_for(20_000.0);
        assert!((r - 0.16).abs() < 1e-12, "{r}");
        assert_eq!(Policy::openclaw().chunk_ratio_for(1_000.0), 0.4);
        // 0.4 - 0.25 in floating point (as in JavaScript) is 0.15000000000000002.
        assert!((Policy::openclaw().chunk_ratio_for(90_000.0) - 0.15).abs() < 1e-12);
    }

    #[test]
    fn memory_flush_runs_once_per_cycle_at_the_soft_threshold() {
        let p = Policy::openclaw();
        // 200k window -> flush at >= 176000 tokens.
        assert!(!p.memory_flush_due(175_999.0, 0, None));
        assert!(p.memory_flush_due(176_000.0, 0, None));
        assert!(!p.memory_flush_due(190_000.0, 0, Some(0)));
        assert!(p.memory_flush_due(190_000.0, 1, Some(0)));
        assert!(!Policy::pi().memory_flush_due(199_000.0, 0, None));
    }

    #[test]
    fn the_flush_threshold_takes_openclaw_2026_9_caps() {
        // Computed by hand from OpenClaw 2026.9.6's buildMemoryFlushPlan and
        // the flush check in agent-runner-memory: the reserve is the default
        // floor 20000 (the configured floor is not read) capped at ⌊window/4⌋,
        // soft ≤ ⌊(window − reserve)/2⌋, an unknown window is 200000.
        let at = |window: u64, floor: u64, soft: u64| {
            let p = Policy {
                context_window: window,
                reserve_tokens_floor: floor,
                memory_flush: Some(MemoryFlush { soft_threshold_tokens: soft, ..MemoryFlush::OPENCLAW }),
                ..Policy::openclaw()
            };
            p.memory_flush_threshold().unwrap()
        };
        // 200k: neither cap binds: 200000 − 20000 − 4000.
        assert_eq!(at(200_000, 20_000, 4_000), 176_000);
        // The configured floor does not move it.
        assert_eq!(at(200_000, 0, 4_000), 176_000);
        assert_eq!(at(200_000, 50_000, 4_000), 176_000);
        // 80000: ⌊80000/4⌋ = 20000 = the floor: 56000.
        assert_eq!(at(80_000, 20_000, 4_000), 56_000);
        // 30000: reserve min(20000, 7500) = 7500; soft 4000 ≤ 11250: 18500.
        assert_eq!(at(30_000, 20_000, 4_000), 18_500);
        assert_eq!(at(30_000, 0, 4_000), 18_500);
        // 30000 with soft 20000: soft min(20000, ⌊22500/2⌋ = 11250): 11250.
        assert_eq!(at(30_000, 0, 20_000), 11_250);
        // 100000 with soft 50000: reserve 20000, soft min(50000, 40000): 40000.
        assert_eq!(at(100_000, 20_000, 50_000), 40_000);
        // 100001: soft min(50000, ⌊80001/2⌋ = 40000): 40001.
        assert_eq!(at(100_001, 20_000, 50_000), 40_001);
        // A window of 1: reserve 0, soft 0: 1.
        assert_eq!(at(1, 20_000, 4_000), 1);
        // An unknown window (0) is 200000: 176000.
        assert_eq!(at(0, 20_000, 4_000), 176_000);
        let zero = Policy { context_window: 0, ..Policy::openclaw() };
        assert!(!zero.memory_flush_due(175_999.0, 0, None));
        assert!(zero.memory_flush_due(176_000.0, 0, None));
        // Exactly at the threshold runs; one token below does not.
        let p = Policy { context_window: 30_000, ..Policy::openclaw() };
        assert!(!p.memory_flush_due(18_499.0, 0, None));
        assert!(p.memory_flush_due(18_500.0, 0, None));
        assert_eq!(Policy::pi().memory_flush_threshold(), None);
    }

    #[test]
    fn the_size_trigger_runs_at_its_limit_once_per_cycle_and_0_is_off() {
        let f = MemoryFlush::OPENCLAW;
        assert_eq!(f.force_flush_transcript_bytes, ByteSize(2_097_152));
        assert!(!f.forced_by_size(2_097_151, 0, None));
        assert!(f.forced_by_size(2_097_152, 0, None));
        assert!(!f.forced_by_size(3_000_000, 2, Some(2)), "flushed in this cycle already");
        assert!(f.forced_by_size(3_000_000, 3, Some(2)));
        let off = MemoryFlush { force_flush_transcript_bytes: ByteSize(0), ..f };
        assert!(!off.forced_by_size(u64::MAX, 0, None));
    }

    #[test]
    fn byte_sizes_read_as_openclaw_config_writes_them() {
        let parse = |s: &str| s.parse::<ByteSize>().map(|b| b.0);
        assert_eq!(parse("2mb"), Ok(2 * 1024 * 1024));
        assert_eq!(parse(" 2MB "), Ok(2 * 1024 * 1024));
        assert_eq!(parse("512kb"), Ok(512 * 1024));
        assert_eq!(parse("1.5m"), Ok(1_572_864));
        assert_eq!(parse("100"), Ok(100));
        assert_eq!(parse("0"), Ok(0));
        assert!(parse("2 parsecs").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("").is_err());
        let o: PolicyOverrides = serde_json::from_str(
            r#"{"memoryFlush": {"softThresholdTokens": 9000, "forceFlushTranscriptBytes": "3mb"}}"#,
        )
        .unwrap();
        let p = o.apply(Policy::openclaw());
        assert_eq!(
            p.memory_flush,
            Some(MemoryFlush {
                soft_threshold_tokens: 9_000,
                force_flush_transcript_bytes: ByteSize(3 << 20)
            })
        );
        let off: PolicyOverrides = serde_json::from_str(r#"{"memoryFlush": {"enabled": false}}"#).unwrap();
        assert_eq!(off.apply(Policy::openclaw()).memory_flush, None);
        let on: PolicyOverrides =
            serde_json::from_str(r#"{"memoryFlush": {"forceFlushTranscriptBytes": 0}}"#).unwrap();
        assert_eq!(
            on.apply(Policy::pi()).memory_flush,
            Some(MemoryFlush { force_flush_transcript_bytes: ByteSize(0), ..MemoryFlush::OPENCLAW })
        );
        assert!(serde_json::from_str::<PolicyOverrides>(
            r#"{"memoryFlush": {"forceFlushTranscriptBytes": "2xb"}}"#
        )
        .is_err());
    }

    #[test]
    fn the_flush_takes_openclaws_model_key_and_refuses_its_retired_prompts() {
        let o: PolicyOverrides =
            serde_json::from_str(r#"{"memoryFlush": {"model": "openai/gpt-5-mini"}}"#).unwrap();
        let flush = o.memory_flush.as_ref().unwrap();
        assert_eq!(flush.model.as_deref(), Some("openai/gpt-5-mini"));
        // The model names no policy setting: the flush itself is unchanged.
        assert_eq!(o.apply(Policy::openclaw()), Policy::openclaw());
        for key in ["prompt", "systemPrompt"] {
            let text = format!(r#"{{"memoryFlush": {{"{key}": "Write notes."}}}}"#);
            let err = serde_json::from_str::<PolicyOverrides>(&text).unwrap_err().to_string();
            assert!(err.contains("OpenClaw 2026.9 no longer takes a custom memory-flush prompt"), "{err}");
        }
        let err = serde_json::from_str::<PolicyOverrides>(r#"{"memoryFlush": {"promt": "x"}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `promt`"), "{err}");
    }

    #[test]
    fn claude_code_compacts_at_83_5_percent_and_codex_at_90() {
        // #31806: 200000 − min(64000, 20000) − 13000 = 167000 = 83.5% of the window.
        let claude = Policy::claude_code();
        assert_eq!(claude.threshold(), 167_000.0);
        assert_eq!(claude.threshold() / claude.context_window as f64, 0.835);
        // A model with 8192 output tokens reserves 8192 + 13000.
        assert_eq!(claude_code_reserve(8_192), 21_192);
        // codex-rs: 272000 * 9 / 10 = 244800.
        assert_eq!(Policy::codex().threshold(), 244_800.0);
        assert!(!Policy::codex().should_compact(244_800.0) && Policy::codex().should_compact(244_801.0));
        for name in PRESETS {
            assert!(Policy::preset(name).is_some(), "{name}");
        }
        assert_eq!(Policy::preset("claude"), None);
    }

    #[test]
    fn presets_name_their_pi_rules_and_policy_files_choose() {
        assert_eq!(Policy::openclaw().pi_rules, PiRules::V0_58);
        assert_eq!(Policy::pi().pi_rules, PiRules::V1_6);
        let file: Policy = serde_json::from_str(r#"{"piRules": "0.58"}"#).unwrap();
        assert_eq!(file.pi_rules, PiRules::V0_58);
        let default: Policy = serde_json::from_str(r#"{"name": "x"}"#).unwrap();
        assert_eq!(default.pi_rules, PiRules::V1_6, "fields left out take Pi's defaults");
        let err = serde_json::from_str::<Policy>(r#"{"piRules": "2.0"}"#).unwrap_err().to_string();
        assert!(err.contains("unknown Pi rules `2.0` (0.58, 1.6)"), "{err}");
    }

    #[test]
    fn triggers_parse_and_fire_strictly_above() {
        assert_eq!("ratio:0.9".parse::<Trigger>(), Ok(Trigger::Ratio(0.9)));
        assert!("ratio:1.5".parse::<Trigger>().is_err());
        let p = Policy { trigger: Trigger::Ratio(0.8), ..Policy::openclaw() };
        assert!(!p.should_compact(160_000.0));
        assert!(p.should_compact(160_001.0));
        assert!(!Policy::openclaw().should_compact(180_000.0));
        assert!(Policy::openclaw().should_compact(180_001.0));
    }
}

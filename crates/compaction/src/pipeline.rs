//! The summarisation pipeline for one compaction (OpenClaw's safeguard path,
//! spec compaction §3.3–§3.8), over a Pi preparation:
//!
//! 1. no real conversation → the previous summary or a skeleton (never a cancel);
//! 2. history-share pruning: the oldest part beyond `max_history_share` of the
//!    window is summarised first and becomes the previous summary;
//! 3. staged summarisation: split by token share into `parts`, summarise each
//!    in chunks of at most `window × ratio − 4096` tokens, merge;
//! 4. each summarisation falls back in three levels: all messages; without
//!    oversized ones (with a note per omission); a statistical description
//!    that is never empty;
//! 5. a split turn's prefix is summarised separately and appended;
//! 6. file lists, then the identifier ledger, are appended.
//!
//! Tool calls and their results are one unit ([`groups`]) in every chunk,
//! split and prune. Every summariser exchange is recorded in the outcome.

use std::collections::BTreeSet;

/// Sets of identifier texts, hashed with foldhash (their order is never read).
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use memchr::memmem;
use serde::Serialize;
use serde_json::{json, Map, Value};
use sessionlog_context::cut::{format_file_operations, Preparation};
use sessionlog_context::AgentMessage;
use sessionlog_events::json::js_trim;
use sessionlog_events::write::{CompactionFields, Head};
use sessionlog_events::{Entry, LineError, Role};
use sessionlog_tokens::TokenCounter;

use crate::facts::Facts;
use crate::ids::{IdClass, Identifier, SecretPolicy};
use crate::ledger::{ledger_of, ledger_of_entry, Ledger, LedgerDelta};
use crate::policy::{Policy, SAFETY_MARGIN, SUMMARIZATION_OVERHEAD_TOKENS};
use crate::safeguard::{
    append_section, preserved_section, split_preserved, structured_fallback, tool_failures_section,
};
use crate::summarizer::{RequestKind, Summarizer, SummaryMessage, SummaryRequest};

/// Attempts per summariser call before falling back (OpenClaw retries 3 times).
pub const ATTEMPTS: usize = 3;

/// Instructions sent with every request (our wording of OpenClaw's structure
/// and identifier policy).
pub const INSTRUCTIONS: &str = "Summarise the conversation above as a factual checkpoint another model will continue from. \
Use these headings in order: ## Decisions, ## Open TODOs, ## Constraints/Rules, ## Pending user asks, ## Exact identifiers. \
Copy every opaque identifier verbatim (UUIDs, hashes, ids, host names, IPs, ports, URLs, file names); never shorten or reconstruct one. \
Do not drop a user request that is still unresolved.";

/// Added to merge requests: what a merged summary must keep.
pub const MERGE_INSTRUCTIONS: &str = "Merge these partial summaries into one. It must preserve: active tasks and their status \
(in progress, blocked, pending), progress counts, the latest user request and what was being done about it, decisions and their \
reasons, open questions, constraints and promised follow-ups. Weight the most recent part most.";

/// Added to split-turn prefix requests.
pub const TURN_PREFIX_INSTRUCTIONS: &str =
    "This is the beginning of a turn too large to keep; its recent part is retained. \
Summarise the original request, the early progress, and what the retained part needs to make sense.";

/// One summariser call as recorded data (so a replay never needs the model).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    /// What was asked.
    #[serde(flatten)]
    pub kind: RequestKind,
    /// Messages in the request.
    pub messages: usize,
    /// Characters of the serialised conversation.
    pub conversation_chars: usize,
    /// Whether a previous summary was passed.
    pub with_previous_summary: bool,
    /// The answer, or the failure.
    pub response: Result<String, String>,
}

/// How far the fallback chain went (the worst level any call reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FallbackLevel {
    /// Nothing to summarise: previous summary or skeleton.
    NoConversation,
    /// Level 1: the full history was summarised.
    Full,
    /// Level 2: oversized messages were left out, with a note each (or a merge failed and partials were joined).
    SkippedOversized,
    /// Level 3: a statistical description replaced the summary.
    Statistical,
}

/// The result of one compaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The summary text written to the entry (file lists and ledger included).
    pub summary: String,
    /// First entry kept verbatim.
    pub first_kept_entry_id: String,
    /// Context tokens before compacting.
    pub tokens_before: f64,
    /// Files only read, sorted.
    pub read_files: Vec<String>,
    /// Files written or edited, sorted.
    pub modified_files: Vec<String>,
    /// What this compaction changes in the identifier ledger it carries
    /// forward (its `details`): the ledger is every identifier of the history
    /// before the first kept entry that the summary text lacks, in order of
    /// last mention, and secrets as references (secret policy `reference`);
    /// [`crate::ledger_of`] or [`Ledger::apply`] resolves it.
    #[serde(flatten)]
    pub ledger: LedgerDelta,
    /// How many identifiers the resolved ledger holds.
    pub ledger_identifiers: usize,
    /// How many of the ledger's last identifiers the visible identifier
    /// section at the top of the summary shows.
    pub ledger_visible: usize,
    /// How far the fallback chain went.
    pub fallback: FallbackLevel,
    /// Messages dropped from the summarised history by history-share pruning.
    pub pruned_messages: usize,
    /// Every summariser call.
    pub exchanges: Vec<Exchange>,
}

impl Outcome {
    /// The `details` object of the compaction entry (Pi's lists plus ours).
    pub fn details(&self) -> Value {
        let mut details = Map::new();
        details.insert("readFiles".to_owned(), json!(self.read_files));
        details.insert("modifiedFiles".to_owned(), json!(self.modified_files));
        self.ledger.write_details(&mut details);
        details.insert("fallback".to_owned(), json!(self.fallback));
        Value::Object(details)
    }

    /// The `compaction` entry Pi can read, in Pi's key order (with Pi 1.6's
    /// `systemMessage` when one is given).
    pub fn to_entry(&self, head: &Head<'_>, system_message: Option<Value>) -> Result<Entry, LineError> {
        if system_message.is_some() {
            let fields = CompactionFields {
                summary: &self.summary,
                first_kept_entry_id: &self.first_kept_entry_id,
                tokens_before: self.tokens_before,
                details: self.details(),
                from_hook: false,
                system_message,
            };
            return sessionlog_events::write::compaction(head, &fields);
        }
        // The same line `write::compaction` writes with `details()`, in the
        // same key order, serialised straight from the outcome (no `Value`
        // tree, no copy of the ledger) and read back once.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Details<'a> {
            read_files: &'a [String],
            modified_files: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            ledger_base: Option<&'a str>,
            ledger_added: &'a [String],
            ledger_dropped: &'a [String],
            secret_refs_added: &'a [String],
            fallback: FallbackLevel,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Line<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            id: &'a str,
            parent_id: Option<&'a str>,
            timestamp: &'a str,
            summary: &'a str,
            first_kept_entry_id: &'a str,
            tokens_before: Value,
            details: Details<'a>,
            from_hook: bool,
        }
        let line = Line {
            kind: "compaction",
            id: head.id,
            parent_id: head.parent_id,
            timestamp: head.timestamp,
            summary: &self.summary,
            first_kept_entry_id: &self.first_kept_entry_id,
            tokens_before: sessionlog_events::json::js_number(self.tokens_before),
            details: Details {
                read_files: &self.read_files,
                modified_files: &self.modified_files,
                ledger_base: self.ledger.base.as_deref(),
                ledger_added: &self.ledger.added,
                ledger_dropped: &self.ledger.dropped,
                secret_refs_added: &self.ledger.secret_refs_added,
                fallback: self.fallback,
            },
            from_hook: false,
        };
        let mut text = Vec::with_capacity(self.summary.len() + 512);
        let mut ser = serde_json::Serializer::with_formatter(&mut text, sessionlog_events::json::JsFormatter);
        let invalid = |reason: String| LineError::Json { column: 0, reason };
        line.serialize(&mut ser).map_err(|e| invalid(e.to_string()))?;
        let text = String::from_utf8(text).map_err(|e| invalid(e.to_string()))?;
        Entry::parse_owned(text.into_boxed_str())
    }
}

/// A run of messages that must stay together: a user (or other) message
/// alone, or an assistant message with the tool results that answer it.
pub fn groups<'m, 'a>(messages: &'m [AgentMessage<'a>]) -> Vec<&'m [AgentMessage<'a>]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let mut end = i + 1;
        if messages[i].message.role() == Role::Assistant {
            // Whether the assistant message calls `id` (its blocks read in
            // place: a message makes a few calls).
            let calls = |id: &str| {
                messages[i]
                    .message
                    .blocks()
                    .iter()
                    .any(|b| b.kind.as_deref() == Some("toolCall") && b.id.as_deref() == Some(id))
            };
            while end < messages.len()
                && messages[end].message.role() == Role::ToolResult
                && messages[end].message.tool_call_id.as_deref().is_some_and(calls)
            {
                end += 1;
            }
        }
        out.push(&messages[i..end]);
        i = end;
    }
    out
}

fn summary_messages(messages: &[AgentMessage<'_>], facts: &Facts<'_>) -> Vec<SummaryMessage> {
    messages
        .iter()
        .map(|m| SummaryMessage {
            entry_id: m.entry.id.clone(),
            role: m.message.role.as_deref().unwrap_or_default().to_owned(),
            text: facts.text_shared(m),
        })
        .collect()
}

struct Run<'s, 'c> {
    policy: &'s Policy,
    summarizer: &'s mut dyn Summarizer,
    counter: &'c dyn TokenCounter,
    facts: &'c Facts<'c>,
    max_chunk_tokens: u64,
    /// Whether the summariser reads the serialised conversation
    /// ([`Summarizer::reads_conversation`]); else only its characters are counted.
    reads: bool,
    exchanges: Vec<Exchange>,
    worst: FallbackLevel,
}

impl Run<'_, '_> {
    fn est(&self, messages: &[AgentMessage<'_>]) -> u64 {
        messages.iter().map(|m| self.counter.message_tokens(&m.message)).sum()
    }

    fn oversized(&self, m: &AgentMessage<'_>) -> bool {
        self.counter.message_tokens(&m.message) as f64 * SAFETY_MARGIN
            > 0.5 * self.policy.context_window as f64
    }

    /// Asks `request`, whose conversation has `chars` characters (written
    /// in it or not).
    fn ask(&mut self, request: SummaryRequest, chars: usize) -> Option<String> {
        for _ in 0..ATTEMPTS {
            let response = self.summarizer.summarize(&request);
            let ok = matches!(&response, Ok(text) if !text.trim().is_empty());
            self.exchanges.push(Exchange {
                kind: request.kind,
                messages: request.messages.len(),
                conversation_chars: chars,
                with_previous_summary: request.previous_summary.is_some(),
                response: response.clone().map_err(|e| e.0),
            });
            if ok {
                return response.ok();
            }
        }
        None
    }

    /// The request for `messages`, and the characters of its conversation.
    fn request(
        &self,
        kind: RequestKind,
        messages: &[AgentMessage<'_>],
        previous: Option<String>,
        extra: &str,
    ) -> (SummaryRequest, usize) {
        let (conversation, chars) = if self.reads {
            let conversation = self.facts.conversation(messages);
            let chars = conversation.chars().count();
            (conversation, chars)
        } else {
            (String::new(), self.facts.conversation_chars(messages))
        };
        let instructions =
            if extra.is_empty() { INSTRUCTIONS.to_owned() } else { format!("{INSTRUCTIONS}\n\n{extra}") };
        // OpenClaw's generateSummary: ⌊0.8 × reserve⌋, ⌊0.5 × reserve⌋ for a
        // turn prefix, of the reserve in force (capped, as OpenClaw writes it
        // into Pi's settings).
        let share = if kind == RequestKind::TurnPrefix { 0.5 } else { 0.8 };
        let request = SummaryRequest {
            kind,
            messages: summary_messages(messages, self.facts),
            conversation,
            previous_summary: previous,
            instructions,
            max_tokens: (share * self.policy.effective_reserve() as f64) as u64,
        };
        (request, chars)
    }

    /// Chunks of at most `max_chunk_tokens / 1.2`, never splitting a group.
    fn chunks<'m, 'a>(&self, messages: &'m [AgentMessage<'a>]) -> Vec<&'m [AgentMessage<'a>]> {
        let effective = ((self.max_chunk_tokens as f64 / SAFETY_MARGIN).floor() as u64).max(1);
        let mut out = Vec::new();
        let (mut start, mut end, mut size) = (0, 0, 0u64);
        for g in groups(messages) {
            let t = self.est(g);
            if end > start && size + t > effective {
                out.push(&messages[start..end]);
                start = end;
                size = 0;
            }
            end += g.len();
            size += t;
        }
        if end > start {
            out.push(&messages[start..end]);
        }
        out
    }

    /// Summarises chunk by chunk, each answer seeding the next.
    fn summarize_chunks(
        &mut self,
        messages: &[AgentMessage<'_>],
        previous: Option<String>,
        kind: RequestKind,
        extra: &str,
    ) -> Option<String> {
        let chunks = self.chunks(messages);
        let count = chunks.len();
        let mut running = previous;
        for (index, chunk) in chunks.into_iter().enumerate() {
            let kind = match kind {
                RequestKind::Chunk { .. } => RequestKind::Chunk { index, count },
                other => other,
            };
            let (request, chars) = self.request(kind, chunk, running.clone(), extra);
            running = Some(self.ask(request, chars)?);
        }
        running
    }

    /// OpenClaw's `summarizeWithFallback`: full, then without oversized
    /// messages, then a statistical description (never empty).
    fn with_fallback(
        &mut self,
        messages: &[AgentMessage<'_>],
        previous: Option<String>,
        kind: RequestKind,
        extra: &str,
    ) -> String {
        if let Some(s) = self.summarize_chunks(messages, previous.clone(), kind, extra) {
            self.worst = self.worst.max(FallbackLevel::Full);
            return s;
        }
        let oversized: Vec<&AgentMessage<'_>> = messages.iter().filter(|m| self.oversized(m)).collect();
        let small: Vec<AgentMessage<'_>> = messages.iter().filter(|m| !self.oversized(m)).cloned().collect();
        if !oversized.is_empty() && !small.is_empty() {
            if let Some(s) = self.summarize_chunks(&small, previous, kind, extra) {
                let notes: Vec<String> = oversized
                    .iter()
                    .map(|m| {
                        let k = (self.counter.message_tokens(&m.message) as f64 / 1000.0).round();
                        format!(
                            "[Large {} (~{k}K tokens) omitted from summary]",
                            m.message.role.as_deref().unwrap_or("message")
                        )
                    })
                    .collect();
                self.worst = self.worst.max(FallbackLevel::SkippedOversized);
                return format!("{s}\n\n{}", notes.join("\n"));
            }
        }
        self.worst = FallbackLevel::Statistical;
        format!(
            "Context contained {} messages ({} oversized). Summary unavailable due to size limits.",
            messages.len(),
            oversized.len()
        )
    }

    /// Splits groups into `parts` runs of about equal token share.
    fn split_by_share<'m, 'a>(
        &self,
        messages: &'m [AgentMessage<'a>],
        parts: usize,
    ) -> Vec<&'m [AgentMessage<'a>]> {
        let total = self.est(messages) as f64;
        let target = total / parts.max(1) as f64;
        let mut out = Vec::new();
        let (mut start, mut end, mut size) = (0, 0, 0.0);
        for g in groups(messages) {
            if end > start && out.len() < parts - 1 && size >= target {
                out.push(&messages[start..end]);
                start = end;
                size = 0.0;
            }
            end += g.len();
            size += self.est(g) as f64;
        }
        if end > start {
            out.push(&messages[start..end]);
        }
        out
    }

    /// OpenClaw's `summarizeInStages`.
    fn in_stages(&mut self, messages: &[AgentMessage<'_>], previous: Option<String>, extra: &str) -> String {
        let first = RequestKind::Chunk { index: 0, count: 1 };
        if messages.is_empty() {
            return previous.unwrap_or_else(|| "No prior history.".to_owned());
        }
        let parts = self.policy.parts.clamp(1, messages.len());
        if parts <= 1 || messages.len() < 4 || self.est(messages) <= self.max_chunk_tokens {
            return self.with_fallback(messages, previous, first, extra);
        }
        let splits = self.split_by_share(messages, parts);
        if splits.len() <= 1 {
            return self.with_fallback(messages, previous, first, extra);
        }
        let partials: Vec<String> =
            splits.iter().map(|s| self.with_fallback(s, None, first, extra)).collect();
        let merge_messages: Vec<SummaryMessage> = partials
            .iter()
            .map(|p| SummaryMessage { entry_id: None, role: "summary".to_owned(), text: p.as_str().into() })
            .collect();
        // OpenClaw labels each partial with its place and time span, since the
        // serialised conversation carries no timestamps.
        let conversation = partials
            .iter()
            .zip(&splits)
            .enumerate()
            .map(|(i, (p, chunk))| format!("[User]: {}\n{p}", merge_label(i, partials.len(), chunk)))
            .collect::<Vec<_>>()
            .join("\n\n");
        let chars = conversation.chars().count();
        let request = SummaryRequest {
            kind: RequestKind::Merge,
            messages: merge_messages,
            conversation: if self.reads { conversation } else { String::new() },
            previous_summary: previous,
            instructions: format!(
                "{INSTRUCTIONS}\n\n{MERGE_INSTRUCTIONS}{}",
                if extra.is_empty() { String::new() } else { format!("\n\n{extra}") }
            ),
            max_tokens: (0.8 * self.policy.effective_reserve() as f64) as u64,
        };
        match self.ask(request, chars) {
            Some(merged) => merged,
            None => {
                // Keeping the partials loses nothing; mark the degradation.
                self.worst = self.worst.max(FallbackLevel::SkippedOversized);
                partials.join("\n\n")
            }
        }
    }

    /// OpenClaw's `pruneHistoryForContextShare`: drops the oldest share while
    /// the history exceeds `window × share`; returns (dropped, kept).
    fn prune<'m, 'a>(
        &self,
        messages: &'m [AgentMessage<'a>],
    ) -> (&'m [AgentMessage<'a>], &'m [AgentMessage<'a>]) {
        let budget =
            ((self.policy.context_window as f64 * self.policy.max_history_share).floor() as u64).max(1);
        let mut from = 0;
        while self.est(&messages[from..]) > budget {
            let splits = self.split_by_share(&messages[from..], 2);
            if splits.len() <= 1 {
                break;
            }
            from += splits[0].len();
        }
        messages.split_at(from)
    }
}

/// OpenClaw's label of partial summary `index` of `count` in a merge
/// request: `[Chunk 1 — oldest messages …]`, `[Chunk i/n …]`, `[Chunk n —
/// most recent messages …]`, each with the UTC span of its messages.
pub fn merge_label(index: usize, count: usize, chunk: &[AgentMessage<'_>]) -> String {
    // ISO-8601 to the minute, `T` as a space: "2026-01-01 10:00".
    let minute = |iso: String| iso.replacen('T', " ", 1).chars().take(16).collect::<String>();
    let range = match span(chunk) {
        Some((a, b)) if a == b => format!(" [{} UTC]", minute(a)),
        Some((a, b)) => format!(" [{} — {} UTC]", minute(a), minute(b)),
        None => String::new(),
    };
    if index == 0 {
        format!("[Chunk 1 — oldest messages{range}]")
    } else if index + 1 == count {
        format!("[Chunk {count} — most recent messages{range}]")
    } else {
        format!("[Chunk {}/{count}{range}]", index + 1)
    }
}

/// The first and last of the ISO times of a chunk's message timestamps
/// (finite, positive, whole milliseconds that have one), in text order.
/// Times from 1970 on print with four-digit years, so their text order is
/// their order as milliseconds: the smallest and the largest millisecond
/// are printed, not every one; only when the largest has no ISO time (beyond
/// year 9999) are all printed and compared.
fn span(chunk: &[AgentMessage<'_>]) -> Option<(String, String)> {
    let ms = || {
        chunk
            .iter()
            .filter_map(|m| m.message.timestamp)
            .filter(|t| t.is_finite() && *t > 0.0)
            .map(|t| t as i64)
    };
    let first = sessionlog_events::write::timestamp(ms().min()?)?;
    match sessionlog_events::write::timestamp(ms().max()?) {
        Some(last) => Some((first, last)),
        None => {
            let last = ms().filter_map(sessionlog_events::write::timestamp).max()?;
            Some((first, last))
        }
    }
}

fn is_conversation(m: &AgentMessage<'_>) -> bool {
    matches!(m.message.role(), Role::User | Role::Assistant | Role::ToolResult)
}

pub use crate::safeguard::SKELETON;

/// Runs the pipeline for one prepared compaction.
pub fn compact(
    prep: &Preparation<'_>,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    custom_instructions: Option<&str>,
) -> Outcome {
    compact_with(prep, policy, summarizer, counter, custom_instructions, &Facts::none())
}

/// [`compact`] reading message texts, identifiers and serialised forms from
/// `facts` (the same outcome, without deriving them again).
pub fn compact_with(
    prep: &Preparation<'_>,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    custom_instructions: Option<&str>,
    facts: &Facts<'_>,
) -> Outcome {
    // Without the path, the previous compaction's ledger is what it holds on its own.
    let carried = prep.previous_summary.map(ledger_of_entry).unwrap_or_default();
    run_pipeline(prep, &[], &carried, policy, summarizer, counter, custom_instructions, facts)
}

/// The messages a cut leaves behind without summarising them: under Pi
/// 0.58's rules the next compaction summarises only what follows the previous
/// compaction entry, so the previous compaction's kept range (its
/// `firstKeptEntryId` up to that entry) leaves the context unsummarised.
/// Empty under Pi 1.6's rules, which summarise that range again.
pub fn left_unsummarized<'a>(
    path: &[&'a Entry],
    prep: &Preparation<'a>,
    rules: sessionlog_events::PiRules,
) -> Vec<AgentMessage<'a>> {
    if rules.is_v1() {
        return Vec::new();
    }
    let Some(previous) = prep.previous_summary else { return Vec::new() };
    let Some(at) = path.iter().rposition(|e| std::ptr::eq(*e, previous)) else { return Vec::new() };
    let sessionlog_events::EntryKind::Compaction(c) = &previous.kind else { return Vec::new() };
    let Some(first_kept) = c.first_kept_entry_id.as_deref() else { return Vec::new() };
    let Some(from) = path[..at].iter().rposition(|e| e.id.as_deref() == Some(first_kept)) else {
        return Vec::new();
    };
    path[from..at].iter().filter_map(|e| sessionlog_context::assemble::context_message(e)).collect()
}

/// [`compact_with`] over the path it was prepared from: identifiers of the
/// messages the cut leaves behind unsummarised ([`left_unsummarized`]) join
/// the ledger too, so the ledger covers the whole history before the first
/// kept entry under either rule set.
pub fn compact_over(
    path: &[&Entry],
    prep: &Preparation<'_>,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    custom_instructions: Option<&str>,
    facts: &Facts<'_>,
) -> Outcome {
    let carried = prep
        .previous_summary
        .and_then(|previous| path.iter().rposition(|e| std::ptr::eq(*e, previous)))
        .map(|at| ledger_of(path, at))
        .unwrap_or_default();
    compact_carrying(path, prep, &carried, policy, summarizer, counter, custom_instructions, facts)
}

/// [`compact_over`] with the previous compaction's ledger already resolved
/// (`carried`, empty when there is none): a caller that keeps the ledger as
/// it goes (a replay) need not walk the chain at every compaction.
#[allow(clippy::too_many_arguments)]
pub fn compact_carrying(
    path: &[&Entry],
    prep: &Preparation<'_>,
    carried: &Ledger,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    custom_instructions: Option<&str>,
    facts: &Facts<'_>,
) -> Outcome {
    let left = left_unsummarized(path, prep, policy.pi_rules);
    run_pipeline(prep, &left, carried, policy, summarizer, counter, custom_instructions, facts)
}

#[allow(clippy::too_many_arguments)]
fn run_pipeline(
    prep: &Preparation<'_>,
    left_behind: &[AgentMessage<'_>],
    carried: &Ledger,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    custom_instructions: Option<&str>,
    facts: &Facts<'_>,
) -> Outcome {
    summarizer.begin(&prep.first_kept_entry_id);
    // The previous summary without its identifier section: its identifiers
    // come back through the carried ledger, and a summary that quoted the
    // section again would nest it at every compaction.
    let previous = prep.previous_summary.and_then(|e| match &e.kind {
        sessionlog_events::EntryKind::Compaction(c) => c.summary.as_deref().map(without_ledger_section),
        _ => None,
    });
    let extra = custom_instructions.map(|c| format!("Additional focus:\n{c}")).unwrap_or_default();
    let all: Vec<AgentMessage<'_>> =
        prep.messages_to_summarize.iter().chain(&prep.turn_prefix_messages).cloned().collect();
    let avg = if all.is_empty() {
        0.0
    } else {
        all.iter().map(|m| counter.message_tokens(&m.message)).sum::<u64>() as f64 / all.len() as f64
    };
    let ratio = policy.chunk_ratio_for(avg);
    let max_chunk_tokens = ((policy.context_window as f64 * ratio).floor() as u64)
        .saturating_sub(SUMMARIZATION_OVERHEAD_TOKENS)
        .max(1);
    let reads = summarizer.reads_conversation();
    let mut run = Run {
        policy,
        summarizer,
        counter,
        facts,
        max_chunk_tokens,
        reads,
        exchanges: Vec::new(),
        worst: FallbackLevel::NoConversation,
    };
    let mut pruned = 0;
    let whole = run.summarizer.whole_summary();
    let mut summary = if let Some(whole) = whole.clone() {
        run.worst = FallbackLevel::Full;
        whole
    } else if !all.iter().any(is_conversation) {
        structured_fallback(previous.as_deref())
    } else {
        // What the requests below read, derived on all cores first.
        if run.reads {
            facts.warm(&all);
        } else {
            facts.warm_counted(&all);
        }
        let mut history: &[AgentMessage<'_>] = &prep.messages_to_summarize;
        let mut previous = previous.clone();
        let summarizable = run.est(&prep.messages_to_summarize) + run.est(&prep.turn_prefix_messages);
        let new_content = (prep.tokens_before - summarizable as f64).max(0.0).floor();
        let max_history = (policy.context_window as f64 * policy.max_history_share * SAFETY_MARGIN).floor();
        if new_content > max_history {
            let (dropped, kept) = run.prune(history);
            if !dropped.is_empty() {
                pruned = dropped.len();
                previous = Some(run.in_stages(dropped, previous, &extra));
                history = kept;
            }
        }
        let (history, preserved) = split_preserved(history, policy.recent_turns_preserve);
        let mut text = if history.is_empty() {
            structured_fallback(previous.as_deref())
        } else {
            run.in_stages(&history, previous, &extra)
        };
        if prep.cut.is_split_turn && !prep.turn_prefix_messages.is_empty() {
            let (request, chars) = run.request(
                RequestKind::TurnPrefix,
                &prep.turn_prefix_messages,
                None,
                TURN_PREFIX_INSTRUCTIONS,
            );
            if let Some(prefix) = run.ask(request, chars) {
                let section = format!("**Turn Context (split turn):**\n\n{prefix}");
                text =
                    if js_trim(&text).is_empty() { section } else { format!("{text}\n\n---\n\n{section}") };
            }
        }
        append_section(text, &preserved_section(&preserved))
    };
    // A recorded summary is replayed as it was written (it has its sections already).
    if policy.tool_failures_section && whole.is_none() {
        summary = append_section(summary, &tool_failures_section(&all));
    }
    let (read_files, modified_files) = prep.file_ops.lists();
    if !summary.contains("<read-files>") && !summary.contains("<modified-files>") {
        summary.push_str(&format_file_operations(&read_files, &modified_files));
    }
    // The text below the identifier section is what may be cut; the section
    // comes first so that no cut reaches it (openclaw#125641 cut it last).
    let visible_max = usize::try_from(policy.ledger_visible_max_chars).unwrap_or(usize::MAX);
    // The section's heading, its "+N older" line and the blank line after it
    // take at most SECTION_OVERHEAD characters beyond its lines.
    let body_max = usize::try_from(policy.summary_max_chars)
        .unwrap_or(usize::MAX)
        .saturating_sub(visible_max.saturating_add(SECTION_OVERHEAD));
    let summary = cap_chars(summary, body_max);
    let range: Vec<AgentMessage<'_>> = left_behind.iter().chain(&all).cloned().collect();
    let mut delta = ledger(&summary, &range, previous.as_deref(), carried, policy.secret_policy, facts);
    delta.base = prep.previous_summary.and_then(|e| e.id.clone());
    let (newest, ledger_identifiers) = carried.newest_after(&delta);
    let (section, ledger_visible) = ledger_section(newest, ledger_identifiers, visible_max);
    let summary = if section.is_empty() { summary } else { format!("{section}\n\n{summary}") };
    Outcome {
        summary,
        first_kept_entry_id: prep.first_kept_entry_id.clone(),
        tokens_before: prep.tokens_before,
        read_files,
        modified_files,
        ledger: delta,
        ledger_identifiers,
        ledger_visible,
        fallback: run.worst,
        pruned_messages: pruned,
        exchanges: run.exchanges,
    }
}

/// Characters of the visible identifier section beyond its lines (heading,
/// the "+N older" line, the blank line after it).
const SECTION_OVERHEAD: usize = 100;

/// The heading of the visible identifier section.
pub const LEDGER_HEADING: &str = "## Identifier ledger";

/// `summary` without a leading identifier section (as [`compact`] writes it).
pub fn without_ledger_section(summary: &str) -> String {
    match summary.strip_prefix(LEDGER_HEADING) {
        Some(rest) => rest.split_once("\n\n").map_or("", |(_, body)| body).to_owned(),
        None => summary.to_owned(),
    }
}

/// `text` cut to `max` characters, a marker saying how many were cut
/// included; unchanged when it fits.
fn cap_chars(text: String, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let marker = |cut: usize| format!("\n\n[{cut} characters cut to fit summaryMaxChars]");
    let keep = max.saturating_sub(marker(count).chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&marker(count - keep));
    out
}

/// The visible identifier section: the most recently mentioned ledger
/// identifiers (`newest` first, `total` in all) whose lines fit in `max`
/// characters (at least one), and how many it shows; empty for an empty
/// ledger.
fn ledger_section<'a>(newest: impl Iterator<Item = &'a str>, total: usize, max: usize) -> (String, usize) {
    if total == 0 || max == 0 {
        return (String::new(), 0);
    }
    // The identifiers shown, newest first; written oldest first into one
    // string (no string per line).
    let mut shown_ids: Vec<&str> = Vec::new();
    let mut used = 0;
    for id in newest {
        if used + id.len() + 3 > max && !shown_ids.is_empty() {
            break;
        }
        used += id.len() + 3;
        shown_ids.push(id);
    }
    let shown = shown_ids.len();
    let more = total - shown;
    let mut out = String::with_capacity(LEDGER_HEADING.len() + used + 64);
    out.push_str(LEDGER_HEADING);
    out.push('\n');
    for (i, id) in shown_ids.iter().rev().enumerate() {
        out.push_str(if i == 0 { "- " } else { "\n- " });
        out.push_str(id);
    }
    if more > 0 {
        out.push_str(&format!("\n(+{more} older identifiers in the compaction's details)"));
    }
    (out, shown)
}

/// Substring tests against one text, many needles: `contains` is
/// `text.contains(needle)`. A needle is searched for (memchr's `memmem`) only
/// when three of its 4-byte windows (first, middle, last) are windows of
/// the text, which a bitset of the text's windows tells; a needle the text
/// holds always passes, so the answer is the plain search's. It remembers
/// no answer: the ledger asks about each distinct identifier once (a secret
/// of the previous summary, rare, once per mention).
struct Haystack<'t> {
    text: &'t [u8],
    windows: Vec<u64>,
}

/// log2 of the bits of [`Haystack`]'s window set.
const WINDOW_BITS: u32 = 18;

impl<'t> Haystack<'t> {
    fn new(text: &'t str) -> Haystack<'t> {
        let text = text.as_bytes();
        let mut windows = vec![0u64; 1 << (WINDOW_BITS - 6)];
        for w in text.windows(4) {
            let bit = Self::bit(w);
            windows[bit / 64] |= 1 << (bit % 64);
        }
        Haystack { text, windows }
    }

    fn bit(window: &[u8]) -> usize {
        let w = u32::from_le_bytes([window[0], window[1], window[2], window[3]]);
        (w.wrapping_mul(0x9E37_79B1) >> (32 - WINDOW_BITS)) as usize
    }

    fn has_window(&self, window: &[u8]) -> bool {
        let bit = Self::bit(window);
        self.windows[bit / 64] & (1 << (bit % 64)) != 0
    }

    fn contains(&self, needle: &str) -> bool {
        let n = needle.as_bytes();
        let maybe = n.len() < 4
            || [0, (n.len() - 4) / 2, n.len() - 4].into_iter().all(|at| self.has_window(&n[at..at + 4]));
        maybe && memmem::find(self.text, n).is_some()
    }
}

/// What this compaction changes in the `carried` ledger (its base left
/// unset): the carried identifiers the summary names as identifiers of its
/// own leave it (the rest stay, so an identifier that only an earlier
/// ledger held survives every later compaction); those of the previous
/// summary's text and of the compacted range that the summary text lacks
/// join it, or move to its end, in order of last mention; secrets per
/// policy, as references the carried ledger lacks.
fn ledger(
    summary: &str,
    range: &[AgentMessage<'_>],
    previous: Option<&str>,
    carried: &Ledger,
    secrets: SecretPolicy,
    facts: &Facts<'_>,
) -> LedgerDelta {
    // Borrowed throughout: a range repeats its identifiers, copies would dominate.
    let previous_ids: Vec<Identifier> = previous.map(|p| facts.text_ids(p)).unwrap_or_default();
    let range_ids: Vec<std::borrow::Cow<'_, [Identifier]>> = range.iter().map(|m| facts.ids(m)).collect();
    let sources = std::iter::once((previous_ids.as_slice(), None))
        .chain(range_ids.iter().zip(range).map(|(ids, m)| (&**ids, m.entry.id.as_deref())));
    let mentions = previous_ids.len() + range_ids.iter().map(|ids| ids.len()).sum::<usize>();
    // Whether the summary text holds each identifier, searched once per
    // distinct identifier: a range names the same ones again and again.
    let in_summary = Haystack::new(summary);
    // Each identifier once, at its last mention: the mentions are walked
    // from the last one back, and each identifier met first is searched
    // for in the summary and kept when the summary lacks it (later
    // mentions of it are passed at one lookup).
    let mut seen: HashSet<&str> = HashSet::with_capacity_and_hasher(mentions, Default::default());
    let mut last_first: Vec<&str> = Vec::new();
    let mut refs: BTreeSet<String> = BTreeSet::new();
    let mut dropped: Vec<String> = Vec::new();
    if !carried.is_empty() {
        // A carried identifier is dropped only when the summary names it as an
        // identifier of its own; a substring search per carried identifier
        // would cost the summary's length times the ledger's at every compaction.
        let mut named: std::collections::HashSet<String> = std::collections::HashSet::new();
        for id in facts.text_ids(summary) {
            if carried.contains(&id.text) && named.insert(id.text.clone()) {
                dropped.push(id.text);
            }
        }
    }
    for (ids, entry) in sources.rev() {
        for id in ids.iter().rev() {
            if id.class == IdClass::Secret && secrets == SecretPolicy::Reference {
                // Referenced by its entry whether or not the summary repeats it,
                // so the reference survives a later summary that drops it; one
                // in the previous summary is referenced already, unless that
                // compaction kept no references (one Pi or OpenClaw recorded).
                match entry {
                    Some(entry) => {
                        refs.insert(format!("secret in entry {entry}"));
                    }
                    None if carried.secret_refs().is_empty() && !in_summary.contains(&id.text) => {
                        refs.insert("secret in entry (previous summary)".to_owned());
                    }
                    None => {}
                }
                continue;
            }
            if seen.insert(&id.text) && !in_summary.contains(&id.text) {
                last_first.push(&id.text);
            }
        }
    }
    let added: Vec<String> = last_first.iter().rev().map(|id| (*id).to_owned()).collect();
    let secret_refs_added = refs.into_iter().filter(|r| !carried.secret_refs().contains(r)).collect();
    LedgerDelta { base: None, added, dropped, secret_refs_added }
}

/// The compaction pipeline behind a context engine's `compact` (the legacy
/// engine delegates here): prepares Pi's cut on the transcript's current path
/// and runs [`compact`].
pub struct PipelineCompactor<'a> {
    /// The session's transcript.
    pub transcript: &'a sessionlog_events::Transcript,
    /// The policy in force.
    pub policy: &'a Policy,
    /// The summariser.
    pub summarizer: &'a mut dyn Summarizer,
    /// The token counter.
    pub counter: &'a dyn TokenCounter,
}

impl sessionlog_context::engine::Compactor for PipelineCompactor<'_> {
    fn compact(
        &mut self,
        request: &sessionlog_context::engine::CompactRequest,
    ) -> Result<sessionlog_context::engine::CompactResult, sessionlog_context::engine::EngineError> {
        use sessionlog_context::engine::{CompactResult, EngineError};
        let failed = |reason: String| EngineError::Failed { engine: "legacy".to_owned(), reason };
        let t = self.transcript;
        let path: Vec<&sessionlog_events::Entry> =
            t.default_path().map_err(|e| failed(e.to_string()))?.into_iter().map(|i| &t.entries[i]).collect();
        let mut policy = self.policy.clone();
        if let Some(budget) = request.token_budget {
            policy.context_window = budget;
        }
        let settings = policy.cut_settings();
        let mut prep =
            match sessionlog_context::cut::prepare_with(&path, &settings, self.counter, policy.pi_rules) {
                Ok(p) => p,
                Err(why) => return Ok(CompactResult::NotCompacted { reason: why.reason().to_owned() }),
            };
        if let Some(observed) = request.current_token_count {
            prep.tokens_before = observed as f64;
        }
        if !request.force && !policy.should_compact(prep.tokens_before) {
            return Ok(CompactResult::NotCompacted { reason: "below_threshold".to_owned() });
        }
        let out = compact_over(
            &path,
            &prep,
            &policy,
            self.summarizer,
            self.counter,
            request.custom_instructions.as_deref(),
            &Facts::none(),
        );
        Ok(CompactResult::Compacted {
            summary: out.summary.clone(),
            first_kept_entry_id: out.first_kept_entry_id.clone(),
            tokens_before: out.tokens_before as u64,
            tokens_after: None,
            details: out.details(),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use sessionlog_context::AgentMessage;
    use sessionlog_events::Entry;

    use super::{ledger_section, merge_label, Haystack};

    /// The visible identifier section, written out by hand: oldest shown
    /// first, `- ` before each, the count of those left out after them; the
    /// newest is shown even when it alone is over `max`.
    #[test]
    fn ledger_section_by_hand() {
        let more = |n: usize| format!("\n(+{n} older identifiers in the compaction's details)");
        let ids = ["c", "bb", "a"];
        assert_eq!(
            ledger_section(ids.into_iter(), 5, 100),
            (format!("## Identifier ledger\n- a\n- bb\n- c{}", more(2)), 3)
        );
        assert_eq!(
            ledger_section(ids.into_iter(), 3, 100),
            ("## Identifier ledger\n- a\n- bb\n- c".to_owned(), 3)
        );
        // "c" takes 1 + 3 of the 8, "bb" 2 + 3 more: 9 > 8.
        assert_eq!(
            ledger_section(ids.into_iter(), 4, 8),
            (format!("## Identifier ledger\n- c{}", more(3)), 1)
        );
        assert_eq!(
            ledger_section(["toolong"].into_iter(), 1, 2),
            ("## Identifier ledger\n- toolong".to_owned(), 1)
        );
        // No identifier to show: the heading's line is still ended.
        assert_eq!(ledger_section([].into_iter(), 3, 100), (format!("## Identifier ledger\n{}", more(3)), 0));
        assert_eq!(ledger_section(ids.into_iter(), 0, 100), (String::new(), 0));
        assert_eq!(ledger_section(ids.into_iter(), 3, 0), (String::new(), 0));
    }

    /// `merge_label` as first written: every timestamp printed, the first
    /// and last text kept (the reference for the span's shortcut).
    fn reference_label(index: usize, count: usize, chunk: &[AgentMessage<'_>]) -> String {
        let stamps = chunk
            .iter()
            .filter_map(|m| m.message.timestamp)
            .filter(|t| t.is_finite() && *t > 0.0)
            .filter_map(|t| sessionlog_events::write::timestamp(t as i64));
        let minute = |iso: String| iso.replacen('T', " ", 1).chars().take(16).collect::<String>();
        let (mut first, mut last): (Option<String>, Option<String>) = (None, None);
        for s in stamps {
            if first.as_ref().is_none_or(|f| s < *f) {
                first = Some(s.clone());
            }
            if last.as_ref().is_none_or(|l| s > *l) {
                last = Some(s);
            }
        }
        let range = match (first, last) {
            (Some(a), Some(b)) if a == b => format!(" [{} UTC]", minute(a)),
            (Some(a), Some(b)) => format!(" [{} — {} UTC]", minute(a), minute(b)),
            _ => String::new(),
        };
        if index == 0 {
            format!("[Chunk 1 — oldest messages{range}]")
        } else if index + 1 == count {
            format!("[Chunk {count} — most recent messages{range}]")
        } else {
            format!("[Chunk {}/{count}{range}]", index + 1)
        }
    }

    /// Message timestamps of every kind: ordinary milliseconds, fractions,
    /// the edges of year 9999, beyond it, zero, negative, not finite, none.
    fn stamp() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            4 => (1_600_000_000_000i64..1_800_000_000_000).prop_map(|t| Some(t.to_string())),
            1 => (0.0f64..3.0).prop_map(|t| Some(format!("{t}"))),
            1 => (-2i64..3).prop_map(|d| Some((253_402_300_799_999 + d).to_string())),
            1 => prop::sample::select(vec!["0", "-5", "1e300", "-1e300", "9.3e18", "\"late\"", "null"])
                .prop_map(|t| Some(t.to_owned())),
            1 => Just(None),
        ]
    }

    /// `ledger` as first written, with plain substring tests, as the
    /// reference: every mention in order, then each identifier kept at its
    /// last mention.
    fn reference_ledger(
        summary: &str,
        range: &[AgentMessage<'_>],
        previous: Option<&str>,
        carried: &crate::Ledger,
        secrets: crate::ids::SecretPolicy,
    ) -> crate::LedgerDelta {
        use crate::ids::{extract, IdClass, SecretPolicy};
        use std::collections::{BTreeSet, HashMap, HashSet};
        let previous_ids = previous.map(extract).unwrap_or_default();
        let range_ids: Vec<Vec<crate::ids::Identifier>> = range.iter().map(crate::facts::ids_of).collect();
        let sources = std::iter::once((previous_ids.as_slice(), None))
            .chain(range_ids.iter().zip(range).map(|(ids, m)| (ids.as_slice(), m.entry.id.as_deref())));
        let mut order: Vec<&str> = Vec::new();
        let mut last_seen: HashMap<&str, usize> = HashMap::new();
        let mut refs: BTreeSet<String> = BTreeSet::new();
        let mut dropped: Vec<String> = Vec::new();
        if !carried.is_empty() {
            let mut named: HashSet<String> = HashSet::new();
            for id in extract(summary) {
                if carried.contains(&id.text) && named.insert(id.text.clone()) {
                    dropped.push(id.text);
                }
            }
        }
        for (ids, entry) in sources {
            for id in ids {
                if id.class == IdClass::Secret && secrets == SecretPolicy::Reference {
                    match entry {
                        Some(entry) => {
                            refs.insert(format!("secret in entry {entry}"));
                        }
                        None if carried.secret_refs().is_empty() && !summary.contains(&id.text) => {
                            refs.insert("secret in entry (previous summary)".to_owned());
                        }
                        None => {}
                    }
                    continue;
                }
                if summary.contains(&id.text) {
                    continue;
                }
                last_seen.insert(&id.text, order.len());
                order.push(&id.text);
            }
        }
        let added = order
            .iter()
            .enumerate()
            .filter(|(i, id)| last_seen.get(**id) == Some(i))
            .map(|(_, id)| (*id).to_owned())
            .collect();
        let secret_refs_added = refs.into_iter().filter(|r| !carried.secret_refs().contains(r)).collect();
        crate::LedgerDelta { base: None, added, dropped, secret_refs_added }
    }

    /// The extractive summariser, reading the conversation it is sent.
    struct Reading(crate::Extractive);

    impl crate::Summarizer for Reading {
        fn name(&self) -> &str {
            "reading"
        }
        fn summarize(&mut self, request: &crate::SummaryRequest) -> Result<String, crate::SummarizerError> {
            self.0.summarize(request)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// A summariser that does not read the conversation is sent none, and
        /// each exchange records the characters of the conversation written
        /// for one that does: chunks, merges and split-turn prefixes alike.
        #[test]
        fn conversation_chars_counted_equal_those_written(
            seed in 0u64..1000,
            window in 2_000u64..30_000,
            parts in 1usize..4,
            share in 0.1f64..0.9,
        ) {
            use crate::Summarizer as _;
            let options = sessionlog_test_support::GenOptions {
                seed,
                entries: 240,
                branches: 0,
                compactions: 1,
                tool_output_chars: 2100,
            };
            let lines = sessionlog_test_support::generate(options);
            let header = Entry::parse(&lines[0]).expect("generated header");
            let entries = lines[1..].iter().map(|l| Entry::parse(l).expect("generated line")).collect();
            let t = sessionlog_events::Transcript::from_objects(header, entries).expect("generated transcript");
            let path: Vec<&Entry> = t.default_path().expect("a path").into_iter().map(|i| &t.entries[i]).collect();
            let policy = crate::Policy {
                context_window: window,
                reserve_tokens: window / 8,
                keep_recent_tokens: window / 10,
                parts,
                max_history_share: share,
                ..crate::Policy::pi()
            };
            let counter = sessionlog_tokens::PiEstimator;
            let Ok(prep) = sessionlog_context::cut::prepare_with(&path, &policy.cut_settings(), &counter, policy.pi_rules)
            else {
                return Ok(());
            };
            let facts = crate::Facts::new(&path);
            prop_assert!(!crate::Extractive.reads_conversation());
            let counted = super::compact_over(&path, &prep, &policy, &mut crate::Extractive, &counter, None, &facts);
            let written =
                super::compact_over(&path, &prep, &policy, &mut Reading(crate::Extractive), &counter, None, &facts);
            let alone = super::compact_over(
                &path, &prep, &policy, &mut crate::Extractive, &counter, None, &crate::Facts::none(),
            );
            prop_assert!(written.exchanges.iter().any(|e| e.conversation_chars > 0));
            let chars = |o: &super::Outcome| o.exchanges.iter().map(|e| e.conversation_chars).collect::<Vec<_>>();
            prop_assert_eq!(chars(&counted), chars(&written));
            prop_assert_eq!(&counted, &written);
            prop_assert_eq!(&alone, &written);
        }

        /// The ledger change walked from the last mention back, with the
        /// window-filtered search, is the reference's.
        #[test]
        fn ledger_equals_the_reference(
            seed in 0u64..1000,
            from in 0usize..120,
            len in 0usize..200,
            picks in proptest::collection::vec((0usize..10_000, 0usize..4), 0..60),
            with_previous in any::<bool>(),
            reference_secrets in any::<bool>(),
            carried_refs in any::<bool>(),
        ) {
            let options = sessionlog_test_support::GenOptions {
                seed,
                entries: 300,
                branches: 0,
                compactions: 0,
                tool_output_chars: 400,
            };
            let lines = sessionlog_test_support::generate(options);
            let entries: Vec<Entry> = lines[1..].iter().map(|l| Entry::parse(l).expect("generated line")).collect();
            let messages: Vec<AgentMessage<'_>> =
                entries.iter().filter_map(sessionlog_context::assemble::context_message).collect();
            let range = &messages[from.min(messages.len())..(from + len).min(messages.len())];
            let all: Vec<String> =
                messages.iter().flat_map(crate::facts::ids_of).map(|id| id.text).collect();
            prop_assume!(!all.is_empty());
            // Texts naming some of the identifiers (whole, cut, or glued to a word),
            // and a carried ledger holding others.
            let (mut summary, mut previous, mut carried) = (String::new(), String::new(), Vec::new());
            for &(at, how) in &picks {
                let id = &all[at % all.len()];
                match how {
                    0 => summary.push_str(&format!("{id} ")),
                    1 => summary.push_str(&format!("x{}y\n", &id[..id.len() / 2])),
                    2 => previous.push_str(&format!("see {id} and AKIA0123456789ABCDEF\n")),
                    _ => carried.push(id.clone()),
                }
            }
            let carried = crate::Ledger::new(carried, carried_refs.then(|| "secret in entry x".to_owned()));
            let secrets = if reference_secrets {
                crate::ids::SecretPolicy::Reference
            } else {
                crate::ids::SecretPolicy::Keep
            };
            let previous = with_previous.then_some(previous.as_str());
            let facts = crate::Facts::none();
            let expected = reference_ledger(&summary, range, previous, &carried, secrets);
            prop_assert_eq!(&super::ledger(&summary, range, previous, &carried, secrets, &facts), &expected);
            // Again with the texts' lines remembered by `facts`.
            prop_assert_eq!(&super::ledger(&summary, range, previous, &carried, secrets, &facts), &expected);
        }

        /// The label from the smallest and largest milliseconds is the one
        /// from every timestamp printed and compared.
        #[test]
        fn merge_label_equals_the_reference(
            stamps in proptest::collection::vec(stamp(), 0..8),
            index in 0usize..4,
            count in 1usize..5,
        ) {
            let entries: Vec<Entry> = stamps
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let t = t.as_ref().map(|t| format!(r#","timestamp":{t}"#)).unwrap_or_default();
                    Entry::parse(&format!(
                        r#"{{"type":"message","id":"m{i}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"hi"{t}}}}}"#
                    ))
                    .ok()
                })
                .collect();
            let chunk: Vec<AgentMessage<'_>> =
                entries.iter().filter_map(sessionlog_context::assemble::context_message).collect();
            prop_assert_eq!(merge_label(index, count, &chunk), reference_label(index, count, &chunk));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        /// The window filter never answers "absent" for a needle the text
        /// holds, nor "present" for one it lacks; asked twice, the same.
        #[test]
        fn haystack_answers_as_str_contains(
            text in "[abc:/é-]{0,300}",
            needles in proptest::collection::vec("[abc:/é-]{0,9}", 1..30),
            cuts in proptest::collection::vec((0usize..300, 1usize..12), 0..10),
        ) {
            // Needles cut from the text itself, so that many are present.
            let from_text = cuts.iter().filter_map(|&(at, len)| text.get(at..(at + len).min(text.len())));
            let needles: Vec<&str> = needles.iter().map(String::as_str).chain(from_text).collect();
            let h = Haystack::new(&text);
            for n in needles.iter().chain(&needles) {
                prop_assert_eq!(h.contains(n), text.contains(n), "{:?} in {:?}", n, text);
            }
        }
    }
}

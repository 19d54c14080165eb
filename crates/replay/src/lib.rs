//! Replay: what a compaction policy would have done with a recorded session.
//!
//! [`replay`] walks the active path of a transcript in order and keeps a
//! *virtual* context as the policy would have kept it. Every assistant message
//! is a model call: the context it was sent is measured (overflow recovery
//! compacts first when it exceeds the window), and after the reply the trigger
//! is evaluated; when it fires, Pi's cut (under the policy's `piRules`: Pi
//! 0.58.3's or Pi 1.6.0's) is prepared over the virtual log and
//! summarised through a [`Summarizer`], and a virtual `compaction` entry is
//! appended. Recorded compactions are ignored (and reported as the
//! reference). Same transcript, policy and summariser → the same bytes.
//!
//! [`sweep`] replays a list of policy variants over a corpus; [`Grid`] makes
//! that list from lists of knob values (flags or a [`Spec`] file) and policy
//! files ([`load_policy`]).
//!
//! Metrics ([`Metrics`], DESIGN §5): compactions, compactions below threshold,
//! peak and mean context, tokens billed (sum of context over calls), summary
//! tokens, overflow calls, broken tool pairs, identifier recall, memory flushes.

pub mod calibrate;
mod entry_line;
pub mod grid;
pub mod joint;
pub mod memo;
pub mod probes;
pub mod sweep;

pub use grid::{load_policy, Grid, GridError, Inputs, Spec};
pub use sweep::SummarizerKind;

use std::sync::Arc;

use serde::Serialize;
use sessionlog_compaction::ids::{IdClass, SecretPolicy};
use sessionlog_compaction::{
    compact_carrying, Facts, FallbackLevel, Ledger, Outcome, Policy, Recorded, Summarizer, MASK_PLACEHOLDER,
};
use sessionlog_context::assemble::context_message;
use sessionlog_context::cut::{prepare_with, Settings};
use sessionlog_context::pairing::{check_pairs, PairingIssue};
use sessionlog_context::AgentMessage;
use sessionlog_events::write::Head;
use sessionlog_events::{CycleError, Entry, EntryKind, LineError, Role, Transcript};
use sessionlog_tokens::{parts, ContextSize, Memo, TokenCounter};

/// Metrics of one replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// Assistant messages on the path (each one model call).
    pub model_calls: u64,
    /// Virtual compactions made.
    pub compactions: u64,
    /// Virtual compactions whose `tokensBefore` was not above the threshold.
    pub compactions_below_threshold: u64,
    /// Recorded compactions on the path (ignored by the replay).
    pub recorded_compactions: u64,
    /// Recorded compactions whose `tokensBefore` was not above this policy's threshold.
    pub recorded_below_threshold: u64,
    /// Largest context sent to a call.
    pub peak_context_tokens: u64,
    /// Mean context over calls.
    pub mean_context_tokens: f64,
    /// Sum of context tokens over calls.
    pub tokens_billed: u64,
    /// Tokens of the summaries produced.
    pub summary_tokens: u64,
    /// Calls whose context exceeded the window.
    pub overflow_calls: u64,
    /// Tool results left in context without their call by a compaction (must be 0).
    pub broken_tool_pairs: u64,
    /// Identifiers mentioned again by a later message.
    pub identifier_mentions: u64,
    /// Of those, the ones still in the context at that moment.
    pub identifier_hits: u64,
    /// `identifier_hits / identifier_mentions` (1 when nothing was mentioned again).
    pub identifier_recall: f64,
    /// Silent memory-flush turns the policy would have run.
    pub memory_flushes: u64,
    /// Compactions that needed the level-2 or level-3 fallback.
    pub degraded_summaries: u64,
    /// Tool results cut by overflow recovery when compacting was not enough.
    pub truncated_tool_results: u64,
    /// Identifiers the compactions had to keep: per compaction, those of the
    /// history before its first kept entry (secrets under the reference
    /// policy aside), summed over compactions.
    pub ledger_identifiers: u64,
    /// Of those, the share in the summary text or the ledger (must be 1; 1
    /// when there was nothing to keep).
    pub ledger_recall: f64,
    /// Of those, the share the model sees: in the summary text, visible
    /// identifier section included (1 when there was nothing to keep).
    pub visible_identifier_recall: f64,
    /// Tokens reclaimed by all compactions.
    pub reclaimed_tokens: u64,
    /// Compactions that reclaimed less than `noopReclaimShare` of their context.
    pub noop_compactions: u64,
    /// Compaction loops: runs of 3 or more compactions within the policy's
    /// `loopWindowCalls` model calls (each run counted once).
    pub compaction_loops: u64,
    /// Tool results masked (the policy's `maskToolResultsAfterTurns`).
    pub masked_tool_results: u64,
    /// Tokens the masks took out of the context when made, summed.
    pub masked_tokens: u64,
    /// Quality probes summed over compactions: files the compacted ranges
    /// read or modified.
    pub probe_files: u64,
    /// Of those, the ones the summaries or their file lists name.
    pub probe_files_named: u64,
    /// `probeFilesNamed / probeFiles` (1 when no file was touched).
    pub file_recall: f64,
    /// Compactions after which the last user ask is neither kept nor in the summary.
    pub last_ask_missing: u64,
    /// Failed tool results in the compacted ranges.
    pub probe_tool_failures: u64,
    /// Of those, the ones the summaries name.
    pub probe_tool_failures_named: u64,
    /// `probeToolFailuresNamed / probeToolFailures` (1 when nothing failed).
    pub tool_failure_recall: f64,
}

/// A tool result masked by observation masking: in the virtual log, a Pi 1.6
/// `context_edit` entry replacing its content by [`MASK_PLACEHOLDER`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMask {
    /// The `context_edit` entry's id in the virtual log.
    pub id: String,
    /// The entry it follows in the virtual log.
    pub after_entry_id: Option<String>,
    /// The masked tool result's entry.
    pub target_id: Option<String>,
    /// The user message whose turn it was masked before.
    pub before_entry_id: Option<String>,
    /// The result's tokens in the context before.
    pub tokens_before: u64,
    /// The placeholder's tokens.
    pub tokens_after: u64,
}

/// What masking saved against the same policy without it: the answer to
/// "what would masking have saved?".
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MaskingSavings {
    /// Tokens billed without masking.
    pub baseline_tokens_billed: u64,
    /// Compactions without masking.
    pub baseline_compactions: u64,
    /// Baseline tokens billed minus the masked run's (negative: masking cost more).
    pub tokens_billed_saved: i64,
    /// `tokensBilledSaved / baselineTokensBilled` (0 when nothing was billed).
    pub tokens_billed_saved_share: f64,
    /// Baseline compactions minus the masked run's.
    pub compactions_avoided: i64,
}

impl MaskingSavings {
    /// `masked` against `baseline` (the same policy and transcript without masking).
    pub fn of(masked: &Metrics, baseline: &Metrics) -> MaskingSavings {
        let saved = baseline.tokens_billed as i64 - masked.tokens_billed as i64;
        MaskingSavings {
            baseline_tokens_billed: baseline.tokens_billed,
            baseline_compactions: baseline.compactions,
            tokens_billed_saved: saved,
            tokens_billed_saved_share: if baseline.tokens_billed == 0 {
                0.0
            } else {
                saved as f64 / baseline.tokens_billed as f64
            },
            compactions_avoided: baseline.compactions as i64 - masked.compactions as i64,
        }
    }
}

/// One virtual compaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualCompaction {
    /// Its entry id in the virtual log.
    pub id: String,
    /// The path entry after which it was made.
    pub after_entry_id: Option<String>,
    /// `threshold` or `overflow`.
    pub trigger: &'static str,
    /// First and last entry id of the summarised range.
    pub summarized_from: Option<String>,
    /// Last summarised entry.
    pub summarized_to: Option<String>,
    /// Context tokens before and after.
    pub context_before: u64,
    /// Context tokens right after compacting.
    pub context_after: u64,
    /// Not above the threshold when made.
    pub below_threshold: bool,
    /// Identifiers of the history before the first kept entry (secrets
    /// under the reference policy aside).
    pub identifiers_before: u64,
    /// Share of them in the summary text or the ledger (1 when none).
    pub ledger_recall: f64,
    /// Share of them in the summary text the model sees (1 when none).
    pub visible_identifier_recall: f64,
    /// Model calls made before it (the loop detector's clock).
    pub model_call: u64,
    /// `contextBefore − contextAfter` (0 when the context grew).
    pub reclaimed_tokens: u64,
    /// `reclaimedTokens / contextBefore`.
    pub reclaimed_ratio: f64,
    /// Reclaimed less than the policy's `noopReclaimShare` of the context.
    pub noop: bool,
    /// Quality probes: files, the last user ask, tool failures.
    pub probes: probes::Probes,
    /// The compaction itself (shared with the other policies of a sweep that made it).
    #[serde(flatten)]
    pub outcome: Arc<Outcome>,
}

/// A memory-flush turn the policy would have run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryFlushEvent {
    /// The user message it would have preceded.
    pub before_entry_id: Option<String>,
    /// Context tokens at that moment.
    pub context_tokens: u64,
    /// Compactions so far (the once-per-cycle key).
    pub compaction_count: u32,
}

/// A recorded compaction, judged by the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedCompaction {
    /// Its entry id.
    pub entry_id: Option<String>,
    /// Its `tokensBefore`.
    pub tokens_before: Option<f64>,
    /// What fired it, when the transcript says (`details.trigger`: Claude
    /// Code's `auto` or `manual`, as imported).
    pub trigger: Option<String>,
    /// Not above the policy's threshold.
    pub below_threshold: bool,
    /// The entry it was made after (its parent).
    pub after_entry_id: Option<String>,
    /// Its `firstKeptEntryId`.
    pub first_kept_entry_id: Option<String>,
    /// A virtual compaction of this replay reproduces it
    /// ([`calibrate::reproduces`]: same entry, same first kept entry,
    /// `tokensBefore` within 1%).
    pub reproduced: bool,
}

/// The result of a replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replay {
    /// The policy replayed.
    pub policy: Policy,
    /// The summariser used.
    pub summarizer: String,
    /// The token counter used.
    pub tokenizer: String,
    /// How contexts were measured.
    pub measure: Measure,
    /// Threshold in tokens under this policy.
    pub threshold: f64,
    /// The metrics.
    pub metrics: Metrics,
    /// Virtual compactions in order.
    pub compactions: Vec<VirtualCompaction>,
    /// Memory flushes in order.
    pub memory_flushes: Vec<MemoryFlushEvent>,
    /// Tool results masked, in order.
    pub masks: Vec<VirtualMask>,
    /// Recorded compactions on the path.
    pub recorded: Vec<RecordedCompaction>,
    /// `k/n`: of the `n` recorded compactions, `k` reproduced by this replay.
    pub recorded_reproduced: String,
}

impl Replay {
    /// Writes the report as `JSON.stringify(report, null, 2)` prints it,
    /// with `file` and (when given) `maskingSavings` after its keys —
    /// straight from the report, no `serde_json::Value` tree: its objects
    /// are structs, whose keys JavaScript keeps in order (none is an array
    /// index) and none of which names a key twice. Written by
    /// [`sessionlog_events::json::write_js_pretty_serialize`], the bytes of
    /// serde_json's serializer with `JsPrettyFormatter`.
    pub fn write_json(
        &self,
        out: &mut Vec<u8>,
        file: &str,
        savings: Option<&MaskingSavings>,
    ) -> Result<(), serde_json::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Json<'r> {
            #[serde(flatten)]
            report: &'r Replay,
            file: &'r str,
            #[serde(skip_serializing_if = "Option::is_none")]
            masking_savings: Option<&'r MaskingSavings>,
        }
        let json = Json { report: self, file, masking_savings: savings };
        sessionlog_events::json::write_js_pretty_serialize(out, &json)
    }

    /// The virtual log's new entries as Pi lines: compactions, masks as Pi
    /// 1.6 `context_edit` entries, and memory flushes as `custom` entries Pi
    /// ignores (outside the tree).
    pub fn event_lines(&self) -> Result<Vec<Entry>, LineError> {
        let mut out = Vec::new();
        for c in &self.compactions {
            let head = Head { id: &c.id, parent_id: c.after_entry_id.as_deref(), timestamp: "" };
            out.push(c.outcome.to_entry(&head, None)?);
        }
        for k in &self.masks {
            let line = serde_json::json!({
                "type": "context_edit",
                "id": k.id,
                "parentId": k.after_entry_id,
                "timestamp": "",
                "targetId": k.target_id,
                "replacement": {"content": [{"type": "text", "text": MASK_PLACEHOLDER}]},
            });
            out.push(context_edit_line(&line)?);
        }
        for f in &self.memory_flushes {
            let data = serde_json::json!({
                "beforeEntryId": f.before_entry_id, "contextTokens": f.context_tokens, "compactionCount": f.compaction_count
            });
            out.push(sessionlog_events::write::custom(None, "sessionlog.memory-flush", &data)?);
        }
        Ok(out)
    }
}

/// A `context_edit` line in Pi's key order (`type, id, parentId, timestamp,
/// targetId, replacement`).
fn context_edit_line(v: &serde_json::Value) -> Result<Entry, LineError> {
    let keys = ["type", "id", "parentId", "timestamp", "targetId", "replacement"];
    let fields: Vec<String> =
        keys.iter().map(|k| format!("{}:{}", serde_json::Value::from(*k), v[*k])).collect();
    Entry::parse(&format!("{{{}}}", fields.join(",")))
}

/// Maps and sets of a prepared transcript, hashed with foldhash (only looked
/// up, never iterated).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A context item: one message of the virtual context (shared, computed once per entry).
#[derive(Clone)]
struct Item {
    tokens: u64,
    /// Its identifiers, as numbers of [`Prepared`]'s identifier table.
    ids: Arc<[u32]>,
}

/// A transcript made ready for replay: its default path and everything about
/// it that no policy changes (message texts, identifiers, serialised forms,
/// tool-call ids), derived once and shared by every replay of it — a sweep
/// prepares each transcript once, whatever the number of policies.
pub struct Prepared<'t> {
    path: Vec<&'t Entry>,
    facts: Facts<'t>,
    /// Identifier texts of the path, numbered in order of first appearance.
    id_numbers: HashMap<Arc<str>, u32>,
    /// Each number's text (the same allocation as its key in `id_numbers`).
    id_texts: Vec<Arc<str>>,
    /// The numbers of the secrets, in order.
    secrets: Vec<u32>,
    /// The identifiers of each path entry's context message.
    ids: Vec<Option<Arc<[u32]>>>,
    /// Tool-call ids of the path's messages.
    calls: HashSet<&'t str>,
    /// The first path index of each entry id.
    first_index: HashMap<&'t str, usize>,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("path", &self.path.len())
            .field("identifiers", &self.id_numbers.len())
            .finish()
    }
}

impl<'t> Prepared<'t> {
    /// Prepares the default path of `transcript` (the last entry's branch).
    pub fn new(transcript: &'t Transcript) -> Result<Prepared<'t>, CycleError> {
        let indices = transcript.default_path()?;
        let path: Vec<&'t Entry> = indices.iter().map(|&i| &transcript.entries[i]).collect();
        let facts = Facts::new(&path);
        let found: Vec<_> = path.iter().map(|e| context_message(e).map(|m| facts.ids(&m))).collect();
        // Sized for every mention up front (a new text is one): grown by
        // doubling, the map hashed every text again at each growth (119,028
        // texts on the bench file).
        let mentions = found.iter().flatten().map(|ids| ids.len()).sum();
        let mut id_numbers: HashMap<Arc<str>, u32> =
            HashMap::with_capacity_and_hasher(mentions, Default::default());
        let mut id_texts: Vec<Arc<str>> = Vec::new();
        let mut secrets: Vec<u32> = Vec::new();
        let ids = found
            .iter()
            .map(|found| {
                let numbers: Arc<[u32]> = found
                    .as_deref()?
                    .iter()
                    .map(|id| {
                        // Looked up first: a known identifier's text is not copied.
                        if let Some(&n) = id_numbers.get(id.text.as_str()) {
                            return n;
                        }
                        let next = id_numbers.len() as u32;
                        // One copy of the text, shared by the map and the list.
                        let text: Arc<str> = Arc::from(id.text.as_str());
                        id_numbers.insert(Arc::clone(&text), next);
                        id_texts.push(text);
                        if id.class == IdClass::Secret {
                            secrets.push(next);
                        }
                        next
                    })
                    .collect();
                Some(numbers)
            })
            .collect();
        // Sized up front: grown by doubling, each map hashed its keys again.
        let mut calls = HashSet::with_capacity_and_hasher(path.len(), Default::default());
        calls.extend(
            path.iter()
                .filter_map(|e| e.message())
                .flat_map(|m| m.blocks().iter().filter_map(|b| b.id.as_deref())),
        );
        let mut first_index = HashMap::with_capacity_and_hasher(path.len(), Default::default());
        for (i, e) in path.iter().enumerate() {
            if let Some(id) = e.id.as_deref() {
                first_index.entry(id).or_insert(i);
            }
        }
        Ok(Prepared { path, facts, id_numbers, id_texts, secrets, ids, calls, first_index })
    }

    /// `inner` with the path's messages counted once.
    pub fn counter(&self, inner: &'t dyn TokenCounter) -> Memo<'t> {
        Memo::new(inner, self.path.iter().filter_map(|e| e.message()))
    }

    /// The numbers of the known identifiers of `m` (a summary's identifiers
    /// that no path message mentions can never be a hit, so they are left out).
    fn numbers_of(&self, m: &AgentMessage<'_>) -> Arc<[u32]> {
        self.facts.ids(m).iter().filter_map(|id| self.id_numbers.get(id.text.as_str()).copied()).collect()
    }

    /// [`Prepared::numbers_of`] a summary message, as a set (in order of
    /// number): its lines' identifiers, each distinct line's found once per
    /// transcript through `memo` ([`memo::CompactionMemo::known_ids`]).
    fn summary_numbers(&self, m: &AgentMessage<'_>, memo: &memo::CompactionMemo) -> Arc<[u32]> {
        let text = self.facts.text(m);
        memo.known_ids(&text, |id| self.id_numbers.get(id).copied()).into_iter().map(|(_, n)| n).collect()
    }
}

/// `(firstKeptEntryId, summary)` of the recorded compactions, for [`Recorded`].
pub fn recorded_summaries(transcript: &Transcript) -> Vec<(String, String)> {
    transcript
        .entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Compaction(c) => Some((c.first_kept_entry_id.clone()?, c.summary.clone()?)),
            _ => None,
        })
        .collect()
}

/// A recorded-summary summariser for `transcript`.
pub fn recorded_summarizer(transcript: &Transcript) -> Recorded {
    Recorded::new(recorded_summaries(transcript))
}

/// How the replay measures a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Measure {
    /// The token counter's estimate of the virtual context.
    Estimate,
    /// The estimate plus the latest difference between the provider-reported
    /// usage and the estimate of the context it was reported for — the system
    /// prompt and tool schemas the transcript does not hold — so the trigger
    /// sees what Pi's usage-based trigger saw; the plain estimate before any usage.
    #[default]
    Usage,
}

impl std::str::FromStr for Measure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "estimate" => Ok(Measure::Estimate),
            "usage" => Ok(Measure::Usage),
            other => Err(format!("unknown measure `{other}` (estimate, usage)")),
        }
    }
}

#[derive(Clone)]
struct State<'p, 't> {
    prepared: &'p Prepared<'t>,
    /// The context item of each path entry that has a message, once computed.
    items: Vec<Option<Item>>,
    /// Path indices of the messages in the virtual context (the summary aside).
    in_context: Vec<usize>,
    /// The virtual entries made so far (shared with the other policies of a sweep that made them).
    arena: Vec<Arc<Entry>>,
    offset: u64,
    log: Vec<Slot>,
    total: u64,
    /// How many context messages mention each identifier (by number).
    in_ctx: Vec<u32>,
    /// The log slot of each path entry once pushed (`usize::MAX` before).
    slot_of_path: Vec<usize>,
    /// The ids of the virtual entries with their log slots.
    virtual_slots: Vec<(String, usize)>,
    /// Path entries before this index have their identifiers in `history`.
    history_until: usize,
    /// The distinct identifiers (by number) of the path before `history_until`.
    history: Vec<u32>,
    /// Whether each number is in `history`.
    in_history: Vec<bool>,
    /// The resolved identifier ledger of the last virtual compaction (each
    /// compaction keeps only its change to it); shared, in a sweep, by the
    /// policies whose compactions so far have the same outcomes.
    ledger: Arc<Ledger>,
    /// Whether each identifier (by number) is in `ledger` (1) or not (0),
    /// kept in step with it change by change once `ledger_pending` is applied.
    in_ledger: Vec<u8>,
    /// The compactions whose ledger change `in_ledger` lacks yet, in order
    /// (applied only when a ledger recall is computed, [`sync_ledger`]).
    ledger_pending: Vec<Arc<Outcome>>,
    /// The path index `history` must reach before a ledger recall (the
    /// furthest first kept entry so far, [`extend_history`]).
    history_target: usize,
    /// Identifiers kept by the compactions so far, summed.
    ledger_kept: u64,
    /// Identifiers visible in the compactions' summaries so far, summed.
    visible_kept: u64,
    /// After a no-op compaction under `skipNoopCompactions`: no compaction
    /// until the context exceeds this.
    noop_guard_until: Option<u64>,
    /// Whether each path entry's tool result has been masked.
    masked: Vec<bool>,
    /// The path index of the last user message so far.
    last_user: Option<usize>,
    /// Compactions shared with other replays of the same transcript (sweeps).
    memo: Option<&'p memo::CompactionMemo>,
    /// The memo's number of each arena entry's outcome (with a memo).
    memo_ids: Vec<u32>,
    /// The policy's JSON in the memo's keys, made at its first compaction.
    policy_json: memo::PolicyJson,
}

impl State<'_, '_> {
    /// Whether the no-op guard lets a compaction run now (and lifts it once the context has grown).
    fn guard_allows(&mut self) -> bool {
        match self.noop_guard_until {
            Some(limit) if self.measured() <= limit => false,
            _ => {
                self.noop_guard_until = None;
                true
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Path(usize),
    Virtual(usize),
}

impl State<'_, '_> {
    /// The virtual context as measured (plus the usage calibration offset).
    fn measured(&self) -> u64 {
        // A recorded usage can be any number (`1e308` reads as `u64::MAX`).
        self.total.saturating_add(self.offset)
    }

    fn entry(&self, slot: Slot) -> &Entry {
        match slot {
            Slot::Path(i) => self.prepared.path[i],
            Slot::Virtual(i) => self.arena[i].as_ref(),
        }
    }

    /// Appends a slot to the virtual log.
    fn push(&mut self, slot: Slot) {
        match slot {
            Slot::Path(i) => self.slot_of_path[i] = self.log.len(),
            Slot::Virtual(i) => {
                if let Some(id) = self.arena[i].id.clone() {
                    self.virtual_slots.push((id, self.log.len()));
                }
            }
        }
        self.log.push(slot);
    }

    /// The first log slot holding an entry with `id`.
    fn first_slot(&self, id: &str) -> Option<usize> {
        let on_path =
            self.prepared.first_index.get(id).map(|&i| self.slot_of_path[i]).filter(|&s| s != usize::MAX);
        let virtual_slot = self.virtual_slots.iter().find(|(v, _)| v == id).map(|&(_, s)| s);
        match (on_path, virtual_slot) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn add(&mut self, item: &Item) {
        self.total += item.tokens;
        for &id in item.ids.iter() {
            self.in_ctx[id as usize] += 1;
        }
    }
}

/// Replays `transcript`'s default path under `policy`.
pub fn replay(
    transcript: &Transcript,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    measure: Measure,
) -> Result<Replay, CycleError> {
    let prepared = Prepared::new(transcript)?;
    let counter = prepared.counter(counter);
    Ok(replay_prepared(&prepared, policy, summarizer, &counter, measure))
}

/// Replays a prepared transcript under `policy`: the same result as
/// [`replay`], with the per-transcript work done once in [`Prepared`].
/// `counter` is best the prepared transcript's [`Prepared::counter`].
pub fn replay_prepared(
    prepared: &Prepared<'_>,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    measure: Measure,
) -> Replay {
    replay_memoized(prepared, policy, summarizer, counter, measure, None)
}

/// [`replay_prepared`] taking compactions other replays of the same
/// prepared transcript already made from `memo` (and adding its own): the
/// same result, with each distinct compaction summarised once.
pub fn replay_memoized(
    prepared: &Prepared<'_>,
    policy: &Policy,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
    measure: Measure,
    memo: Option<&memo::CompactionMemo>,
) -> Replay {
    let mut walk = walk_start(prepared, policy, summarizer.name(), counter.name(), measure, memo);
    let settings = policy.cut_settings();
    for i in 0..prepared.path.len() {
        walk.step(i, policy, &settings, summarizer, counter);
    }
    walk_finish(walk)
}

/// A replay under way: the virtual log and context, the metrics and the
/// loop's counters after the path entries walked so far. A copy continues
/// independently (a sweep walks the policies of a transcript together up to
/// where each one first acts on its own, [`crate::joint`]).
#[derive(Clone)]
pub(crate) struct Walk<'p, 't> {
    st: State<'p, 't>,
    out: Replay,
    measure: Measure,
    /// The context as Pi actually kept it (recorded compactions applied), for calibration.
    tokens_at: Vec<u64>,
    original_total: u64,
    /// Identifiers mentioned so far (by number).
    seen: Vec<bool>,
    flushed_at: Option<u32>,
    overflow_attempts: u32,
    truncated_this_turn: bool,
    /// Observation masking: tool results in the context with the user turn they came in.
    mask_after: Option<u32>,
    turn: u32,
    unmasked: std::collections::VecDeque<(usize, u32)>,
    /// Which recorded usage calibrates the measure: Pi's rule, fed entry by entry.
    size: ContextSize,
}

/// A replay of `prepared` under `policy` before its first path entry.
pub(crate) fn walk_start<'p, 't>(
    prepared: &'p Prepared<'t>,
    policy: &Policy,
    summarizer: &str,
    counter: &str,
    measure: Measure,
    memo: Option<&'p memo::CompactionMemo>,
) -> Walk<'p, 't> {
    let path = &prepared.path;
    let st = State {
        prepared,
        items: vec![None; path.len()],
        in_context: Vec::new(),
        arena: Vec::new(),
        offset: 0,
        log: Vec::new(),
        total: 0,
        in_ctx: vec![0; prepared.id_numbers.len()],
        slot_of_path: vec![usize::MAX; path.len()],
        virtual_slots: Vec::new(),
        history_until: 0,
        history: Vec::new(),
        in_history: vec![false; prepared.id_numbers.len()],
        ledger: Arc::default(),
        in_ledger: vec![0; prepared.id_numbers.len()],
        ledger_pending: Vec::new(),
        history_target: 0,
        ledger_kept: 0,
        visible_kept: 0,
        noop_guard_until: None,
        masked: vec![false; path.len()],
        last_user: None,
        memo,
        memo_ids: Vec::new(),
        policy_json: Default::default(),
    };
    // The context as Pi actually kept it (recorded compactions applied), for calibration.
    let tokens_at: Vec<u64> = vec![0; path.len()];
    let out = Replay {
        policy: policy.clone(),
        summarizer: summarizer.to_owned(),
        tokenizer: counter.to_owned(),
        measure,
        threshold: policy.threshold(),
        metrics: Metrics::default(),
        compactions: Vec::new(),
        memory_flushes: Vec::new(),
        masks: Vec::new(),
        recorded: Vec::new(),
        recorded_reproduced: String::new(),
    };
    Walk {
        st,
        out,
        measure,
        tokens_at,
        original_total: 0,
        seen: vec![false; prepared.id_numbers.len()],
        flushed_at: None,
        overflow_attempts: 0,
        truncated_this_turn: false,
        mask_after: policy.mask_tool_results_after_turns.filter(|&n| n > 0),
        turn: 0,
        unmasked: std::collections::VecDeque::new(),
        size: ContextSize::new(policy.pi_rules),
    }
}

impl Walk<'_, '_> {
    /// The context as measured now.
    pub(crate) fn measured(&self) -> u64 {
        self.st.measured()
    }

    /// Takes this walk over for `policy` (summarising with `summarizer`):
    /// sound while the walk has made no decision of its own — no
    /// compaction, flush, overflow or truncation — so that only the policy,
    /// its threshold and its judgement of the recorded compactions change.
    pub(crate) fn adopt(&mut self, policy: &Policy, summarizer: &str) {
        self.out.policy = policy.clone();
        self.st.policy_json = Default::default();
        self.out.threshold = policy.threshold();
        self.out.summarizer = summarizer.to_owned();
        for r in &mut self.out.recorded {
            r.below_threshold = !policy.should_compact(r.tokens_before.unwrap_or(0.0));
        }
        self.out.metrics.recorded_below_threshold =
            self.out.recorded.iter().filter(|r| r.below_threshold).count() as u64;
    }

    /// Walks path entry `i` (the next one) under `policy`.
    pub(crate) fn step(
        &mut self,
        i: usize,
        policy: &Policy,
        settings: &Settings,
        summarizer: &mut dyn Summarizer,
        counter: &dyn TokenCounter,
    ) {
        let Walk {
            st,
            out,
            measure,
            tokens_at,
            original_total,
            seen,
            flushed_at,
            overflow_attempts,
            truncated_this_turn,
            mask_after,
            turn,
            unmasked,
            size,
        } = self;
        let prepared = st.prepared;
        let path = &prepared.path;
        let entry = path[i];
        if let EntryKind::Compaction(c) = &entry.kind {
            size.push_entry(entry, counter);
            let below = !policy.should_compact(c.tokens_before.unwrap_or(0.0));
            out.metrics.recorded_compactions += 1;
            out.metrics.recorded_below_threshold += u64::from(below);
            let trigger =
                entry.field_value("details").and_then(|d| d.get("trigger")?.as_str().map(str::to_owned));
            out.recorded.push(RecordedCompaction {
                entry_id: entry.id.clone(),
                tokens_before: c.tokens_before,
                trigger,
                below_threshold: below,
                after_entry_id: entry.parent_id.clone(),
                first_kept_entry_id: c.first_kept_entry_id.clone(),
                reproduced: false,
            });
            let first = c.first_kept_entry_id.as_deref();
            let kept = path[..i]
                .iter()
                .position(|e| e.id.as_deref() == first)
                .map_or(0, |f| tokens_at[f..i].iter().sum());
            let summary = sessionlog_context::assemble::message_of(entry)
                .map_or(0, |m| counter.tokens_for(&m.message, policy.pi_rules));
            *original_total = summary + kept;
            return;
        }
        let message = context_message(entry);
        let role = message.as_ref().map(|m| m.message.role());
        if role == Some(Role::User) {
            *overflow_attempts = 0;
            *truncated_this_turn = false;
            *turn += 1;
            if let Some(n) = *mask_after {
                while let Some(&(i, t)) = unmasked.front() {
                    if *turn - t < n {
                        break;
                    }
                    unmasked.pop_front();
                    mask(st, out, i, entry.id.clone(), counter);
                }
            }
            let count = out.compactions.len() as u32;
            if policy.memory_flush_due(st.measured() as f64, count, *flushed_at) {
                *flushed_at = Some(count);
                out.memory_flushes.push(MemoryFlushEvent {
                    before_entry_id: entry.id.clone(),
                    context_tokens: st.measured(),
                    compaction_count: count,
                });
            }
        }
        if role == Some(Role::Assistant) {
            // The model call: the context as sent.
            while st.measured() > policy.context_window
                && *overflow_attempts < policy.max_overflow_attempts
                && st.guard_allows()
            {
                out.metrics.overflow_calls += 1;
                if !compact_now(st, out, "overflow", settings, summarizer, counter) {
                    *overflow_attempts += 1;
                    break;
                }
                // Under OpenClaw's fix a compaction that reclaimed nothing is no recovery attempt.
                let noop = out.compactions.last().is_some_and(|c| c.noop);
                if !(noop && policy.skip_noop_compactions) {
                    *overflow_attempts += 1;
                }
            }
            if st.measured() > policy.context_window && !*truncated_this_turn {
                // Compacting was not enough: cut oversized tool results, once per turn.
                *truncated_this_turn = true;
                out.metrics.truncated_tool_results += truncate_oversized(st, policy, counter);
            }
            if st.measured() > policy.context_window {
                out.metrics.overflow_calls += 1;
            }
            out.metrics.model_calls += 1;
            out.metrics.tokens_billed = out.metrics.tokens_billed.saturating_add(st.measured());
            out.metrics.peak_context_tokens = out.metrics.peak_context_tokens.max(st.measured());
        }
        st.push(Slot::Path(i));
        let mut counted = None;
        if let Some(m) = message {
            let ids = prepared.ids[i].clone().unwrap_or_else(|| prepared.numbers_of(&m));
            for &id in ids.iter() {
                let id = id as usize;
                if seen[id] {
                    out.metrics.identifier_mentions += 1;
                    out.metrics.identifier_hits += u64::from(st.in_ctx[id] > 0);
                }
            }
            for &id in ids.iter() {
                seen[id as usize] = true;
            }
            let tokens = counter.tokens_for(&m.message, policy.pi_rules);
            counted = Some(tokens);
            tokens_at[i] = tokens;
            *original_total += tokens;
            let item = Item { tokens, ids };
            st.add(&item);
            st.items[i] = Some(item);
            st.in_context.push(i);
            if mask_after.is_some() && role == Some(Role::ToolResult) {
                unmasked.push_back((i, *turn));
            }
            if role == Some(Role::User) {
                st.last_user = Some(i);
            }
        }
        let reported = match (entry.message(), counted) {
            (Some(m), Some(tokens)) => size.push_counted(m, tokens),
            _ => size.push_entry(entry, counter),
        };
        if *measure == Measure::Usage {
            if let Some(reported) = reported.map(|r| r.tokens).filter(|u| u.is_finite() && *u > 0.0) {
                st.offset = (reported as u64).saturating_sub(*original_total);
            }
        }
        // Pi checks the threshold when an agent run ends: after an assistant
        // reply that calls no more tools (never between calls and results),
        // and not after an aborted or failed reply.
        let stopped = entry.message().and_then(|m| m.stop_reason.as_deref());
        let run_ended = !matches!(stopped, Some("aborted" | "error" | "toolUse"));
        if role == Some(Role::Assistant)
            && run_ended
            && policy.should_compact(st.measured() as f64)
            && st.guard_allows()
        {
            compact_now(st, out, "threshold", settings, summarizer, counter);
        }
    }
}

/// The replay's result once every path entry has been walked.
pub(crate) fn walk_finish(walk: Walk<'_, '_>) -> Replay {
    let Walk { st, mut out, .. } = walk;
    let m = &mut out.metrics;
    m.compactions = out.compactions.len() as u64;
    m.compactions_below_threshold = out.compactions.iter().filter(|c| c.below_threshold).count() as u64;
    m.mean_context_tokens =
        if m.model_calls == 0 { 0.0 } else { m.tokens_billed as f64 / m.model_calls as f64 };
    m.identifier_recall = if m.identifier_mentions == 0 {
        1.0
    } else {
        m.identifier_hits as f64 / m.identifier_mentions as f64
    };
    for r in &mut out.recorded {
        r.reproduced = out.compactions.iter().any(|v| calibrate::reproduces(v, r));
    }
    let reproduced = out.recorded.iter().filter(|r| r.reproduced).count();
    out.recorded_reproduced = format!("{reproduced}/{}", out.recorded.len());
    let m = &mut out.metrics;
    m.ledger_recall = share(st.ledger_kept, m.ledger_identifiers);
    m.visible_identifier_recall = share(st.visible_kept, m.ledger_identifiers);
    m.reclaimed_tokens = out.compactions.iter().map(|c| c.reclaimed_tokens).sum();
    m.noop_compactions = out.compactions.iter().filter(|c| c.noop).count() as u64;
    m.compaction_loops = compaction_loops(&out.compactions, out.policy.loop_window_calls);
    m.memory_flushes = out.memory_flushes.len() as u64;
    m.masked_tool_results = out.masks.len() as u64;
    m.masked_tokens = out.masks.iter().map(|k| k.tokens_before - k.tokens_after).sum();
    let probes = out.compactions.iter().map(|c| &c.probes);
    m.probe_files = probes.clone().map(|p| p.files).sum();
    m.probe_files_named = probes.clone().map(|p| p.files_named).sum();
    m.file_recall = share(m.probe_files_named, m.probe_files);
    m.last_ask_missing =
        probes.clone().filter(|p| p.last_user_ask == probes::AskPresence::Missing).count() as u64;
    m.probe_tool_failures = probes.clone().map(|p| p.tool_failures).sum();
    m.probe_tool_failures_named = probes.map(|p| p.tool_failures_named).sum();
    m.tool_failure_recall = share(m.probe_tool_failures_named, m.probe_tool_failures);
    m.degraded_summaries =
        out.compactions.iter().filter(|c| c.outcome.fallback >= FallbackLevel::SkippedOversized).count()
            as u64;
    out
}

/// Runs of 3 or more compactions within `window` model calls: compaction
/// `k` closes a loop when compaction `k − 2` was made fewer than `window`
/// calls before it; consecutive closing compactions are one loop.
pub fn compaction_loops(compactions: &[VirtualCompaction], window: u64) -> u64 {
    let mut loops = 0;
    let mut in_loop = false;
    for k in 2..compactions.len() {
        let closes = compactions[k].model_call - compactions[k - 2].model_call < window;
        if closes && !in_loop {
            loops += 1;
        }
        in_loop = closes;
    }
    loops
}

/// How many identifiers a compaction had to keep, and kept.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Recall {
    identifiers: u64,
    kept: u64,
    visible: u64,
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

impl Recall {
    fn ledger(&self) -> f64 {
        share(self.kept, self.identifiers)
    }
    fn visible(&self) -> f64 {
        share(self.visible, self.identifiers)
    }
}

/// Moves the history a ledger recall reads up to `first_kept` (at the
/// earliest, as far as the furthest first kept entry so far), gathered only
/// when a recall is computed ([`sync_ledger`]).
fn extend_history(st: &mut State<'_, '_>, first_kept: &str) {
    let until = st.prepared.first_index.get(first_kept).copied().unwrap_or(st.history_until);
    st.history_target = st.history_target.max(until);
}

/// Brings what a ledger recall reads about this replay up to date: applies
/// the pending ledger changes to `st.in_ledger` and gathers the identifiers
/// of the history before `st.history_target` into `st.history`,
/// incrementally (over a replay, once per change and once per path entry).
/// A policy whose recalls all come from a sweep's memo never pays either.
fn sync_ledger(st: &mut State<'_, '_>) {
    let prepared = st.prepared;
    for outcome in std::mem::take(&mut st.ledger_pending) {
        for (ids, now) in [(&outcome.ledger.dropped, 0), (&outcome.ledger.added, 1)] {
            for id in ids {
                if let Some(&n) = prepared.id_numbers.get(id.as_str()) {
                    st.in_ledger[n as usize] = now;
                }
            }
        }
    }
    let until = st.history_target;
    for i in st.history_until..until {
        for &n in prepared.ids[i].iter().flat_map(|ids| ids.iter()) {
            if !std::mem::replace(&mut st.in_history[n as usize], true) {
                st.history.push(n);
            }
        }
    }
    st.history_until = st.history_until.max(until);
}

/// Checks a compaction against the identifiers of the whole history before
/// its first kept entry (`st.history`, [`extend_history`]): each is kept
/// when the summary text or the resolved ledger (`st.ledger`, the
/// compaction's change applied) holds it verbatim (also inside a longer
/// identifier), and visible when the summary text does. `named` are the
/// identifiers the summary text names.
fn ledger_recall(st: &State<'_, '_>, outcome: &Outcome, named: &[u32], secrets: SecretPolicy) -> Recall {
    let prepared = st.prepared;
    // 1: in the ledger only, 2: in the ledger and its visible section, 3: named by the text.
    let mut state = st.in_ledger.clone();
    let ledger = &st.ledger;
    for id in ledger.iter().rev().take(outcome.ledger_visible) {
        if let Some(&n) = prepared.id_numbers.get(id) {
            state[n as usize] = 2;
        }
    }
    for &n in named {
        state[n as usize] = 3;
    }
    // A referenced secret is not counted (4).
    let secrets_referenced = secrets == SecretPolicy::Reference;
    if secrets_referenced {
        for &n in &prepared.secrets {
            state[n as usize] = 4;
        }
    }
    // Whether the ledger's identifiers joined with `\n` hold a text: for a
    // text without `\n`, whether one of them holds it (`Ledger::holds`
    // searches only the parts of the ledger that may); else the joined text.
    let in_ledger_text = |text: &str| {
        if text.is_empty() || text.contains('\n') {
            ledger.iter().collect::<Vec<_>>().join("\n").contains(text)
        } else {
            ledger.holds(text)
        }
    };
    // The history's identifiers counted by state in one pass; those in
    // neither the ledger nor the summary's names (0) are searched after.
    let mut by_state = [0u64; 256];
    let mut unplaced = Vec::new();
    for &n in &st.history {
        let s = state[n as usize];
        by_state[usize::from(s)] += 1;
        if s == 0 {
            unplaced.push(n);
        }
    }
    let mut r = Recall {
        identifiers: by_state[..4].iter().sum(),
        kept: by_state[1..4].iter().sum(),
        visible: by_state[2] + by_state[3],
    };
    for n in unplaced {
        let text = &*prepared.id_texts[n as usize];
        if memchr::memmem::find(outcome.summary.as_bytes(), text.as_bytes()).is_some() {
            r.kept += 1;
            r.visible += 1;
        } else if in_ledger_text(text) {
            r.kept += 1;
        }
    }
    #[cfg(test)]
    tests::check_against_joined_text(st, outcome, named, secrets, &r);
    r
}

/// Masks path entry `i`'s tool result if it is still in the virtual context:
/// its item shrinks to the placeholder's tokens and names no identifier, for
/// this context and every rebuild after a compaction. The compaction itself
/// reads the recorded result (the summariser and the ledger see it whole).
fn mask(
    st: &mut State<'_, '_>,
    out: &mut Replay,
    i: usize,
    before: Option<String>,
    counter: &dyn TokenCounter,
) {
    if st.masked[i] || st.in_context.binary_search(&i).is_err() {
        return;
    }
    let Some(m) = st.prepared.path[i].message() else { return };
    let Some(mut item) = st.items[i].take() else { return };
    let mut p = parts(m);
    p.texts = vec![MASK_PLACEHOLDER.into()];
    p.images = 0;
    let tokens = counter.count(&p).min(item.tokens);
    st.total = st.total.saturating_sub(item.tokens - tokens);
    for &id in item.ids.iter() {
        st.in_ctx[id as usize] = st.in_ctx[id as usize].saturating_sub(1);
    }
    let tokens_before = item.tokens;
    item.tokens = tokens;
    item.ids = Arc::from(Vec::new());
    st.items[i] = Some(item);
    st.masked[i] = true;
    let after_entry_id = st.log.last().and_then(|&s| st.entry(s).id.clone());
    out.masks.push(VirtualMask {
        id: format!("m{:07x}", out.masks.len() + 1),
        after_entry_id,
        target_id: st.prepared.path[i].id.clone(),
        before_entry_id: before,
        tokens_before,
        tokens_after: tokens,
    });
}

/// Cuts the oversized tool results in the virtual context (spec compaction
/// §3.9); returns how many were cut. Later rebuilds keep the cut sizes, as
/// OpenClaw rewrites the transcript.
fn truncate_oversized(st: &mut State<'_, '_>, policy: &Policy, counter: &dyn TokenCounter) -> u64 {
    let max = sessionlog_compaction::truncate::max_tool_result_chars(policy.context_window);
    let mut cut = 0;
    for &i in &st.in_context.clone() {
        let Some(m) = st.prepared.path[i].message().filter(|m| m.role() == Role::ToolResult) else {
            continue;
        };
        if st.masked[i] {
            continue;
        }
        let cut_tokens = || {
            let mut p = parts(m);
            let text: String = p.texts.concat();
            p.texts = vec![sessionlog_compaction::truncate::truncate_tool_result(&text, max)?.into()];
            Some(counter.count(&p))
        };
        // The same result cut to the same size: counted once per sweep.
        let cut_tokens = match st.memo {
            Some(memo) => memo.truncated(i, max, counter.name(), cut_tokens),
            None => cut_tokens(),
        };
        let Some(tokens) = cut_tokens else { continue };
        if let Some(item) = st.items[i].as_mut() {
            st.total = st.total.saturating_sub(item.tokens.saturating_sub(tokens));
            item.tokens = tokens.min(item.tokens);
            cut += 1;
        }
    }
    cut
}

/// Compacts the virtual log now; false when Pi would refuse (nothing new since
/// the last compaction, or no addressable cut).
///
/// Sharing compactions (a sweep's memo), what follows from the log and the
/// cut settings alone — the cut, the compaction, its probes, entry, summary
/// message, broken pairs and ledger recall — is taken from the memo when
/// another policy made it; the preparation is then made only if something
/// is missing.
fn compact_now(
    st: &mut State<'_, '_>,
    out: &mut Replay,
    trigger: &'static str,
    settings: &Settings,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> bool {
    let prepared = st.prepared;
    // The virtual log's entries, collected only when this compaction makes
    // its cut, its outcome or its probes itself (a policy whose memo holds
    // all three needs none).
    let log_cell: std::cell::OnceCell<Vec<&Entry>> = std::cell::OnceCell::new();
    let log = || log_cell.get_or_init(|| st.log.iter().map(|&s| st.entry(s)).collect()).as_slice();
    let rules = out.policy.pi_rules;
    // Pi would compute tokensBefore from the last recorded usage, which no
    // longer describes the virtual context: use what the replay measured.
    let context_before = st.measured();
    let prepare = || {
        let mut prep = prepare_with(log(), settings, counter, rules).ok()?;
        prep.tokens_before = context_before as f64;
        Some(prep)
    };
    let mut prep = None;
    let shape = st.memo.map(|memo| {
        let parts = st.log.iter().map(|slot| match *slot {
            Slot::Path(_) => memo::LogPart::Path,
            Slot::Virtual(i) => memo::LogPart::Compaction(st.memo_ids[i]),
        });
        (memo, memo::LogShape::new(parts))
    });
    let cut = match &shape {
        Some((memo, shape)) => memo.cut(shape, settings.keep_recent_tokens, counter.name(), rules, || {
            prep = prepare();
            prep.as_ref().map(|p| memo::Cut::of(p, counter))
        }),
        None => {
            prep = prepare();
            prep.as_ref().map(|p| Arc::new(memo::Cut::of(p, counter)))
        }
    };
    let Some(cut) = cut else { return false };
    let (memo_id, shared) = match shape {
        None => (0, None),
        Some((memo, shape)) => {
            let key = memo::Key::new(
                shape,
                &cut,
                context_before as f64,
                &out.policy,
                counter.name(),
                summarizer.name(),
                &st.policy_json,
            );
            let made = memo.outcome(key, || {
                if prep.is_none() {
                    prep = prepare();
                }
                let prep = prep.as_ref()?;
                Some(compact_carrying(
                    log(),
                    prep,
                    &st.ledger,
                    &out.policy,
                    summarizer,
                    counter,
                    None,
                    &prepared.facts,
                ))
            });
            let Some((id, shared)) = made else { return false };
            (id, Some(shared))
        }
    };
    let outcome = match &shared {
        Some(shared) => Arc::clone(&shared.outcome),
        None => {
            let Some(prep) = &prep else { return false };
            Arc::new(compact_carrying(
                log(),
                prep,
                &st.ledger,
                &out.policy,
                summarizer,
                counter,
                None,
                &prepared.facts,
            ))
        }
    };
    let n = out.compactions.len() + 1;
    let id = format!("c{n:07x}");
    let last = st.log.last().map(|&s| st.entry(s));
    let after_entry_id = last.and_then(|e| e.id.clone());
    let timestamp = last.and_then(|e| e.timestamp.clone()).unwrap_or_default();
    // The last user ask is kept when its slot is in the kept range (from the first kept entry on).
    let kept_from = st.first_slot(cut.first_kept_id.as_str());
    let last_ask = st.last_user.map(|i| (prepared.path[i], st.slot_of_path[i]));
    let ask_kept = last_ask.is_some_and(|(_, slot)| kept_from.is_some_and(|k| slot >= k));
    // The probes follow from the log and the cut, both in the memo's key.
    let probes = match shared.as_ref().and_then(|s| s.probes.get().copied()) {
        Some(probes) => probes,
        None => {
            if prep.is_none() {
                prep = prepare();
            }
            let Some(prep) = &prep else { return false };
            let summarized: Vec<&AgentMessage<'_>> =
                prep.messages_to_summarize.iter().chain(&prep.turn_prefix_messages).collect();
            let made =
                probes::probe(&summarized, &outcome, last_ask.and_then(|(e, _)| e.message()), ask_kept);
            match &shared {
                Some(shared) => *shared.probes.get_or_init(|| made),
                None => made,
            }
        }
    };
    drop(prep);
    let head = Head { id: &id, parent_id: after_entry_id.as_deref(), timestamp: &timestamp };
    let made = || entry_line::virtual_entry(&outcome, &head).ok().map(Arc::new);
    let entry = match &shared {
        Some(shared) => shared.entry.get_or_init(made).clone(),
        None => made(),
    };
    let Some(entry) = entry else { return false };
    let first_kept = cut.first_kept_id.as_str();
    st.arena.push(entry);
    st.memo_ids.push(memo_id);
    st.push(Slot::Virtual(st.arena.len() - 1));
    // The new context: the summary, then the kept entries up to the compaction.
    let start = st.first_slot(first_kept).unwrap_or(st.log.len() - 1);
    let summary_entry = st.entry(st.log[st.log.len() - 1]);
    let summary_message = || sessionlog_context::assemble::message_of(summary_entry);
    // Tool results whose call the new context lost (the log and the cut, both in the memo's key).
    let broken = || {
        let mut messages: Vec<AgentMessage<'_>> = Vec::new();
        messages.extend(summary_message());
        messages.extend(
            st.log[start..st.log.len() - 1].iter().filter_map(|&slot| context_message(st.entry(slot))),
        );
        check_pairs(&messages)
            .into_iter()
            .filter(|issue| matches!(issue, PairingIssue::OrphanResult { call_id, .. } if prepared.calls.contains(call_id.as_str())))
            .count() as u64
    };
    let broken = match &shared {
        Some(shared) => *shared.broken.get_or_init(broken),
        None => broken(),
    };
    let memo = st.memo;
    let item_of = |m: AgentMessage<'_>| Item {
        tokens: counter.tokens_for(&m.message, out.policy.pi_rules),
        ids: match memo {
            // Summaries repeat their predecessors' lines: each line's identifiers found once.
            Some(memo) => prepared.summary_numbers(&m, memo),
            None => prepared.numbers_of(&m),
        },
    };
    let summary_item = match &shared {
        Some(shared) => shared
            .summary
            .get_or_init(|| summary_message().map(item_of).map(|i| (i.tokens, i.ids)))
            .clone()
            .map(|(tokens, ids)| Item { tokens, ids }),
        None => summary_message().map(item_of),
    };
    let summary_tokens = summary_item.as_ref().map_or(0, |i| i.tokens);
    let named: &[u32] = summary_item.as_ref().map_or(&[], |i| &i.ids);
    // The resolved ledger follows from the outcomes of the log's compactions,
    // in order: policies whose outcomes so far are the same share it.
    st.ledger = match memo {
        Some(memo) => {
            let before = &st.ledger;
            memo.ledger(&st.memo_ids, || {
                let mut ledger = Ledger::clone(before);
                ledger.apply(&outcome.ledger);
                ledger
            })
        }
        None => {
            let mut ledger = std::mem::take(&mut st.ledger);
            Arc::make_mut(&mut ledger).apply(&outcome.ledger);
            ledger
        }
    };
    st.ledger_pending.push(Arc::clone(&outcome));
    extend_history(st, first_kept);
    // The ledger and the history follow from the log and the cut too.
    let secrets = out.policy.secret_policy;
    let recall = match shared.as_ref().and_then(|shared| shared.recall.get().copied()) {
        Some(recall) => recall,
        None => {
            sync_ledger(st);
            let made = || ledger_recall(st, &outcome, named, secrets);
            match &shared {
                Some(shared) => *shared.recall.get_or_init(made),
                None => made(),
            }
        }
    };
    st.ledger_kept += recall.kept;
    st.visible_kept += recall.visible;
    out.metrics.ledger_identifiers += recall.identifiers;
    // Kept path entries reuse their items; virtual compactions emit nothing.
    st.in_context = st.log[start..st.log.len() - 1]
        .iter()
        .filter_map(|slot| match slot {
            Slot::Path(i) if st.items[*i].is_some() => Some(*i),
            _ => None,
        })
        .collect();
    let kept: Vec<Item> = st.in_context.iter().filter_map(|&i| st.items[i].clone()).collect();
    let items: Vec<Item> = summary_item.into_iter().chain(kept).collect();
    st.total = 0;
    st.in_ctx.fill(0);
    for item in &items {
        st.add(item);
    }
    out.metrics.summary_tokens += summary_tokens;
    out.metrics.broken_tool_pairs += broken;
    let context_after = st.measured();
    let reclaimed_tokens = context_before.saturating_sub(context_after);
    let reclaimed_ratio =
        if context_before == 0 { 0.0 } else { reclaimed_tokens as f64 / context_before as f64 };
    let noop = reclaimed_ratio < out.policy.noop_reclaim_share;
    if noop && out.policy.skip_noop_compactions {
        // OpenClaw's fix: not repeated until the context has grown by that share again.
        let share = (out.policy.noop_reclaim_share * context_after as f64).ceil() as u64;
        st.noop_guard_until = Some(context_after + share);
    }
    out.compactions.push(VirtualCompaction {
        id,
        after_entry_id,
        trigger,
        summarized_from: cut.summarized_from.clone(),
        summarized_to: cut.summarized_to.clone(),
        context_before,
        context_after,
        below_threshold: !out.policy.should_compact(outcome.tokens_before),
        identifiers_before: recall.identifiers,
        ledger_recall: recall.ledger(),
        visible_identifier_recall: recall.visible(),
        model_call: out.metrics.model_calls,
        reclaimed_tokens,
        reclaimed_ratio,
        noop,
        probes,
        outcome,
    });
    true
}

#[cfg(test)]
mod tests {
    use sessionlog_compaction::Extractive;
    use sessionlog_tokens::PiEstimator;

    use super::*;

    const UUID: &str = "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f";

    thread_local! {
        /// Identifiers that [`check_against_joined_text`] found in the
        /// ledger's joined text only (neither in the ledger nor the summary).
        static FOUND_IN_LEDGER_TEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Checks a `ledger_recall` (each one these tests make) against the
    /// computation it replaced: the ledger's identifiers joined with `\n`
    /// into one text, searched with `str::contains` for every identifier
    /// neither in the ledger nor in the summary.
    pub(super) fn check_against_joined_text(
        st: &State<'_, '_>,
        outcome: &Outcome,
        named: &[u32],
        secrets: SecretPolicy,
        recall: &Recall,
    ) {
        let prepared = st.prepared;
        let mut state = st.in_ledger.clone();
        for id in st.ledger.iter().rev().take(outcome.ledger_visible) {
            if let Some(&n) = prepared.id_numbers.get(id) {
                state[n as usize] = 2;
            }
        }
        for &n in named {
            state[n as usize] = 3;
        }
        let joined = st.ledger.iter().collect::<Vec<_>>().join("\n");
        let mut old = Recall::default();
        for &n in &st.history {
            if secrets == SecretPolicy::Reference && prepared.secrets.binary_search(&n).is_ok() {
                continue;
            }
            old.identifiers += 1;
            let text = &*prepared.id_texts[n as usize];
            match state[n as usize] {
                1 => old.kept += 1,
                2 | 3 => {
                    old.kept += 1;
                    old.visible += 1;
                }
                _ if outcome.summary.contains(text) => {
                    old.kept += 1;
                    old.visible += 1;
                }
                _ if joined.contains(text) => {
                    old.kept += 1;
                    FOUND_IN_LEDGER_TEXT.with(|c| c.set(c.get() + 1));
                }
                _ => {}
            }
        }
        assert_eq!(
            (recall.identifiers, recall.kept, recall.visible),
            (old.identifiers, old.kept, old.visible),
            "ledger recall against the joined text's"
        );
    }

    /// The preparation numbers identifiers in order of first appearance along
    /// the path, each number's text the one it is looked up by: against a
    /// numbering made here from each message's text searched whole.
    #[test]
    fn identifiers_are_numbered_in_order_of_first_appearance() {
        let t = generated(5, 500);
        let prepared = Prepared::new(&t).unwrap();
        let mut numbers: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut texts: Vec<String> = Vec::new();
        for (i, e) in prepared.path.iter().enumerate() {
            let Some(m) = context_message(e) else {
                assert!(prepared.ids[i].is_none());
                continue;
            };
            let text = parts(&m.message).texts.join("\n");
            let mut want = Vec::new();
            for id in sessionlog_compaction::ids::extract(&text) {
                let next = numbers.len() as u32;
                let n = *numbers.entry(id.text.clone()).or_insert_with(|| {
                    texts.push(id.text.clone());
                    next
                });
                want.push(n);
            }
            assert_eq!(prepared.ids[i].as_deref(), Some(want.as_slice()), "entry {i}");
        }
        assert!(texts.len() > 100, "{} identifiers", texts.len());
        let got: Vec<&str> = prepared.id_texts.iter().map(|t| &**t).collect();
        assert_eq!(got, texts);
        for (n, text) in texts.iter().enumerate() {
            assert_eq!(prepared.id_numbers.get(text.as_str()), Some(&(n as u32)));
        }
        assert_eq!(prepared.id_numbers.len(), texts.len());
    }

    fn generated(seed: u64, entries: usize) -> Transcript {
        use sessionlog_test_support::{generate, GenOptions};
        let lines =
            generate(GenOptions { seed, entries, branches: 0, compactions: 0, tool_output_chars: 1_200 });
        let header = Entry::parse(&lines[0]).unwrap();
        let entries = lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect();
        Transcript::from_objects(header, entries).unwrap()
    }

    /// The report written straight from its structs is the one written
    /// through a `serde_json::Value` (the keys `file` and `maskingSavings`
    /// inserted after the report's), with and without masking savings,
    /// under Pi's and OpenClaw's policies.
    #[test]
    fn the_json_report_is_the_one_written_through_a_value() {
        for (seed, pi) in [(1, false), (2, true), (3, false)] {
            let t = generated(seed, 500);
            let base = if pi { Policy::pi() } else { Policy::openclaw() };
            let policy = Policy { context_window: 9_000, keep_recent_tokens: 1_500, ..base };
            let r = replay(&t, &policy, &mut Extractive, &PiEstimator, Measure::Usage).unwrap();
            assert!(r.metrics.compactions > 0);
            let savings = MaskingSavings::of(&r.metrics, &r.metrics);
            for savings in [None, Some(&savings)] {
                let mut value = serde_json::to_value(&r).unwrap();
                let obj = value.as_object_mut().unwrap();
                obj.insert("file".to_owned(), "dir/a \"file\".jsonl".into());
                if let Some(s) = savings {
                    obj.insert("maskingSavings".to_owned(), serde_json::to_value(s).unwrap());
                }
                let mut want = Vec::new();
                sessionlog_events::json::write_js_pretty(&mut want, &value).unwrap();
                let mut got = Vec::new();
                r.write_json(&mut got, "dir/a \"file\".jsonl", savings).unwrap();
                assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(want).unwrap());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4, ..Default::default() })]

        /// Every compaction's ledger recall equals the joined-text search's
        /// (`check_against_joined_text`, run by each `ledger_recall`), over
        /// generated transcripts and windows.
        #[test]
        fn ledger_recall_equals_the_joined_text_search(
            seed in 0u64..1_000,
            window in 6_000u64..20_000,
            pi in proptest::bool::ANY,
        ) {
            let t = generated(seed, 600);
            let base = if pi { Policy::pi() } else { Policy::openclaw() };
            let policy = Policy { context_window: window, keep_recent_tokens: window / 8, ..base };
            let r = replay(&t, &policy, &mut Extractive, &PiEstimator, Measure::Usage).unwrap();
            proptest::prop_assert!(r.metrics.compactions > 0);
        }
    }

    /// The joined-text search, and so `Ledger::holds`, is reached: some
    /// identifiers of a generated session are kept only inside a longer
    /// identifier of the ledger.
    #[test]
    fn some_identifiers_are_kept_only_inside_a_ledger_identifier() {
        let t = generated(1, 2_000);
        let policy = Policy { context_window: 16_000, keep_recent_tokens: 2_000, ..Policy::openclaw() };
        FOUND_IN_LEDGER_TEXT.with(|c| c.set(0));
        let r = replay(&t, &policy, &mut Extractive, &PiEstimator, Measure::Usage).unwrap();
        assert!(r.metrics.compactions > 3, "{} compactions", r.metrics.compactions);
        assert!(FOUND_IN_LEDGER_TEXT.with(|c| c.get()) > 0, "no identifier only in the ledger's text");
    }

    fn transcript() -> Transcript {
        let pad = "lorem ipsum ".repeat(70);
        let msg = |id: &str, parent: &str, body: String| {
            let parent = if parent.is_empty() { "null".to_owned() } else { format!("\"{parent}\"") };
            Entry::parse(&format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{body}}}"#
            ))
            .unwrap()
        };
        let header = Entry::parse(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        )
        .unwrap();
        let entries = vec![
            msg("u1", "", format!(r#"{{"role":"user","content":"deploy {UUID} to prod {pad}"}}"#)),
            msg(
                "a1",
                "u1",
                format!(
                    r#"{{"role":"assistant","content":[{{"type":"text","text":"ok {pad}"}}],"stopReason":"stop"}}"#
                ),
            ),
            msg("u2", "a1", format!(r#"{{"role":"user","content":"status of {UUID}?"}}"#)),
            msg(
                "a2",
                "u2",
                r#"{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}"#
                    .to_owned(),
            ),
        ];
        Transcript::from_objects(header, entries).unwrap()
    }

    #[test]
    fn a_compaction_keeps_a_later_mentioned_identifier_in_context() {
        // Threshold 300 tokens: the first exchange (~420 tokens) compacts.
        let policy =
            Policy { context_window: 400, reserve_tokens: 100, keep_recent_tokens: 50, ..Policy::pi() };
        let r = replay(&transcript(), &policy, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(r.threshold, 300.0);
        assert_eq!(r.metrics.model_calls, 2);
        // The first run ends over the threshold and compacts; the summary plus
        // the kept reply still fill most of this tiny window, so the second
        // run compacts again.
        assert!(r.metrics.compactions >= 1);
        assert_eq!(r.compactions[0].after_entry_id.as_deref(), Some("a1"));
        assert!(r.compactions.iter().all(|c| c.trigger == "threshold" && !c.outcome.summary.is_empty()));
        assert!(
            r.compactions[0].context_before > 300
                && r.compactions[0].context_after < r.compactions[0].context_before
        );
        assert_eq!((r.metrics.identifier_mentions, r.metrics.identifier_hits), (1, 1));
        assert_eq!(r.metrics.identifier_recall, 1.0);
        assert_eq!(r.metrics.broken_tool_pairs, 0);
        // The first call saw only u1; tokens billed is the sum over both calls.
        let first_call = PiEstimator.message_tokens(transcript().entries[0].message().unwrap());
        assert_eq!(r.metrics.peak_context_tokens.max(first_call), r.metrics.peak_context_tokens);
        assert!(r.metrics.tokens_billed >= first_call);
    }

    #[test]
    fn an_oversized_tool_result_is_truncated_when_compaction_cannot_help() {
        let big = "build output line\n".repeat(2_500); // 45000 chars, ~11250 tokens
        let line = |s: String| Entry::parse(&s).unwrap();
        let header = Entry::parse(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        )
        .unwrap();
        let entries = vec![
            line(r#"{"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{"role":"user","content":"build it"}}"#.to_owned()),
            line(r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"make"}}],"stopReason":"toolUse"}}"#.to_owned()),
            line(format!(r#"{{"type":"message","id":"r1","parentId":"a1","timestamp":"t","message":{{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{{"type":"text","text":{}}}],"isError":false}}}}"#, serde_json::to_string(&big).unwrap())),
            line(r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"built"}],"stopReason":"stop"}}"#.to_owned()),
        ];
        let t = Transcript::from_objects(header, entries).unwrap();
        let policy = Policy {
            context_window: 8_000,
            reserve_tokens: 1_000,
            keep_recent_tokens: 20_000,
            ..Policy::pi()
        };
        let r = replay(&t, &policy, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(r.metrics.truncated_tool_results, 1);
        // 30% of 8000 tokens × 4 = 9600 characters kept: the call fits afterwards.
        assert!(r.metrics.peak_context_tokens <= 8_000, "{}", r.metrics.peak_context_tokens);
        assert_eq!(r.metrics.model_calls, 2);
    }

    #[test]
    fn one_preparation_serves_every_policy_with_the_same_results() {
        use sessionlog_test_support::{generate, GenOptions};
        let lines = generate(GenOptions {
            seed: 11,
            entries: 400,
            branches: 1,
            compactions: 1,
            tool_output_chars: 2_000,
        });
        let header = Entry::parse(&lines[0]).unwrap();
        let entries = lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect();
        let t = Transcript::from_objects(header, entries).unwrap();
        let prepared = Prepared::new(&t).unwrap();
        let memo = prepared.counter(&PiEstimator);
        let policies = [
            Policy { context_window: 16_000, keep_recent_tokens: 2_000, ..Policy::openclaw() },
            Policy { context_window: 32_000, keep_recent_tokens: 8_000, ..Policy::pi() },
            Policy {
                context_window: 12_000,
                reserve_tokens: 3_000,
                keep_recent_tokens: 1_000,
                ..Policy::pi()
            },
        ];
        let mut compactions = 0;
        for policy in &policies {
            let shared = replay_prepared(&prepared, policy, &mut Extractive, &memo, Measure::Usage);
            let uncounted = replay_prepared(&prepared, policy, &mut Extractive, &PiEstimator, Measure::Usage);
            let fresh = replay(&t, policy, &mut Extractive, &PiEstimator, Measure::Usage).unwrap();
            assert_eq!(shared, fresh, "{}", policy.name);
            assert_eq!(uncounted, fresh, "{}", policy.name);
            compactions += fresh.metrics.compactions;
        }
        assert!(compactions >= 3, "the policies compact ({compactions})");
    }

    /// Turns of a 1800-character user message (450 tokens) and a 2-character
    /// reply (1 token).
    fn big_turns(turns: usize) -> Transcript {
        let header = Entry::parse(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        )
        .unwrap();
        let ask = "lorem ".repeat(300);
        let mut entries = Vec::new();
        let mut parent = "null".to_owned();
        for k in 1..=turns {
            entries.push(Entry::parse(&format!(r#"{{"type":"message","id":"u{k}","parentId":{parent},"timestamp":"t","message":{{"role":"user","content":"{ask}"}}}}"#)).unwrap());
            entries.push(Entry::parse(&format!(r#"{{"type":"message","id":"a{k}","parentId":"u{k}","timestamp":"t","message":{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"stopReason":"stop"}}}}"#)).unwrap());
            parent = format!("\"a{k}\"");
        }
        Transcript::from_objects(header, entries).unwrap()
    }

    #[test]
    fn reclaimed_tokens_noop_compactions_and_loops_by_hand() {
        // Threshold 2000 − 1100 = 900; everything after the previous
        // compaction is kept (keep 100000), so each compaction summarises
        // nothing and writes the 144-character skeleton (36 tokens); Pi
        // 0.58's cut drops the previous compaction's kept range.
        let policy = Policy {
            context_window: 2_000,
            reserve_tokens: 1_100,
            keep_recent_tokens: 100_000,
            pi_rules: sessionlog_events::PiRules::V0_58,
            ..Policy::pi()
        };
        let r = replay(&big_turns(6), &policy, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        // Call 2 ends at 450+1+450+1 = 902: c1 keeps all of it beside the
        // skeleton, 36 + 902 = 938, reclaiming nothing (a no-op).
        // Call 3 ends at 938 + 451 = 1389: c2 drops c1's kept range, leaving
        // 36 + 451 = 487 (902 reclaimed). Calls 4, 5, 6 each end at
        // 487 + 451 = 938 and come back to 487 (451 reclaimed).
        let got: Vec<(u64, u64, u64, u64, bool)> = r
            .compactions
            .iter()
            .map(|c| (c.model_call, c.context_before, c.context_after, c.reclaimed_tokens, c.noop))
            .collect();
        assert_eq!(
            got,
            [
                (2, 902, 938, 0, true),
                (3, 1_389, 487, 902, false),
                (4, 938, 487, 451, false),
                (5, 938, 487, 451, false),
                (6, 938, 487, 451, false),
            ]
        );
        assert_eq!(r.compactions[2].reclaimed_ratio, 451.0 / 938.0);
        assert_eq!(r.metrics.noop_compactions, 1);
        assert_eq!(r.metrics.reclaimed_tokens, 902 + 3 * 451);
        // Five compactions in five consecutive calls: one loop under a
        // 10-call window; none when 3 compactions must fall within 2 calls.
        assert_eq!(r.metrics.compaction_loops, 1);
        assert_eq!(compaction_loops(&r.compactions, 2), 0);
        assert_eq!(compaction_loops(&r.compactions, 3), 1);
        // A no-op share of 0 counts no compaction as a no-op.
        let strict = Policy { noop_reclaim_share: 0.0, ..policy.clone() };
        let r = replay(&big_turns(6), &strict, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(r.metrics.noop_compactions, 0);
    }

    /// One read of a 400-character file in turn 1, then two short turns:
    /// u1 "read it" (2 tokens), a1 a `read` call (`read` + `{"path":"a.txt"}`,
    /// 20 characters: 5), r1 its result (400 characters: 100), a2 "done"
    /// (1), u2 "next" (1), a3 "ok" (1), u3 "again" (2), a4 "ok" (1).
    pub(crate) fn masking_transcript() -> Transcript {
        let body = "x".repeat(400);
        let lines = [
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{"role":"user","content":"read it"}}"#.to_owned(),
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a.txt"}}],"stopReason":"toolUse"}}"#.to_owned(),
            format!(r#"{{"type":"message","id":"r1","parentId":"a1","timestamp":"t","message":{{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{{"type":"text","text":"{body}"}}],"isError":false}}}}"#),
            r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}"#.to_owned(),
            r#"{"type":"message","id":"u2","parentId":"a2","timestamp":"t","message":{"role":"user","content":"next"}}"#.to_owned(),
            r#"{"type":"message","id":"a3","parentId":"u2","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}"#.to_owned(),
            r#"{"type":"message","id":"u3","parentId":"a3","timestamp":"t","message":{"role":"user","content":"again"}}"#.to_owned(),
            r#"{"type":"message","id":"a4","parentId":"u3","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}"#.to_owned(),
        ];
        from_lines(&lines)
    }

    /// A transcript of these entry lines under a fixed session header.
    fn from_lines(lines: &[String]) -> Transcript {
        let header = Entry::parse(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        )
        .unwrap();
        Transcript::from_objects(header, lines.iter().map(|l| Entry::parse(l).unwrap()).collect()).unwrap()
    }

    #[test]
    fn masking_changes_tokens_billed_by_hand_computed_amounts() {
        let t = masking_transcript();
        let run = |mask: Option<u32>| {
            let policy = Policy { mask_tool_results_after_turns: mask, ..Policy::pi() };
            replay(&t, &policy, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap()
        };
        // Calls a1..a4 see 2, 2+5+100 = 107, 107+1+1 = 109, 109+1+2 = 112.
        let off = run(None);
        assert_eq!(off.metrics.tokens_billed, 2 + 107 + 109 + 112);
        assert_eq!((off.metrics.masked_tool_results, off.metrics.masked_tokens), (0, 0));
        // After 1 turn: r1 is masked before u2's turn; the placeholder
        // (28 characters) is 7 tokens, so calls a3 and a4 see 93 fewer.
        let one = run(Some(1));
        assert_eq!(one.metrics.tokens_billed, 2 + 107 + (109 - 93) + (112 - 93));
        assert_eq!((one.metrics.masked_tool_results, one.metrics.masked_tokens), (1, 93));
        let k = &one.masks[0];
        assert_eq!(
            (k.target_id.as_deref(), k.before_entry_id.as_deref(), k.tokens_before, k.tokens_after),
            (Some("r1"), Some("u2"), 100, 7)
        );
        // After 2 turns: masked before u3's turn; only a4 sees 93 fewer.
        let two = run(Some(2));
        assert_eq!(two.metrics.tokens_billed, 2 + 107 + 109 + (112 - 93));
        // After 3 turns: never (the session has 3 turns); 0 is off.
        assert_eq!(run(Some(3)).metrics.tokens_billed, 330);
        assert_eq!(run(Some(0)).metrics.tokens_billed, 330);
        let saved = MaskingSavings::of(&one.metrics, &off.metrics);
        assert_eq!((saved.tokens_billed_saved, saved.compactions_avoided), (186, 0));
        assert_eq!(saved.tokens_billed_saved_share, 186.0 / 330.0);
        // The mask is a Pi 1.6 context_edit in the virtual log, after a2.
        let lines = one.event_lines().unwrap();
        let edit = lines.iter().find(|e| e.type_name() == Some("context_edit")).expect("a context_edit line");
        assert_eq!(
            edit.raw(),
            r#"{"type":"context_edit","id":"m0000001","parentId":"a2","timestamp":"","targetId":"r1","replacement":{"content":[{"type":"text","text":"[earlier tool output masked]"}]}}"#
        );
    }

    #[test]
    fn masking_avoids_a_compaction_by_hand() {
        // Threshold 200 − 90 = 110. Unmasked, a4's run ends at 112 + 1 = 113
        // and compacts (keeping the last 5 tokens, so there is something to
        // summarise); masked after 1 turn it ends at 19 + 1 = 20.
        let t = masking_transcript();
        let base = Policy { context_window: 200, reserve_tokens: 90, keep_recent_tokens: 5, ..Policy::pi() };
        let off = replay(&t, &base, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(off.metrics.compactions, 1);
        assert_eq!(off.compactions[0].after_entry_id.as_deref(), Some("a4"));
        let masked = Policy { mask_tool_results_after_turns: Some(1), ..base };
        let on = replay(&t, &masked, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(on.metrics.compactions, 0);
        let saved = MaskingSavings::of(&on.metrics, &off.metrics);
        assert_eq!(
            (saved.tokens_billed_saved, saved.compactions_avoided, saved.baseline_compactions),
            (186, 1, 1)
        );
    }

    #[test]
    fn each_compaction_reports_its_probes_and_the_metrics_sum_them() {
        use sessionlog_compaction::Scripted;
        let pad = "lorem ".repeat(340); // 2040 characters: 510 tokens
        let lines = [
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{"role":"user","content":"please fix the bug"}}"#.to_owned(),
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/main.rs"}}],"stopReason":"toolUse"}}"#.to_owned(),
            r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"fn main() {}"}],"isError":false}}"#.to_owned(),
            r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"Read","arguments":{"file_path":"notes.txt"}}],"stopReason":"toolUse"}}"#.to_owned(),
            r#"{"type":"message","id":"r2","parentId":"a2","timestamp":"t","message":{"role":"toolResult","toolCallId":"c2","toolName":"Read","content":[{"type":"text","text":"permission denied: notes.txt"}],"isError":true}}"#.to_owned(),
            r#"{"type":"message","id":"a3","parentId":"r2","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}"#.to_owned(),
            format!(r#"{{"type":"message","id":"u2","parentId":"a3","timestamp":"t","message":{{"role":"user","content":"now run the tests {pad}"}}}}"#),
            r#"{"type":"message","id":"a4","parentId":"u2","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}"#.to_owned(),
        ];
        let t = from_lines(&lines);
        // Tokens: u1 5, a1 7 (`read` + 22 characters of arguments), r1 3,
        // a2 8, r2 7, a3 1, u2 515, a4 1: a4's run ends at 547, over the
        // threshold 1000 − 500 = 500; keeping 300 tokens keeps u2 and a4, so
        // u1..a3 are compacted.
        let policy =
            Policy { context_window: 1_000, reserve_tokens: 500, keep_recent_tokens: 300, ..Policy::pi() };
        let mut s = Scripted::new([Ok("Summary.".to_owned()), Ok("Summary.".to_owned())]);
        let r = replay(&t, &policy, &mut s, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(r.compactions.len(), 1);
        let c = &r.compactions[0];
        assert_eq!(c.context_before, 547);
        assert_eq!((c.summarized_from.as_deref(), c.summarized_to.as_deref()), (Some("u1"), Some("a3")));
        // Files: src/main.rs (Pi's read: in the file lists) and notes.txt
        // (Claude Code's Read: in no list, not in "Summary."): 1 of 2. The
        // failed read is not named (Pi's preset lists no tool failures). The
        // last ask, u2, is kept.
        let p = &c.probes;
        assert_eq!((p.files, p.files_named, p.file_recall), (2, 1, 0.5));
        assert_eq!((p.tool_failures, p.tool_failures_named), (1, 0));
        assert_eq!(p.last_user_ask, probes::AskPresence::Kept);
        let m = &r.metrics;
        assert_eq!((m.probe_files, m.probe_files_named, m.file_recall), (2, 1, 0.5));
        assert_eq!((m.probe_tool_failures, m.tool_failure_recall, m.last_ask_missing), (1, 0.0, 0));
        // With OpenClaw's tool-failure section the failure is named.
        let listed = Policy { tool_failures_section: true, ..policy };
        let mut s = Scripted::new([Ok("Summary.".to_owned()), Ok("Summary.".to_owned())]);
        let r = replay(&t, &listed, &mut s, &PiEstimator, Measure::Estimate).unwrap();
        assert_eq!(
            (r.metrics.probe_tool_failures_named, r.metrics.tool_failure_recall),
            (1, 1.0),
            "{}",
            r.compactions[0].outcome.summary
        );
    }

    #[test]
    fn skip_noop_compactions_skips_the_repeat_of_a_noop_compaction() {
        // Turns 1, 2 and 4 are a 450-token ask and a 1-token reply; turn 3 is
        // "go" / "ok" (1 token each). Threshold 2000 − 1100 = 900; everything
        // since the previous compaction is kept (keep 100000) under Pi 0.58's
        // cut, so a compaction summarises nothing and writes the 36-token
        // skeleton.
        let header = Entry::parse(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        )
        .unwrap();
        let ask = "lorem ".repeat(300);
        let asks = [ask.as_str(), ask.as_str(), "go", ask.as_str()];
        let mut entries = Vec::new();
        let mut parent = "null".to_owned();
        for (k, ask) in asks.iter().enumerate().map(|(k, a)| (k + 1, a)) {
            entries.push(Entry::parse(&format!(r#"{{"type":"message","id":"u{k}","parentId":{parent},"timestamp":"t","message":{{"role":"user","content":"{ask}"}}}}"#)).unwrap());
            entries.push(Entry::parse(&format!(r#"{{"type":"message","id":"a{k}","parentId":"u{k}","timestamp":"t","message":{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"stopReason":"stop"}}}}"#)).unwrap());
            parent = format!("\"a{k}\"");
        }
        let t = Transcript::from_objects(header, entries).unwrap();
        let policy = Policy {
            context_window: 2_000,
            reserve_tokens: 1_100,
            keep_recent_tokens: 100_000,
            pi_rules: sessionlog_events::PiRules::V0_58,
            ..Policy::pi()
        };
        let run = |policy: &Policy| {
            let r = replay(&t, policy, &mut Extractive, &PiEstimator, Measure::Estimate).unwrap();
            let got: Vec<(u64, u64, u64, bool)> = r
                .compactions
                .iter()
                .map(|c| (c.model_call, c.context_before, c.context_after, c.noop))
                .collect();
            (got, r.metrics)
        };
        // Without the option: call 2 ends at 902 and c1 keeps it all (36 +
        // 902 = 938, a no-op); call 3 ends at 938 + 2 = 940, still over 900,
        // and c2 compacts again (dropping c1's kept range: 36 + 2 = 38).
        let (without, m) = run(&policy);
        assert_eq!(without, [(2, 902, 938, true), (3, 940, 38, false)]);
        assert_eq!((m.compactions, m.noop_compactions), (2, 1));
        // Calls see 450, 901, 938 + 1 = 939 and 38 + 450 = 488.
        assert_eq!(m.tokens_billed, 450 + 901 + 939 + 488);
        // With it: after the no-op, no compaction until the context exceeds
        // 938 + ceil(5% of 938) = 985; call 3's 940 is skipped, call 4 ends at
        // 940 + 451 = 1391 and compacts to 36 + (1 + 1 + 450 + 1) = 489.
        let (with, m) = run(&Policy { skip_noop_compactions: true, ..policy.clone() });
        assert_eq!(with, [(2, 902, 938, true), (4, 1_391, 489, false)]);
        assert_eq!((m.compactions, m.noop_compactions), (2, 1));
        assert_eq!(m.tokens_billed, 450 + 901 + 939 + (940 + 450));
    }

    #[test]
    fn the_json_report_names_each_compactions_ledger_change() {
        use sessionlog_compaction::Scripted;
        let pad = "lorem ".repeat(340); // 2040 characters: 510 tokens
        let lines = [
            format!(r#"{{"type":"message","id":"u1","parentId":null,"timestamp":"t","message":{{"role":"user","content":"please deploy {UUID}"}}}}"#),
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok, tracked as OPS-1234"}],"stopReason":"stop"}}"#.to_owned(),
            format!(r#"{{"type":"message","id":"u2","parentId":"a1","timestamp":"t","message":{{"role":"user","content":"now check db.internal:6379 {pad}"}}}}"#),
            r#"{"type":"message","id":"a2","parentId":"u2","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}"#.to_owned(),
            format!(r#"{{"type":"message","id":"u3","parentId":"a2","timestamp":"t","message":{{"role":"user","content":"and again {pad}"}}}}"#),
            r#"{"type":"message","id":"a3","parentId":"u3","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}"#.to_owned(),
        ];
        let t = from_lines(&lines);
        // Threshold 40000 − 39500 = 500; chunks of 40% of the window less
        // 4096 tokens, so each compaction is one request. a2's run ends at
        // about 530 tokens and compacts, keeping u2 on (300 recent tokens):
        // u1 and a1 are summarised as "Summary.", which names neither of
        // their identifiers, so both join the ledger, in order of mention.
        // a3's run ends over 1000 and compacts again, keeping u3 on: under Pi
        // 1.6's cut u2 and a2 are summarised; the summary names OPS-1234,
        // which leaves the ledger, and not db.internal:6379, which joins it.
        let policy = Policy {
            context_window: 40_000,
            reserve_tokens: 39_500,
            keep_recent_tokens: 300,
            ..Policy::pi()
        };
        let mut s = Scripted::new([Ok("Summary.".to_owned()), Ok("Summary naming OPS-1234.".to_owned())]);
        let r = replay(&t, &policy, &mut s, &PiEstimator, Measure::Estimate).unwrap();
        let json = serde_json::to_value(&r).unwrap();
        let c = &json["compactions"];
        assert_eq!(c.as_array().map(Vec::len), Some(2), "{json:#}");
        let first = c[0].as_object().unwrap();
        // The first compaction extends no ledger: no `ledgerBase` (not `null`).
        assert!(!first.contains_key("ledgerBase"), "{first:?}");
        assert_eq!(first["ledgerAdded"], serde_json::json!([UUID, "OPS-1234"]), "{json:#}");
        assert_eq!(first["ledgerDropped"], serde_json::json!([]));
        assert_eq!(first["secretRefsAdded"], serde_json::json!([]));
        let second = c[1].as_object().unwrap();
        assert_eq!(second["id"], "c0000002");
        assert_eq!(second["ledgerBase"], "c0000001");
        assert_eq!(second["ledgerAdded"], serde_json::json!(["db.internal:6379"]));
        assert_eq!(second["ledgerDropped"], serde_json::json!(["OPS-1234"]));
        assert_eq!(second["secretRefsAdded"], serde_json::json!([]));
        // The entries written (`--events-out`) carry the same names in `details`.
        let lines = r.event_lines().unwrap();
        let details: Vec<serde_json::Value> = lines.iter().filter_map(|e| e.field_value("details")).collect();
        assert!(details[0].get("ledgerBase").is_none());
        assert_eq!(details[1]["ledgerBase"], "c0000001");
        assert_eq!(details[1]["ledgerDropped"], serde_json::json!(["OPS-1234"]));
    }

    #[test]
    fn measures_parse() {
        assert_eq!("usage".parse::<Measure>(), Ok(Measure::Usage));
        assert!("guess".parse::<Measure>().is_err());
    }
}

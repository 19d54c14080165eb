//! Compactions shared between the policies of a sweep.
//!
//! The policies of a grid often make the same compaction: the same virtual
//! log, cut at the same place, measured at the same size, summarised under
//! the same summariser and compaction settings. A [`CompactionMemo`] holds the
//! summarisation's [`Outcome`] of each distinct compaction of one transcript,
//! so that every policy after the first one to make it pays a lookup instead
//! of a summarisation.
//!
//! The key is everything `compact_over` reads:
//! - the virtual log, as the number of path entries in it and, for each
//!   virtual compaction in it, its place and its outcome, by number: a
//!   virtual entry is its outcome plus a head its place determines (its id
//!   from its rank, its parent and timestamp from the slot before it), so
//!   compactions made under different keys with equal outcomes (policies
//!   that differ only in a knob that did not change that compaction) leave
//!   the same log, and the compactions after them share keys again; the
//!   chain of those outcomes also determines the identifier ledger the
//!   compaction carries forward, which each compaction stores as its change
//!   to the previous one's;
//! - the cut: first kept path or log index, split-turn start, first kept id,
//!   and how many messages are summarised (the preparation is a function of
//!   the log and the cut);
//! - the context size the compaction was measured at (`tokensBefore`);
//! - the token counter and the summariser, by name;
//! - the policy, as JSON, with only the fields that `compact_over` does not
//!   read blanked: its name, when to compact (trigger, overflow attempts,
//!   no-op and loop rules, memory flush), the summariser it names (the one in
//!   use is keyed by name) and the knobs that only move the cut
//!   (`keepRecentTokens`, `reserveTokensFloor`), which the cut stands for;
//!   when the cut leaves no message to summarise (only a split turn's prefix,
//!   or nothing new), or summarises them all in one chunk that no pruning
//!   or oversized message changes ([`Cut::one_chunk`]), also the knobs that
//!   only shape the chunks (`contextWindow`: chunk size, history pruning,
//!   oversized messages; `chunkRatio`), which then shape nothing;
//! - the reserve in force when a request is sent (its `max_tokens`): it
//!   follows from the window and the reserve floor, which may be blanked.
//!   Any other field — a new one included — stays in the key, so a field
//!   added later can cost hits, never change a result.
//!
//! The cut itself is kept too, by what it reads ([`CutKey`]: the log as
//! above, the recent tokens kept, the counter and the rule set), so a policy
//! whose cut another policy made takes it from the memo instead of preparing
//! the compaction again; the preparation is made only for a compaction, or
//! something that follows from it, not made yet.
//!
//! Besides the outcome, each key keeps what follows from it alone: the
//! virtual entry, the probes, the tool results the new context leaves
//! without their call, the ledger recall (the ledger and the history it is
//! checked against follow from the chain of outcomes in the log and the
//! cut), and the summary message's tokens and identifiers (the last shared
//! by the keys whose outcomes are equal, under the same counter and rule
//! set). Equal outcomes are found by a hash of their summary text.
//!
//! The summary messages' identifiers are found line by line, each distinct
//! line once per transcript ([`CompactionMemo::known_ids`]): a summary
//! repeats most of its predecessor's lines (the previous summary is the
//! next request's seed), and no identifier spans a line break.
//!
//! The memo also keeps the token count of each tool result cut by overflow
//! recovery, by path entry, size and counter: every policy whose window
//! overflows cuts the same results to the same sizes.
//!
//! Below the compactions, the memo keeps every summariser request with its
//! answer ([`Answering`]): compactions under different keys often send the
//! same request (the same chunk of history after the same previous summary,
//! or the same chunks under two chunk sizes), and each is answered once.
//!
//! The summariser must answer a request from the request alone (extractive,
//! recorded, a model through its cache): the memo skips its calls.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sessionlog_compaction::ids::{extract, IdClass};
use sessionlog_compaction::policy::{SAFETY_MARGIN, SUMMARIZATION_OVERHEAD_TOKENS};
use sessionlog_compaction::{
    Ledger, Outcome, Policy, RequestKind, Summarizer, SummarizerError, SummaryRequest,
};
use sessionlog_context::cut::Preparation;
use sessionlog_context::AgentMessage;
use sessionlog_events::{Entry, PiRules};
use sessionlog_tokens::TokenCounter;

use crate::probes::Probes;
use crate::Recall;

/// The memo's maps, hashed with foldhash (only looked up, never iterated).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Whether sweeps share compactions between policies (on unless
/// `SESSIONLOG_SWEEP_MEMO=0`; the switch exists to compare the two).
pub fn enabled_by_env() -> bool {
    std::env::var("SESSIONLOG_SWEEP_MEMO").map_or(true, |v| v != "0")
}

/// The distinct compactions made so far over one transcript, shared by
/// every policy replayed against it (thread-safe).
#[derive(Debug, Default)]
pub struct CompactionMemo {
    table: Mutex<Table>,
    /// The tokens of each path entry's tool result cut to a size (by
    /// path index, size and counter), `None` when it fits.
    truncated: Mutex<HashMap<Truncation, Option<u64>>>,
    /// Every summariser request answered so far with its answer, by a hash
    /// of the summariser's name and the request (failures are not kept).
    answers: Mutex<HashMap<u64, Vec<Answer>>>,
    /// The cut of each log under each cut setting (`None`: Pi refuses to compact).
    cuts: Mutex<HashMap<CutKey, Option<Arc<Cut>>>>,
    /// The resolved identifier ledger after each chain of compaction
    /// outcomes (by number, in log order) made so far.
    ledgers: Mutex<HashMap<Box<[u32]>, Arc<Ledger>>>,
    /// The known identifiers of each summary line seen so far (see [`CompactionMemo::known_ids`]).
    lines: Mutex<HashMap<Box<str>, LineIds>>,
    hits: AtomicU64,
    misses: AtomicU64,
    answered: AtomicU64,
}

/// A summariser's successful answer to a request (the summariser by name).
type Answer = (String, SummaryRequest, String);

/// The known identifiers of a line: (class, number) pairs.
type LineIds = Arc<[(IdClass, u32)]>;

/// A tool result cut: its path index, the size it is cut to and the counter.
type Truncation = (usize, usize, &'static str);

/// The compactions by key, with the number of their outcome.
#[derive(Debug, Default)]
struct Table {
    by_key: HashMap<Key, (u32, Arc<Shared>)>,
    /// The first compaction made with each distinct outcome, by number.
    outcomes: Vec<Arc<Shared>>,
    /// The numbers of the outcomes by a hash of their summary text.
    by_summary: HashMap<u64, Vec<u32>>,
    /// The summary message of each outcome (by number) under a counter and rule set.
    summaries: HashMap<(u32, String, PiRules), Arc<OnceLock<SummaryItem>>>,
}

/// The summary message's tokens and identifier numbers.
pub(crate) type SummaryItem = Option<(u64, Arc<[u32]>)>;

/// One distinct compaction: its outcome and what follows from it and its
/// key alone — the virtual entry (its head comes from the log the key
/// names), the summary message's token count and identifiers (shared by
/// every key with an equal outcome, counter and rule set), the probes (the
/// summarised messages and the last user ask's place follow from the log and
/// the cut), the broken tool pairs of the new context and the ledger recall.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The summarisation's result (each policy's virtual compaction holds it too).
    pub(crate) outcome: Arc<Outcome>,
    /// The virtual compaction entry (`None`: it could not be written).
    pub(crate) entry: OnceLock<Option<Arc<Entry>>>,
    /// The summary message's tokens and identifier numbers.
    pub(crate) summary: Arc<OnceLock<SummaryItem>>,
    /// The compaction's quality probes.
    pub(crate) probes: OnceLock<Probes>,
    /// Tool results of the new context whose call it lost.
    pub(crate) broken: OnceLock<u64>,
    /// The identifiers of the history the compaction had to keep, and kept.
    pub(crate) recall: OnceLock<Recall>,
}

/// The virtual log as the memo sees it (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LogShape {
    /// Path entries in the virtual log.
    path_entries: usize,
    /// Each virtual compaction in the log: path entries before it, the number of its outcome.
    compactions: Vec<(usize, u32)>,
}

impl LogShape {
    /// The shape of a log described by `parts`, slot by slot.
    pub(crate) fn new(parts: impl Iterator<Item = LogPart>) -> LogShape {
        let mut shape = LogShape { path_entries: 0, compactions: Vec::new() };
        for part in parts {
            match part {
                LogPart::Path => shape.path_entries += 1,
                LogPart::Compaction(id) => shape.compactions.push((shape.path_entries, id)),
            }
        }
        shape
    }
}

/// What a cut reads: the log, the recent tokens kept (the only cut setting
/// Pi's `prepareCompaction` reads), the token counter and the Pi rule set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CutKey {
    log: LogShape,
    keep_recent: u64,
    counter: String,
    rules: PiRules,
}

/// A compaction's cut, as much of its preparation as the key and the replay
/// read (the preparation is a function of the log and the cut settings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Cut {
    first_kept: usize,
    turn_start: Option<usize>,
    split_turn: bool,
    /// The id of the first kept entry.
    pub(crate) first_kept_id: String,
    summarized: usize,
    turn_prefix: usize,
    has_previous: bool,
    /// The first summarised message's entry id.
    pub(crate) summarized_from: Option<String>,
    /// The last summarised message's entry id.
    pub(crate) summarized_to: Option<String>,
    /// The summarised messages' tokens (under the cut key's counter), summed.
    summarized_tokens: u64,
    /// The largest summarised message's tokens.
    largest: u64,
    /// The split turn prefix's tokens, summed.
    prefix_tokens: u64,
}

impl Cut {
    /// The cut of `prep`, its messages counted by `counter`.
    pub(crate) fn of(prep: &Preparation<'_>, counter: &dyn TokenCounter) -> Cut {
        let mut summarized = prep.messages_to_summarize.iter().chain(&prep.turn_prefix_messages);
        let summarized_from = summarized.next().and_then(|m| m.entry.id.clone());
        let summarized_to = summarized.next_back().map_or(summarized_from.clone(), |m| m.entry.id.clone());
        let tokens = |m: &AgentMessage<'_>| counter.message_tokens(&m.message);
        let (mut summarized_tokens, mut largest) = (0u64, 0u64);
        for t in prep.messages_to_summarize.iter().map(tokens) {
            summarized_tokens += t;
            largest = largest.max(t);
        }
        Cut {
            summarized_tokens,
            largest,
            prefix_tokens: prep.turn_prefix_messages.iter().map(tokens).sum(),
            first_kept: prep.cut.first_kept,
            turn_start: prep.cut.turn_start,
            split_turn: prep.cut.is_split_turn,
            first_kept_id: prep.first_kept_entry_id.clone(),
            summarized: prep.messages_to_summarize.len(),
            turn_prefix: prep.turn_prefix_messages.len(),
            has_previous: prep.previous_summary.is_some(),
            summarized_from,
            summarized_to,
        }
    }

    /// Whether the pipeline (`compact_carrying`) summarises this cut's
    /// messages under `policy`, measured at `tokens_before`, in one chunk
    /// with nothing the window or the chunk ratio decide: no history-share
    /// pruning (the new content fits `window × maxHistoryShare × 1.2`), all
    /// the messages to summarise within one chunk (`⌊(⌊window × ratio⌋ −
    /// 4,096) / 1.2⌋` tokens, so no staged split either) and none oversized
    /// (`tokens × 1.2 > window / 2`, read only if the summariser fails).
    /// The pipeline then reads the window only through the reserve in force
    /// (the requests' `max_tokens`, which the key holds), so policies that
    /// differ only in the window or the chunk ratio make the same
    /// summarisation. Sufficient, not necessary: the split turn's prefix is
    /// summarised alone, unchunked, and the preserved turns only shrink what
    /// is chunked. Mirrors `run_pipeline`'s arithmetic; the test
    /// `one_chunk_cuts_summarise_alike_under_any_window` checks it against
    /// the pipeline.
    fn one_chunk(&self, policy: &Policy, tokens_before: f64) -> bool {
        let window = policy.context_window as f64;
        let count = self.summarized + self.turn_prefix;
        let all_tokens = self.summarized_tokens + self.prefix_tokens;
        let avg = if count == 0 { 0.0 } else { all_tokens as f64 / count as f64 };
        let max_chunk = ((window * policy.chunk_ratio_for(avg)).floor() as u64)
            .saturating_sub(SUMMARIZATION_OVERHEAD_TOKENS)
            .max(1);
        let chunk = ((max_chunk as f64 / SAFETY_MARGIN).floor() as u64).max(1);
        let new_content = (tokens_before - all_tokens as f64).max(0.0).floor();
        let max_history = (window * policy.max_history_share * SAFETY_MARGIN).floor();
        // Pruning drops the oldest messages while the rest exceed this.
        let budget = ((window * policy.max_history_share).floor() as u64).max(1);
        let unpruned = new_content <= max_history || self.summarized_tokens <= budget;
        let oversized = self.largest as f64 * SAFETY_MARGIN > 0.5 * window;
        unpruned && self.summarized_tokens <= chunk && !oversized
    }
}

/// What a compaction is determined by (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The virtual log.
    log: LogShape,
    /// The cut.
    cut: Cut,
    /// `tokensBefore`, as bits.
    tokens_before: u64,
    counter: String,
    summarizer: String,
    /// The Pi rule set (also in the policy's JSON).
    rules: PiRules,
    /// The reserve in force when a summariser request is sent (its
    /// `max_tokens` follow from it; it also follows from the window and the
    /// reserve floor, which may be blanked below).
    reserve: Option<u64>,
    /// The policy's JSON with the fields `compact_over` does not read blanked.
    policy: Arc<str>,
}

/// A policy's blanked JSON for [`Key`], made once per replay for each of
/// the two blankings (with and without the window and the chunk ratio).
pub(crate) type PolicyJson = [std::cell::OnceCell<Arc<str>>; 2];

/// One virtual log slot as the memo sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LogPart {
    /// A path entry.
    Path,
    /// A virtual compaction whose outcome has this number.
    Compaction(u32),
}

impl Key {
    /// The key of a compaction over `log` cut at `cut`, measured at `tokens_before`.
    pub(crate) fn new(
        log: LogShape,
        cut: &Cut,
        tokens_before: f64,
        policy: &Policy,
        counter: &str,
        summarizer: &str,
        json: &PolicyJson,
    ) -> Key {
        // With no message to summarise there is no chunking, pruning or
        // oversized message, and with all of them in one chunk none that the
        // window decides: the window and the chunk ratio shape nothing.
        let unshaped = cut.summarized == 0 || cut.one_chunk(policy, tokens_before);
        let blank = || Policy {
            context_window: if unshaped { 0 } else { policy.context_window },
            chunk_ratio: if unshaped { None } else { policy.chunk_ratio },
            name: String::new(),
            trigger: Policy::pi().trigger,
            max_overflow_attempts: 0,
            memory_flush: None,
            noop_reclaim_share: 0.0,
            skip_noop_compactions: false,
            loop_window_calls: 0,
            summarizer: None,
            keep_recent_tokens: 0,
            reserve_tokens_floor: 0,
            ..policy.clone()
        };
        let policy_json = json[usize::from(unshaped)]
            .get_or_init(|| {
                let blanked = blank();
                // Serialising a policy cannot fail (no maps with non-string keys).
                serde_json::to_string(&blanked).unwrap_or_else(|e| format!("{blanked:?} {e}")).into()
            })
            .clone();
        Key {
            log,
            cut: cut.clone(),
            tokens_before: tokens_before.to_bits(),
            counter: counter.to_owned(),
            summarizer: summarizer.to_owned(),
            rules: policy.pi_rules,
            reserve: (cut.summarized + cut.turn_prefix > 0).then(|| policy.effective_reserve()),
            policy: policy_json,
        }
    }
}

impl CompactionMemo {
    /// An empty memo.
    pub fn new() -> CompactionMemo {
        CompactionMemo::default()
    }

    /// The cut of the log `log` keeping `keep_recent` tokens under
    /// `counter` and `rules`, made by `make` the first time (`None`: Pi
    /// refuses to compact there).
    pub(crate) fn cut(
        &self,
        log: &LogShape,
        keep_recent: u64,
        counter: &str,
        rules: PiRules,
        make: impl FnOnce() -> Option<Cut>,
    ) -> Option<Arc<Cut>> {
        let key = CutKey { log: log.clone(), keep_recent, counter: counter.to_owned(), rules };
        let lock = || self.cuts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = lock().get(&key) {
            return known.clone();
        }
        let made = make().map(Arc::new);
        lock().entry(key).or_insert(made).clone()
    }

    /// The compaction under `key` and the number of its outcome (equal
    /// outcomes, equal numbers), its outcome made by `make` the first time
    /// (`None` when `make` cannot make it).
    pub(crate) fn outcome(
        &self,
        key: Key,
        make: impl FnOnce() -> Option<Outcome>,
    ) -> Option<(u32, Arc<Shared>)> {
        if let Some((id, shared)) = self.lock().by_key.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Some((*id, Arc::clone(shared)));
        }
        // Made outside the lock: another policy may make the same one meanwhile; the first stored wins.
        let outcome = make()?;
        let hash = foldhash::fast::FixedState::default().hash_one(&outcome.summary);
        self.misses.fetch_add(1, Ordering::Relaxed);
        let mut table = self.lock();
        let Table { by_key, outcomes, by_summary, summaries } = &mut *table;
        if let Some((id, shared)) = by_key.get(&key) {
            return Some((*id, Arc::clone(shared)));
        }
        let candidates = by_summary.entry(hash).or_default();
        let same = candidates.iter().copied().find(|&id| *outcomes[id as usize].outcome == outcome);
        let id = same.unwrap_or(outcomes.len() as u32);
        let summary = Arc::clone(summaries.entry((id, key.counter.clone(), key.rules)).or_default());
        let shared = Arc::new(Shared {
            outcome: Arc::new(outcome),
            entry: OnceLock::new(),
            summary,
            probes: OnceLock::new(),
            broken: OnceLock::new(),
            recall: OnceLock::new(),
        });
        if same.is_none() {
            candidates.push(id);
            outcomes.push(Arc::clone(&shared));
        }
        by_key.insert(key, (id, Arc::clone(&shared)));
        Some((id, shared))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A poisoned memo still holds whole entries (each inserted in one step).
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokens of path entry `index`'s tool result cut to `max`
    /// characters under `counter` (`None`: it fits), made by `make` the
    /// first time.
    pub(crate) fn truncated(
        &self,
        index: usize,
        max: usize,
        counter: &'static str,
        make: impl FnOnce() -> Option<u64>,
    ) -> Option<u64> {
        let key = (index, max, counter);
        let known = self.truncated.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied();
        known.unwrap_or_else(|| {
            let made = make();
            self.truncated.lock().unwrap_or_else(|e| e.into_inner()).insert(key, made);
            made
        })
    }

    /// The resolved ledger after the compactions whose outcomes are
    /// `chain` (by number, in log order), made by `make` the first time:
    /// it follows from those outcomes alone (each is a change to the one before).
    pub(crate) fn ledger(&self, chain: &[u32], make: impl FnOnce() -> Ledger) -> Arc<Ledger> {
        let lock = || self.ledgers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = lock().get(chain) {
            return Arc::clone(known);
        }
        let made = Arc::new(make());
        Arc::clone(lock().entry(chain.into()).or_insert(made))
    }

    /// The identifiers of `text` (those of [`extract`]) that `number`
    /// numbers, as (class, number) pairs, sorted and without repeats; each
    /// distinct line of the texts asked about is extracted once.
    ///
    /// Line by line is the same set: `extract` searches each
    /// whitespace-separated chunk of a text on its own (no identifier holds
    /// whitespace), so a text's identifiers are the union of its lines'.
    /// `number` must be the same function at every call on one memo (the
    /// prepared transcript's identifier table).
    pub(crate) fn known_ids(&self, text: &str, number: impl Fn(&str) -> Option<u32>) -> Vec<(IdClass, u32)> {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for line in text.split('\n') {
            match lines.get(line) {
                Some(known) => out.extend_from_slice(known),
                None => {
                    let made: LineIds = extract(line)
                        .into_iter()
                        .filter_map(|id| Some((id.class, number(&id.text)?)))
                        .collect();
                    out.extend_from_slice(&made);
                    lines.insert(line.into(), made);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The answer of summariser `name` to `request`, asked of it by `ask`
    /// the first time any policy of the transcript sends that request.
    fn answer(
        &self,
        name: &str,
        request: &SummaryRequest,
        ask: impl FnOnce() -> Result<String, SummarizerError>,
    ) -> Result<String, SummarizerError> {
        let hash = {
            let mut h = foldhash::fast::FixedState::default().build_hasher();
            name.hash(&mut h);
            let SummaryRequest { kind, messages, conversation, previous_summary, instructions, max_tokens } =
                request;
            match *kind {
                RequestKind::Chunk { index, count } => (0u8, index, count).hash(&mut h),
                RequestKind::Merge => 1u8.hash(&mut h),
                RequestKind::TurnPrefix => 2u8.hash(&mut h),
            }
            // The messages' texts are left out (their entry ids, roles and
            // lengths tell requests apart; a conversation, when one is sent,
            // is their serialisation): requests are compared in full on a
            // hash match, so a collision costs a comparison, never an answer.
            for m in messages {
                (&m.entry_id, &m.role, m.text.len()).hash(&mut h);
            }
            (conversation, previous_summary, instructions, max_tokens).hash(&mut h);
            h.finish()
        };
        let lock = || self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let known = lock().get(&hash).and_then(|answers| {
            answers.iter().find(|(n, r, _)| n == name && r == request).map(|(_, _, a)| a.clone())
        });
        if let Some(text) = known {
            self.answered.fetch_add(1, Ordering::Relaxed);
            return Ok(text);
        }
        let answer = ask();
        // A failure is not kept: it may be transient (a model call), and
        // each policy asking again must get what it would get alone.
        if let Ok(text) = &answer {
            lock().entry(hash).or_default().push((name.to_owned(), request.clone(), text.clone()));
        }
        answer
    }

    /// Summariser requests answered from the memo (asked before by another
    /// compaction of the transcript).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Distinct compaction outcomes made (at most the misses: two keys can
    /// make equal outcomes).
    pub fn distinct(&self) -> u64 {
        self.lock().outcomes.len() as u64
    }

    /// Compactions answered from the memo.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Compactions summarised (and stored).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

/// A summariser whose answers are shared through a [`CompactionMemo`]: a
/// request any compaction of the transcript already sent (the same chunk of
/// history under another cut or another window, say) is answered from the
/// memo instead of being summarised again.
pub(crate) struct Answering<'m> {
    /// The summariser asked the first time.
    pub(crate) inner: Box<dyn Summarizer>,
    /// Where the answers are kept.
    pub(crate) memo: &'m CompactionMemo,
}

impl Summarizer for Answering<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        let Answering { inner, memo } = self;
        let name = inner.name().to_owned();
        memo.answer(&name, request, || inner.summarize(request))
    }

    fn reads_conversation(&self) -> bool {
        self.inner.reads_conversation()
    }

    fn begin(&mut self, first_kept_entry_id: &str) {
        self.inner.begin(first_kept_entry_id);
    }

    fn whole_summary(&mut self) -> Option<String> {
        self.inner.whole_summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sessionlog_compaction::{LedgerDelta, SummaryMessage};

    fn request(text: &str) -> SummaryRequest {
        SummaryRequest {
            kind: RequestKind::Chunk { index: 0, count: 1 },
            messages: Vec::new(),
            conversation: text.to_owned(),
            previous_summary: None,
            instructions: String::new(),
            max_tokens: 100,
        }
    }

    /// Every identifier of a text, numbered in order of first mention: the
    /// whole-text extraction, the reference for the line-by-line one.
    fn numbered(text: &str) -> Vec<String> {
        let mut texts: Vec<String> = Vec::new();
        for id in extract(text) {
            if !texts.contains(&id.text) {
                texts.push(id.text);
            }
        }
        texts
    }

    #[test]
    fn known_ids_by_line_are_the_whole_texts_identifiers() {
        let memo = CompactionMemo::new();
        let first = "## Decisions\n- deploy 3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f to db.internal:6379\n\
                     - see https://example.com/a/b?x=1 and OPS-1234\nplain words only";
        // The next summary repeats lines of the first, adds one and drops one.
        let second = "## Decisions\n- see https://example.com/a/b?x=1 and OPS-1234\n\
                      - ticket ABC-77 in /srv/app/main.rs, commit 9fceb02d0ae598e95dc970b74767f19372d61af8\n\
                      - deploy 3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f to db.internal:6379";
        let table = numbered(&format!("{first}\n{second}"));
        assert!(table.len() >= 7, "{table:?}");
        // Only some identifiers are known (those a path message mentions).
        let known =
            |text: &str| table.iter().position(|t| t == text).filter(|n| n % 3 != 1).map(|n| n as u32);
        for text in [first, second, first, "", "\n\n", second] {
            let mut expected: Vec<(IdClass, u32)> =
                extract(text).into_iter().filter_map(|id| Some((id.class, known(&id.text)?))).collect();
            expected.sort_unstable();
            assert_eq!(memo.known_ids(text, known), expected, "{text}");
        }
        // Each distinct line was extracted once: the cache holds each line once.
        let mut lines: Vec<&str> = first.split('\n').chain(second.split('\n')).chain([""]).collect();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(memo.lines.lock().unwrap().len(), lines.len());
    }

    proptest::proptest! {
        /// Texts of identifier-like and plain fragments under any separators:
        /// line by line, through a cache shared by every text, is the whole
        /// text's extraction.
        #[test]
        fn known_ids_match_the_whole_texts_extraction(
            texts in proptest::collection::vec(
                proptest::collection::vec((0usize..FRAGMENTS.len(), 0usize..SEPARATORS.len()), 0..24),
                1..6,
            )
        ) {
            let memo = CompactionMemo::new();
            let texts: Vec<String> = texts
                .iter()
                .map(|parts| parts.iter().map(|&(f, s)| format!("{}{}", FRAGMENTS[f], SEPARATORS[s])).collect())
                .collect();
            let table = numbered(&texts.join("\n"));
            let known = |text: &str| table.iter().position(|t| t == text).filter(|n| n % 4 != 3).map(|n| n as u32);
            for text in &texts {
                let mut expected: Vec<(IdClass, u32)> =
                    extract(text).into_iter().filter_map(|id| Some((id.class, known(&id.text)?))).collect();
                expected.sort_unstable();
                expected.dedup();
                proptest::prop_assert_eq!(memo.known_ids(text, known), expected);
            }
        }
    }

    const FRAGMENTS: &[&str] = &[
        "deploy",
        "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f",
        "https://example.com/a/b?x=1",
        "db.internal:6379",
        "OPS-1234",
        "/srv/app/main.rs",
        "9fceb02d0ae598e95dc970b74767f19372d61af8",
        "10.0.0.12",
        "ops@example.com",
        "sk-abcdefghijklmnopqrstuvwx12",
        "(see",
        "),",
        "x",
        "-",
        ":",
        "**",
    ];

    const SEPARATORS: &[&str] = &["", " ", "\n", "\n\n", "\t", ", ", "/"];

    /// The resolved ledger after each chain of outcomes, as `apply` makes
    /// it: `added`'s identifiers (`ledger(&["a"])` holds `a`).
    fn ledger(added: &[&str]) -> Ledger {
        let mut l = Ledger::default();
        l.apply(&LedgerDelta {
            added: added.iter().map(|&a| a.to_owned()).collect(),
            ..LedgerDelta::default()
        });
        l
    }

    /// A resolved ledger is kept by the whole chain of outcomes that made it,
    /// not by its last outcome: two policies whose compactions part and then
    /// end in equal outcomes (equal changes to different ledgers) carry
    /// different ledgers. The sweep's fixtures never end two chains in one
    /// outcome (keying on the last outcome alone leaves the 102-policy grid's
    /// rows unchanged), so this is checked on the memo itself.
    #[test]
    fn a_ledger_is_kept_by_its_whole_chain() {
        let memo = CompactionMemo::new();
        assert_eq!(memo.ledger(&[0, 2], || ledger(&["a", "x"])).to_vec(), ["a", "x"]);
        // Another chain ending in outcome 2: its own ledger, made by its own `make`.
        assert_eq!(memo.ledger(&[1, 2], || ledger(&["b", "x"])).to_vec(), ["b", "x"]);
        assert_eq!(memo.ledger(&[2], || ledger(&["x"])).to_vec(), ["x"]);
        // A chain seen before is taken from the memo, not made again.
        let again = memo.ledger(&[0, 2], || panic!("the chain [0, 2] was made before"));
        assert_eq!(again.to_vec(), ["a", "x"]);
        assert_eq!(memo.ledger(&[1, 2], || ledger(&[])).to_vec(), ["b", "x"]);
    }

    /// [`Cut::one_chunk`]'s three bounds, by hand: a 24,000-token window at
    /// chunk ratio 0.9 chunks at ⌊(21,600 − 4,096) / 1.2⌋ = 14,586 tokens,
    /// calls a message oversized above 12,000 / 1.2 = 10,000 tokens and, at
    /// history share 0.5, prunes history above 12,000 tokens when the new
    /// content exceeds ⌊24,000 × 0.5 × 1.2⌋ = 14,400 tokens.
    #[test]
    fn one_chunk_bounds_by_hand() {
        let policy = Policy { context_window: 24_000, chunk_ratio: Some(0.9), ..Policy::openclaw() };
        let cut = |summarized_tokens: u64, largest: u64| Cut {
            first_kept: 3,
            turn_start: None,
            split_turn: false,
            first_kept_id: "k".to_owned(),
            summarized: 2,
            turn_prefix: 0,
            has_previous: false,
            summarized_from: None,
            summarized_to: None,
            summarized_tokens,
            largest,
            prefix_tokens: 0,
        };
        assert!(cut(14_586, 10_000).one_chunk(&policy, 14_586.0));
        assert!(!cut(14_587, 10_000).one_chunk(&policy, 14_587.0), "two chunks");
        assert!(!cut(14_586, 10_001).one_chunk(&policy, 14_586.0), "an oversized message");
        // New content of 14,400 tokens is not pruned, 14,401 is (the history exceeds 12,000).
        assert!(cut(14_586, 10_000).one_chunk(&policy, 28_986.0));
        assert!(!cut(14_586, 10_000).one_chunk(&policy, 28_987.0), "pruned");
        // Within the pruning budget, any new content leaves the history whole.
        assert!(cut(12_000, 10_000).one_chunk(&policy, 1e9));
        assert!(!cut(12_001, 10_000).one_chunk(&policy, 1e9), "pruned");
    }

    /// A transcript of `entries` generated entries (tool outputs of
    /// `tool_chars` characters).
    fn generated(seed: u64, entries: usize, tool_chars: usize) -> sessionlog_events::Transcript {
        use sessionlog_test_support::{generate, GenOptions};
        let lines = generate(GenOptions {
            seed,
            entries,
            branches: 0,
            compactions: 0,
            tool_output_chars: tool_chars,
        });
        let header = Entry::parse(&lines[0]).unwrap();
        let entries = lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect();
        sessionlog_events::Transcript::from_objects(header, entries).unwrap()
    }

    /// The extractive summariser, failing every request that holds a
    /// message longer than `long` characters (so the pipeline falls back to
    /// leaving the oversized messages out).
    struct FailsOnLong {
        long: usize,
    }

    impl Summarizer for FailsOnLong {
        fn name(&self) -> &str {
            "fails-on-long"
        }

        fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
            if request.messages.iter().any(|m| m.text.len() > self.long) {
                return Err(SummarizerError("too long".to_owned()));
            }
            sessionlog_compaction::Extractive.summarize(request)
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// [`Cut::one_chunk`] against the pipeline: every window and chunk
        /// ratio (and history share) under which a cut is one chunk
        /// summarises it into the same outcome (the reserve in force held
        /// equal, as the key holds it), over cuts of generated transcripts at
        /// several sizes of the context measured (pruning or not), with a
        /// summariser that fails on long messages or never fails.
        #[test]
        fn one_chunk_cuts_summarise_alike_under_any_window(
            seed in 0u64..1_000,
            end in 20usize..300,
            tool_chars in proptest::sample::select(vec![400usize, 3_000, 20_000, 48_000]),
            keep in proptest::sample::select(vec![500u64, 2_000, 8_000]),
            extra in 0u64..80_000,
            v1 in proptest::bool::ANY,
            fails_over in proptest::sample::select(vec![usize::MAX, 2_000]),
        ) {
            let t = generated(seed, 300, tool_chars);
            let prepared = crate::Prepared::new(&t).unwrap();
            let counter = prepared.counter(&sessionlog_tokens::PiEstimator);
            let log = &prepared.path[..end.min(prepared.path.len())];
            let rules = if v1 { PiRules::V1_6 } else { PiRules::V0_58 };
            let settings =
                sessionlog_context::cut::Settings { enabled: true, reserve_tokens: 1_000, keep_recent_tokens: keep };
            let Ok(mut prep) = sessionlog_context::cut::prepare_with(log, &settings, &counter, rules) else {
                return Ok(());
            };
            let cut = Cut::of(&prep, &counter);
            prep.tokens_before = (cut.summarized_tokens + cut.prefix_tokens + extra) as f64;
            let mut first: Option<(String, Outcome)> = None;
            let windows = [3_000u64, 6_000, 12_000, 24_000, 48_000, 96_000, 400_000];
            for (window, share) in windows.into_iter().flat_map(|w| [(w, 0.5), (w, 0.05)]) {
                for chunk_ratio in [None, Some(0.1), Some(0.6), Some(0.9)] {
                    let policy = Policy {
                        name: format!("w{window}-c{chunk_ratio:?}-h{share}"),
                        context_window: window,
                        chunk_ratio,
                        max_history_share: share,
                        reserve_tokens: 1_000,
                        reserve_tokens_floor: 0,
                        max_reserve_share: 0.0,
                        pi_rules: rules,
                        ..Policy::openclaw()
                    };
                    if !cut.one_chunk(&policy, prep.tokens_before) {
                        continue;
                    }
                    let outcome = sessionlog_compaction::compact_carrying(
                        log,
                        &prep,
                        &Ledger::default(),
                        &policy,
                        &mut FailsOnLong { long: fails_over },
                        &counter,
                        None,
                        &prepared.facts,
                    );
                    match &first {
                        None => first = Some((policy.name.clone(), outcome)),
                        Some((name, made)) => proptest::prop_assert!(
                            made == &outcome,
                            "{} and {} summarise one chunk apart", name, policy.name
                        ),
                    }
                }
            }
        }
    }

    /// The request hash leaves the messages' texts out (the conversation is
    /// their serialisation), but requests are compared in full: two requests
    /// whose messages differ only in a text of the same length, under the
    /// same conversation, are answered apart.
    #[test]
    fn requests_that_differ_only_in_a_message_text_are_answered_apart() {
        let memo = CompactionMemo::new();
        let with_text = |text: &str| SummaryRequest {
            messages: vec![SummaryMessage {
                entry_id: Some("e1".to_owned()),
                role: "user".to_owned(),
                text: text.into(),
            }],
            ..request("the same conversation")
        };
        let ask = |answer: &str| Ok::<_, SummarizerError>(answer.to_owned());
        assert_eq!(memo.answer("s", &with_text("aaa"), || ask("first")), Ok("first".to_owned()));
        assert_eq!(memo.answer("s", &with_text("bbb"), || ask("second")), Ok("second".to_owned()));
        assert_eq!(memo.answer("s", &with_text("aaa"), || ask("again")), Ok("first".to_owned()));
        assert_eq!(memo.answered(), 1);
    }

    #[test]
    fn an_answer_is_kept_and_a_failure_is_not() {
        let memo = CompactionMemo::new();
        let asked = std::cell::Cell::new(0);
        let ask = |answer: Result<&str, &str>| {
            asked.set(asked.get() + 1);
            answer.map(str::to_owned).map_err(|e| SummarizerError(e.to_owned()))
        };
        // A failure (a transient model error, say) goes back to the caller only:
        // the next policy sending the request asks the summariser itself.
        let failed = memo.answer("model", &request("a"), || ask(Err("rate limited")));
        assert_eq!(failed, Err(SummarizerError("rate limited".to_owned())));
        assert_eq!(memo.answer("model", &request("a"), || ask(Ok("summary a"))), Ok("summary a".to_owned()));
        assert_eq!(asked.get(), 2);
        // Once answered, the same request from the same summariser is not asked again ...
        assert_eq!(memo.answer("model", &request("a"), || ask(Ok("other"))), Ok("summary a".to_owned()));
        assert_eq!((asked.get(), memo.answered()), (2, 1));
        // ... but another request, or another summariser, is.
        assert_eq!(memo.answer("model", &request("b"), || ask(Ok("summary b"))), Ok("summary b".to_owned()));
        assert_eq!(memo.answer("extractive", &request("a"), || ask(Ok("x"))), Ok("x".to_owned()));
        assert_eq!((asked.get(), memo.answered()), (4, 1));
    }
}

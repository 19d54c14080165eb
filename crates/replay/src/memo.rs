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
//!   virtual compaction in it, its place and the key it was made under (a
//!   virtual entry is the outcome of its key plus a head taken from the log
//!   before it; the chain of those keys also determines the identifier
//!   ledger the compaction carries forward, which each compaction stores as
//!   its change to the previous one's);
//! - the cut: first kept path or log index, split-turn start, first kept id,
//!   and how many messages are summarised (the preparation is a function of
//!   the log and the cut);
//! - the context size the compaction was measured at (`tokensBefore`);
//! - the token counter and the summariser, by name;
//! - the policy, as JSON, with only the fields that `compact_over` does not
//!   read blanked: its name, when to compact (trigger, overflow attempts,
//!   no-op and loop rules, memory flush), the summariser it names (the one in
//!   use is keyed by name) and the knobs that only move the cut
//!   (`keepRecentTokens`, `reserveTokensFloor`), which the cut stands for.
//!   Any other field — a new one included — stays in the key, so a field
//!   added later can cost hits, never change a result.
//!
//! The summariser must answer a request from the request alone (extractive,
//! recorded, a model through its cache): the memo skips its calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sessionlog_compaction::{Outcome, Policy};
use sessionlog_context::cut::Preparation;
use sessionlog_events::Entry;

/// Whether sweeps share compactions between policies (on unless
/// `SESSIONLOG_SWEEP_MEMO=0`; the switch exists to compare the two).
pub fn enabled_by_env() -> bool {
    std::env::var("SESSIONLOG_SWEEP_MEMO").map_or(true, |v| v != "0")
}

/// The distinct compactions made so far over one transcript, shared by
/// every policy replayed against it (thread-safe).
#[derive(Debug, Default)]
pub struct CompactionMemo {
    outcomes: Mutex<HashMap<Key, (u32, Arc<Shared>)>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// One distinct compaction: its outcome and what follows from it and its
/// key alone — the virtual entry (its head comes from the log the key
/// names) and the summary message's token count and identifiers (the counter
/// and the rules are in the key).
#[derive(Debug)]
pub(crate) struct Shared {
    /// The summarisation's result.
    pub(crate) outcome: Outcome,
    /// The virtual compaction entry (`None`: it could not be written).
    pub(crate) entry: OnceLock<Option<Entry>>,
    /// The summary message's tokens and identifier numbers.
    pub(crate) summary: OnceLock<Option<(u64, Arc<[u32]>)>>,
}

/// What a compaction is determined by (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// Path entries in the virtual log.
    path_entries: usize,
    /// Each virtual compaction in the log: path entries before it, the id of its key.
    compactions: Vec<(usize, u32)>,
    /// The cut.
    first_kept: usize,
    turn_start: Option<usize>,
    split_turn: bool,
    first_kept_id: String,
    summarized: usize,
    turn_prefix: usize,
    has_previous: bool,
    /// `tokensBefore`, as bits.
    tokens_before: u64,
    counter: String,
    summarizer: String,
    /// The policy's JSON with the fields `compact_over` does not read blanked.
    policy: String,
}

/// One virtual log slot as the memo sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LogPart {
    /// A path entry.
    Path,
    /// A virtual compaction made under the memo key with this id.
    Compaction(u32),
}

impl Key {
    /// The key of a compaction over `log` (described by `parts`, slot by slot).
    pub(crate) fn new(
        parts: impl Iterator<Item = LogPart>,
        prep: &Preparation<'_>,
        policy: &Policy,
        counter: &str,
        summarizer: &str,
    ) -> Key {
        let mut path_entries = 0;
        let mut compactions = Vec::new();
        for part in parts {
            match part {
                LogPart::Path => path_entries += 1,
                LogPart::Compaction(id) => compactions.push((path_entries, id)),
            }
        }
        let blanked = Policy {
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
        Key {
            path_entries,
            compactions,
            first_kept: prep.cut.first_kept,
            turn_start: prep.cut.turn_start,
            split_turn: prep.cut.is_split_turn,
            first_kept_id: prep.first_kept_entry_id.clone(),
            summarized: prep.messages_to_summarize.len(),
            turn_prefix: prep.turn_prefix_messages.len(),
            has_previous: prep.previous_summary.is_some(),
            tokens_before: prep.tokens_before.to_bits(),
            counter: counter.to_owned(),
            summarizer: summarizer.to_owned(),
            // Serialising a policy cannot fail (no maps with non-string keys).
            policy: serde_json::to_string(&blanked).unwrap_or_else(|e| format!("{blanked:?} {e}")),
        }
    }
}

impl CompactionMemo {
    /// An empty memo.
    pub fn new() -> CompactionMemo {
        CompactionMemo::default()
    }

    /// The compaction under `key` and its id, its outcome made by `make` the first time.
    pub(crate) fn outcome(&self, key: Key, make: impl FnOnce() -> Outcome) -> (u32, Arc<Shared>) {
        if let Some((id, shared)) = self.lock().get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return (*id, Arc::clone(shared));
        }
        // Made outside the lock: another policy may make the same one meanwhile; the first stored wins.
        let made = Shared { outcome: make(), entry: OnceLock::new(), summary: OnceLock::new() };
        self.misses.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        let next = map.len() as u32;
        let (id, shared) = map.entry(key).or_insert_with(|| (next, Arc::new(made)));
        (*id, Arc::clone(shared))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (u32, Arc<Shared>)>> {
        // A poisoned memo still holds whole entries (each inserted in one step).
        self.outcomes.lock().unwrap_or_else(|e| e.into_inner())
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

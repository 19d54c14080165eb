//! The provider context kept up to date as entries are appended: what a
//! live loop holds between model calls instead of building the context from
//! the whole transcript each time ([`crate::provider_context`]).
//!
//! [`LiveContext`] keeps the projection at the default leaf — the root→leaf
//! path, the entries the context selects (the newest compaction, its kept
//! range, everything after it), each with its messages already converted
//! for the provider (`convertToLlm`), the model entry and the last cache
//! touch on the path. [`LiveContext::sync`] folds the entries appended to
//! the transcript since the last call:
//!
//! * an entry that continues the current leaf with a new id is pushed:
//!   its messages are converted, nothing else is read — time proportional
//!   to the entry;
//! * a compaction that continues the leaf resets the selection to its
//!   summary and its kept range (`firstKeptEntryId` up to the compaction,
//!   found through an id → path position index): time proportional to what
//!   it keeps;
//! * a Pi 1.6 `context_edit` re-projects the selected entries it targets;
//! * anything else — a new branch, a reused or missing id, a root after
//!   entries, a transcript that shrank — rebuilds from the whole transcript,
//!   exactly as [`crate::provider_context`] builds it.
//!
//! [`LiveContext::provider_context`] then runs the same steps after the
//! projection as [`crate::provider_context`] (history limit, engine
//! `assemble`, pruning, hygiene, estimate) over the kept messages, so the
//! two return equal [`ProviderContext`]s for the default leaf; a request for
//! another leaf or other rules is passed to the full build.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use sessionlog_events::{Entry, EntryKind, PiRules, Role, Transcript};
use sessionlog_tokens::TokenCounter;

use crate::assemble::{compaction_summary_message, context_message, AgentMessage, Leaf};
use crate::engine::ContextEngine;
use crate::llm::convert_to_llm_with;
use crate::projection::{apply_edit, entry_messages};
use crate::provider::{
    cache_touch, finish, provider_context, resolve_family, HistoryLimit, Projected, ProviderContext,
    ProviderError, ProviderRequest,
};

/// One context message of a selected entry: whether it counts as a user
/// turn for the history limit, and what the provider receives (`None` when
/// `convertToLlm` drops it).
#[derive(Debug, Clone, PartialEq)]
struct Converted {
    user: bool,
    llm: Option<Value>,
}

/// A selected entry and its converted messages.
#[derive(Debug, Clone, PartialEq)]
struct Slot {
    entry: usize,
    messages: Vec<Converted>,
}

/// The projection at the default leaf.
#[derive(Debug, Clone, Default, PartialEq)]
struct State {
    /// Entry indices of the root→leaf path.
    path: Vec<usize>,
    /// The first position on the path of each id.
    first_at: HashMap<String, usize>,
    /// Every id of the tree's entries (a reused id changes paths: rebuild).
    ids: HashSet<String>,
    /// The last model change or assistant message on the path.
    model: Option<usize>,
    /// The last cache touch on the path.
    cache_touch: Option<i64>,
    /// The selected entries, in context order.
    slots: Vec<Slot>,
    /// Pi 1.6: the last `context_edit` per target among the selected entries.
    edits: HashMap<Option<String>, usize>,
}

/// The provider context of a transcript's default leaf, folded entry by
/// entry (see the module documentation).
#[derive(Debug, Clone)]
pub struct LiveContext {
    rules: PiRules,
    /// Entries of the transcript folded so far.
    folded: usize,
    /// `None` when the path has a cycle (the full build reports it).
    state: Option<State>,
    rebuilds: usize,
}

impl LiveContext {
    /// The projection of `transcript` under `rules`, built from all of it.
    pub fn new(transcript: &Transcript, rules: PiRules) -> LiveContext {
        let mut live = LiveContext { rules, folded: 0, state: None, rebuilds: 0 };
        live.rebuild(transcript);
        live
    }

    /// The rules the projection follows.
    pub fn rules(&self) -> PiRules {
        self.rules
    }

    /// How many times the projection was built from the whole transcript
    /// (1 after [`LiveContext::new`]; a branch or a reused id adds one).
    pub fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Entries of the transcript folded so far.
    pub fn folded(&self) -> usize {
        self.folded
    }

    /// Builds the projection from the whole transcript.
    pub fn rebuild(&mut self, transcript: &Transcript) {
        self.rebuilds += 1;
        self.folded = transcript.entries.len();
        self.state = full_state(transcript, self.rules);
    }

    /// Folds the entries appended to `transcript` since the last call (the
    /// same transcript, only ever appended to; one that shrank is rebuilt).
    pub fn sync(&mut self, transcript: &Transcript) {
        if transcript.entries.len() < self.folded {
            self.rebuild(transcript);
            return;
        }
        while self.folded < transcript.entries.len() {
            let index = self.folded;
            self.folded += 1;
            let pushed = match self.state.as_mut() {
                Some(state) => push(state, transcript, index, self.rules),
                None => false,
            };
            if !pushed {
                self.rebuild(transcript);
                return;
            }
        }
    }

    /// What the provider receives for the next call: equal to
    /// [`crate::provider_context`] on `transcript` (which must be synced;
    /// see [`LiveContext::sync`]). A request for a leaf other than the
    /// default, or under other rules, is built in full.
    pub fn provider_context(
        &self,
        transcript: &Transcript,
        request: &ProviderRequest<'_>,
        engine: &mut dyn ContextEngine,
        counter: &dyn TokenCounter,
    ) -> Result<ProviderContext, ProviderError> {
        let state = match &self.state {
            Some(state)
                if request.leaf == Leaf::Default
                    && request.rules == self.rules
                    && self.folded == transcript.entries.len() =>
            {
                state
            }
            _ => return provider_context(transcript, request, engine, counter),
        };
        let fam = resolve_family(request)?;
        let all: Vec<&Converted> = state.slots.iter().flat_map(|s| &s.messages).collect();
        let start = request.history_limit.map_or(0, |limit| history_limit_start(&all, limit));
        let history_limit =
            request.history_limit.map(|limit| HistoryLimit { limit, dropped_messages: start });
        let messages: Vec<Value> = all[start..].iter().filter_map(|m| m.llm.clone()).collect();
        let entry = |i: usize| &transcript.entries[i];
        let projected = Projected {
            messages,
            history_limit,
            model: state.model.map(entry),
            cache_touch: state.cache_touch,
            leaf_id: state.path.last().and_then(|&i| entry(i).id.clone()),
        };
        finish(transcript, request, fam, projected, engine, counter)
    }
}

/// OpenClaw's history limit over the kept messages (see
/// [`crate::hygiene::history_limit_start`]).
fn history_limit_start(messages: &[&Converted], limit: usize) -> usize {
    if limit == 0 {
        return 0;
    }
    let mut users = 0;
    let mut start = messages.len();
    for (i, m) in messages.iter().enumerate().rev() {
        if m.user {
            users += 1;
            if users > limit {
                return start;
            }
            start = i;
        }
    }
    0
}

fn is_compaction(entry: &Entry) -> bool {
    matches!(entry.kind, EntryKind::Compaction(_))
}

fn is_system_message(entry: &Entry) -> bool {
    entry.message().is_some_and(|m| m.role() == Role::System)
}

/// The projection of the default leaf, from the whole transcript.
fn full_state(transcript: &Transcript, rules: PiRules) -> Option<State> {
    let tree = transcript.tree();
    let path = match transcript.default_leaf_index() {
        Some(leaf) => tree.path(leaf).ok()?,
        None => Vec::new(),
    };
    let mut state =
        State { ids: transcript.tree_entries().filter_map(|e| e.id.clone()).collect(), ..State::default() };
    for (at, &i) in path.iter().enumerate() {
        let entry = &transcript.entries[i];
        if let Some(id) = &entry.id {
            state.first_at.entry(id.clone()).or_insert(at);
        }
        note_path_entry(&mut state, entry, i);
    }
    state.path = path;
    let entries = &transcript.entries;
    // The newest compaction on the path, found by id as Pi finds it.
    let selected = match state.path.iter().rposition(|&i| is_compaction(&entries[i])) {
        None => state.path.clone(),
        Some(last) => {
            let id = entries[state.path[last]].id.as_deref();
            let at = if rules.is_v1() {
                state.path.iter().position(|&i| entries[i].id.as_deref() == id)
            } else {
                state.path.iter().position(|&i| is_compaction(&entries[i]) && entries[i].id.as_deref() == id)
            };
            let at = at.unwrap_or(last);
            let mut selected = vec![state.path[last]];
            selected.extend(kept(&state, entries, at, state.path[last], rules));
            selected.extend_from_slice(&state.path[at + 1..]);
            selected
        }
    };
    select(&mut state, transcript, selected, rules);
    Some(state)
}

/// What a path entry changes besides the selection: the model entry and
/// the last cache touch.
fn note_path_entry(state: &mut State, entry: &Entry, index: usize) {
    match &entry.kind {
        EntryKind::ModelChange { .. } => state.model = Some(index),
        EntryKind::Message(m) if m.role() == Role::Assistant => state.model = Some(index),
        _ => {}
    }
    if let Some(touch) = cache_touch(entry) {
        state.cache_touch = Some(touch);
    }
}

/// The entries a compaction at path position `at` keeps: from the first
/// entry with its `firstKeptEntryId` up to `at` (Pi 1.6 leaves system
/// messages out).
fn kept(state: &State, entries: &[Entry], at: usize, compaction: usize, rules: PiRules) -> Vec<usize> {
    let EntryKind::Compaction(fields) = &entries[compaction].kind else { return Vec::new() };
    let first_kept = fields.first_kept_entry_id.as_deref();
    let from = match first_kept {
        Some(id) => state.first_at.get(id).copied().filter(|&p| p < at),
        // No id to keep from: the first entry without an id, as Pi compares.
        None => state.path[..at].iter().position(|&i| entries[i].id.is_none()),
    };
    let Some(from) = from else { return Vec::new() };
    state.path[from..at]
        .iter()
        .copied()
        .filter(|&i| !(rules.is_v1() && is_system_message(&entries[i])))
        .collect()
}

/// Makes `selected` the context's entries and converts their messages.
fn select(state: &mut State, transcript: &Transcript, selected: Vec<usize>, rules: PiRules) {
    state.edits.clear();
    if rules.is_v1() {
        for &i in &selected {
            if let EntryKind::ContextEdit(edit) = &transcript.entries[i].kind {
                state.edits.insert(edit.target_id.clone(), i);
            }
        }
    }
    state.slots = selected
        .into_iter()
        .enumerate()
        .map(|(at, i)| Slot { entry: i, messages: messages_of(state, transcript, i, at == 0, rules) })
        .collect();
}

/// The converted messages of the selected entry `index` (`first`: it opens
/// the selection, where only the newest compaction stands).
fn messages_of(
    state: &State,
    transcript: &Transcript,
    index: usize,
    first: bool,
    rules: PiRules,
) -> Vec<Converted> {
    let entry = &transcript.entries[index];
    let messages: Vec<AgentMessage<'_>> = if rules.is_v1() {
        if !first && is_compaction(entry) {
            Vec::new()
        } else {
            let own = entry_messages(entry);
            match state.edits.get(&entry.id) {
                Some(&edit) => apply_edit(own, &transcript.entries[edit]),
                None => own,
            }
        }
    } else if first && is_compaction(entry) {
        compaction_summary_message(entry).into_iter().collect()
    } else {
        context_message(entry).into_iter().collect()
    };
    messages
        .iter()
        .map(|m| Converted {
            user: m.message.role() == Role::User,
            llm: convert_to_llm_with(std::slice::from_ref(m), rules).first().map(|l| l.to_json()),
        })
        .collect()
}

/// Folds entry `index`, appended to the transcript; false when only a
/// rebuild gives the right projection.
fn push(state: &mut State, transcript: &Transcript, index: usize, rules: PiRules) -> bool {
    let entries = &transcript.entries;
    let entry = &entries[index];
    if matches!(entry.kind, EntryKind::Session(_)) {
        return true; // a stray header is not part of the tree
    }
    let Some(id) = entry.id.as_deref() else { return false };
    if state.ids.contains(id) {
        return false;
    }
    let leaf_id = state.path.last().and_then(|&i| entries[i].id.as_deref());
    let continues = match (entry.parent_id.as_deref(), leaf_id) {
        (Some(parent), Some(leaf)) => parent == leaf,
        (None, None) => state.path.is_empty(),
        _ => false,
    };
    if !continues {
        return false;
    }
    state.ids.insert(id.to_owned());
    let at = state.path.len();
    state.path.push(index);
    state.first_at.entry(id.to_owned()).or_insert(at);
    note_path_entry(state, entry, index);
    if is_compaction(entry) {
        let mut selected = vec![index];
        selected.extend(kept(state, entries, at, index, rules));
        select(state, transcript, selected, rules);
        return true;
    }
    if rules.is_v1() {
        if let EntryKind::ContextEdit(edit) = &entry.kind {
            let target = edit.target_id.clone();
            state.edits.insert(target.clone(), index);
            for at in 0..state.slots.len() {
                let slot = state.slots[at].entry;
                if entries[slot].id == target {
                    let messages = messages_of(state, transcript, slot, at == 0, rules);
                    state.slots[at].messages = messages;
                }
            }
        }
    }
    let first = state.slots.is_empty();
    let messages = messages_of(state, transcript, index, first, rules);
    state.slots.push(Slot { entry: index, messages });
    true
}

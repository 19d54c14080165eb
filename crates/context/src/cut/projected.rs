//! Pi 1.6.0's compaction planning, over the session projection
//! ([`crate::projection`]) instead of raw path entries.
//!
//! What differs from Pi 0.58.3 (`core/compaction/compaction.js` in 1.6.0):
//!
//! * [`estimate_projected`] (`estimateProjectedContextTokens`): the last
//!   assistant usage is trusted only when it comes after the latest
//!   `context_edit` or `compaction` on the branch; otherwise the context is
//!   estimated (non-system messages plus one replayed system message).
//!   Usage of size 0 is never trusted.
//! * [`find_cut_point`] (`findProjectedCutPoint`): cut points, turn starts
//!   and the recent-token budget read every entry's context messages, so
//!   custom messages, branch summaries and system messages count toward
//!   `keepRecentTokens`; entries worth 0 tokens are skipped; when no cut point
//!   lies at or after the budget's end the last one is taken; the backward
//!   extension stops at any entry with context messages; a closed suffix of
//!   omitted recovery attempts moves the cut one entry later.
//! * [`prepare`] (`prepareCompaction`): the window starts at the previous
//!   compaction's kept entries (they are summarised again), compaction
//!   entries and system messages are not summarised, and a cut that leaves
//!   nothing to summarise prepares nothing.

use std::collections::{HashMap, HashSet};

use sessionlog_events::{Entry, EntryKind, PiRules, Replacement, Role};
use sessionlog_tokens::{ContextSize, TokenCounter};

use super::{
    seed_from_details, ContextTokens, CutPoint, FileOps, NoPreparation, Preparation, Settings, DETAILS_FILES,
};
use crate::assemble::AgentMessage;
use crate::projection::{self, Projected};

const RULES: PiRules = PiRules::V1_6;

fn is_compaction(entry: &Entry) -> bool {
    matches!(entry.kind, EntryKind::Compaction(_))
}

/// `estimateTokens` summed over an entry's projected messages.
fn entry_tokens(p: &Projected<'_>, counter: &dyn TokenCounter) -> u64 {
    p.messages.iter().map(|m| counter.tokens_for(&m.message, RULES)).sum()
}

/// `estimateContextTokens` of Pi 1.6 (usage of size 0 is skipped): the
/// [`ContextSize`] fold under Pi 1.6's rules.
pub fn estimate_context(messages: &[&AgentMessage<'_>], counter: &dyn TokenCounter) -> ContextTokens {
    let size = ContextSize::of(RULES, messages, |m| Some(&*m.message), counter);
    ContextTokens {
        tokens: size.tokens(),
        usage_tokens: size.usage_tokens(),
        trailing_tokens: size.trailing_tokens(),
        last_usage_index: size.last_usage().map(|r| r.index),
    }
}

/// An index that may be JavaScript's `-1`.
fn js_index(index: Option<usize>) -> i64 {
    index.map_or(-1, |i| i as i64)
}

/// `estimateProjectedContextTokens(projection, branch)`: what Pi 1.6 feeds
/// `shouldCompact` and shows as context usage.
pub fn estimate_projected(
    projection: &[Projected<'_>],
    branch: &[&Entry],
    counter: &dyn TokenCounter,
) -> ContextTokens {
    let messages: Vec<&AgentMessage<'_>> = projection::messages(projection).collect();
    let estimate = estimate_context(&messages, counter);
    if let Some(last) = estimate.last_usage_index {
        if usage_still_valid(projection, branch, last) {
            return estimate;
        }
    }
    let current = projection::current_system_message(&messages);
    let mut tokens =
        current.map_or(0, |system| counter.tokens_for(&projection::system_message_of(&system), RULES));
    tokens += messages
        .iter()
        .filter(|m| m.message.role() != Role::System)
        .map(|m| counter.tokens_for(&m.message, RULES))
        .sum::<u64>();
    ContextTokens {
        tokens: tokens as f64,
        usage_tokens: 0.0,
        trailing_tokens: tokens,
        last_usage_index: None,
    }
}

/// True when the entry holding context message `message_index` comes after
/// the latest `context_edit` or `compaction` on the branch.
fn usage_still_valid(projection: &[Projected<'_>], branch: &[&Entry], message_index: usize) -> bool {
    let mut start = 0;
    let mut usage_entry_id = None;
    for p in projection {
        let next = start + p.messages.len();
        if message_index < next {
            usage_entry_id = p.entry.id.as_deref();
            break;
        }
        start = next;
    }
    let usage_entry = usage_entry_id
        .filter(|id| !id.is_empty())
        .and_then(|id| branch.iter().position(|e| e.id.as_deref() == Some(id)));
    let invalidating =
        branch.iter().rposition(|e| matches!(e.kind, EntryKind::ContextEdit(_) | EntryKind::Compaction(_)));
    js_index(usage_entry) > js_index(invalidating)
}

fn is_cut_point_message(m: &AgentMessage<'_>) -> bool {
    matches!(
        m.message.role(),
        Role::User
            | Role::Assistant
            | Role::BashExecution
            | Role::Custom
            | Role::BranchSummary
            | Role::CompactionSummary
    )
}

fn is_turn_start_message(m: &AgentMessage<'_>) -> bool {
    matches!(
        m.message.role(),
        Role::User | Role::BashExecution | Role::Custom | Role::BranchSummary | Role::CompactionSummary
    )
}

/// `isProjectedTurnStart`: a non-compaction entry with a user-like message.
fn is_turn_start(p: &Projected<'_>) -> bool {
    !is_compaction(p.entry) && p.messages.iter().any(is_turn_start_message)
}

/// `sessionEntryToContextMessages(entry).length > 0`, without building them.
fn contributes(entry: &Entry) -> bool {
    match &entry.kind {
        EntryKind::Message(_) | EntryKind::CustomMessage(_) | EntryKind::Compaction(_) => true,
        EntryKind::BranchSummary(b) => b.summary.as_deref().is_some_and(|s| !s.is_empty()),
        _ => false,
    }
}

/// The recovery-omission rule: after the cut, only context-invisible entries
/// and entries hidden by `null` edits, at least one of them an assistant
/// message, no compaction, and no edit that replaces something else.
fn is_recovery_omission_suffix(suffix: &[Projected<'_>]) -> bool {
    let visible =
        |p: &Projected<'_>| !matches!(p.entry.kind, EntryKind::ContextEdit(_)) && contributes(p.entry);
    let omitted = |p: &Projected<'_>| visible(p) && p.messages.is_empty();
    let omitted_ids: HashSet<Option<&str>> =
        suffix.iter().filter(|p| omitted(p)).map(|p| p.entry.id.as_deref()).collect();
    let external_replacement = suffix.iter().any(|p| match &p.entry.kind {
        EntryKind::ContextEdit(edit) => {
            !matches!(edit.replacement, Some(Replacement::Omit))
                && !omitted_ids.contains(&edit.target_id.as_deref())
        }
        _ => false,
    });
    let omitted_assistant =
        suffix.iter().any(|p| p.entry.message().is_some_and(|m| m.role() == Role::Assistant) && omitted(p));
    let closed = suffix.iter().all(|p| !is_compaction(p.entry) && (!visible(p) || omitted(p)));
    !external_replacement && omitted_assistant && closed
}

/// `findProjectedCutPoint` over projection indices `[start, end)`.
pub fn find_cut_point(
    projection: &[Projected<'_>],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
    counter: &dyn TokenCounter,
) -> CutPoint {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| {
            !is_compaction(projection[i].entry) && projection[i].messages.iter().any(is_cut_point_message)
        })
        .collect();
    let (Some(&first), Some(&last)) = (cut_points.first(), cut_points.last()) else {
        return CutPoint { first_kept: start, turn_start: None, is_split_turn: false };
    };
    let mut cut = first;
    let mut accumulated = 0u64;
    let mut exceeded = false;
    for i in (start..end).rev() {
        let tokens = entry_tokens(&projection[i], counter);
        if tokens == 0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            exceeded = true;
            cut = cut_points.iter().copied().find(|&c| c >= i).unwrap_or(last);
            break;
        }
    }
    if exceeded && is_recovery_omission_suffix(&projection[cut + 1..end]) {
        cut += 1;
    }
    while cut > start {
        let previous = &projection[cut - 1];
        if is_compaction(previous.entry) || !previous.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    let starts_turn = is_turn_start(&projection[cut]);
    let turn_start =
        if starts_turn { None } else { (start..=cut).rev().find(|&i| is_turn_start(&projection[i])) };
    CutPoint { first_kept: cut, turn_start, is_split_turn: !starts_turn && turn_start.is_some() }
}

/// Where the compaction window starts in a projection: after the newest
/// compaction that contributes messages (index 0 when there is one), so its
/// kept entries are summarised again. Returns (that compaction, window start).
pub fn window(projection: &[Projected<'_>]) -> (Option<usize>, usize) {
    let previous = projection.iter().position(|p| is_compaction(p.entry) && !p.messages.is_empty());
    (previous, previous.map_or(0, |i| i + 1))
}

/// Maps projection indices back to positions in the root→leaf path (by id;
/// the last entry with an id wins, as a JavaScript `Map` built over the path).
pub struct PathIndex<'p> {
    by_id: HashMap<Option<&'p str>, usize>,
}

impl<'p> PathIndex<'p> {
    /// Indexes `path`.
    pub fn new(path: &[&'p Entry]) -> PathIndex<'p> {
        PathIndex { by_id: path.iter().enumerate().map(|(i, e)| (e.id.as_deref(), i)).collect() }
    }

    /// The path position of a projection entry (`None` is Pi's `-1`).
    pub fn of(&self, entry: &Entry) -> Option<usize> {
        self.by_id.get(&entry.id.as_deref()).copied()
    }
}

/// The messages of `range` that Pi summarises: no compaction, no system message.
fn summarizable<'a>(projection: &[Projected<'a>], range: std::ops::Range<usize>) -> Vec<AgentMessage<'a>> {
    projection[range]
        .iter()
        .filter(|p| !is_compaction(p.entry))
        .flat_map(|p| p.messages.iter().filter(|m| m.message.role() != Role::System).cloned())
        .collect()
}

/// Pi 1.6.0's `prepareCompaction` over a root→leaf path.
pub fn prepare<'a>(
    path: &[&'a Entry],
    settings: &Settings,
    counter: &dyn TokenCounter,
) -> Result<Preparation<'a>, NoPreparation> {
    if path.last().is_some_and(|e| is_compaction(e)) {
        return Err(NoPreparation::LastIsCompaction);
    }
    let projection = projection::project(path);
    prepare_projected(path, &projection, settings, counter)
}

/// [`prepare`] over the path's projection, computed once by the caller.
pub fn prepare_projected<'a>(
    path: &[&'a Entry],
    projection: &[Projected<'a>],
    settings: &Settings,
    counter: &dyn TokenCounter,
) -> Result<Preparation<'a>, NoPreparation> {
    if path.last().is_some_and(|e| is_compaction(e)) {
        return Err(NoPreparation::LastIsCompaction);
    }
    let (previous, start) = window(projection);
    let end = projection.len();
    let tokens_before = estimate_projected(projection, path, counter).tokens;
    let cut = find_cut_point(projection, start, end, settings.keep_recent_tokens, counter);
    let Some(first_kept) = projection.get(cut.first_kept).map(|p| p.entry) else {
        return Err(if path.is_empty() { NoPreparation::EmptyPath } else { NoPreparation::FirstKeptHasNoId });
    };
    let Some(first_kept_entry_id) = first_kept.id.clone().filter(|id| !id.is_empty()) else {
        return Err(NoPreparation::FirstKeptHasNoId);
    };
    let history_end =
        if cut.is_split_turn { cut.turn_start.unwrap_or(cut.first_kept) } else { cut.first_kept };
    let messages_to_summarize = summarizable(projection, start..history_end.max(start));
    let turn_prefix_messages = match (cut.is_split_turn, cut.turn_start) {
        (true, Some(ts)) => summarizable(projection, ts..cut.first_kept),
        _ => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return Err(NoPreparation::NothingToSummarize);
    }
    let previous = previous.map(|p| projection[p].entry);
    let mut file_ops = FileOps::default();
    if let Some(EntryKind::Compaction(c)) = previous.map(|e| &e.kind) {
        if c.from_hook != Some(true) {
            // Only the `details` field is parsed, not the whole entry.
            seed_from_details(
                &mut file_ops,
                previous.and_then(|e| e.field_members("details", DETAILS_FILES)).as_ref(),
            );
        }
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message_with(&m.message, RULES);
    }
    // The cut in path positions, as the rest of the crate reads it.
    let index = PathIndex::new(path);
    let to_path = |i: usize| index.of(projection[i].entry).unwrap_or(i);
    let cut = CutPoint {
        first_kept: to_path(cut.first_kept),
        turn_start: cut.turn_start.map(to_path),
        is_split_turn: cut.is_split_turn,
    };
    Ok(Preparation {
        cut,
        first_kept_entry_id,
        tokens_before,
        previous_summary: previous,
        messages_to_summarize,
        turn_prefix_messages,
        file_ops,
    })
}

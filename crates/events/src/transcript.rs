//! A whole transcript in memory: header, entries in file order, and the tree
//! they form through `parentId`.

use std::collections::{BTreeMap, HashMap};

use crate::entry::{Entry, EntryKind, LineError};
use crate::migrate::{self, Plan};

/// A transcript after Pi's load-time migration: header plus v3 entries.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The session header (`type:"session"` with a string `id`).
    pub header: Entry,
    /// Every object after the header, in file order. A stray `session`
    /// object later in the file is kept here (Pi rewrites it) but, as in Pi,
    /// it is not an entry of the tree: see [`Transcript::tree_entries`].
    pub entries: Vec<Entry>,
    /// The header's version before migration (`None` = absent, i.e. version 1).
    pub original_version: Option<f64>,
    /// True when migration rewrote the entries (Pi rewrites such files on open).
    pub migrated: bool,
}

impl Transcript {
    /// Builds a transcript from parsed objects (header first), migrating
    /// version 1 and 2 content as Pi does.
    pub fn from_objects(header: Entry, entries: Vec<Entry>) -> Result<Transcript, LineError> {
        let original_version = header.header().and_then(|h| h.version);
        let plan = header.header().map(|h| h.effective_version()).and_then(Plan::for_version);
        let Some(plan) = plan else {
            return Ok(Transcript { header, entries, original_version, migrated: false });
        };
        let mut objects = Vec::with_capacity(entries.len() + 1);
        objects.push(header);
        objects.extend(entries);
        let mut migrated = migrate::migrate(plan, objects)?.into_iter();
        // Migration maps objects one to one, so the header is always first.
        let header = migrated.next().ok_or(LineError::Null)?;
        Ok(Transcript { header, entries: migrated.collect(), original_version, migrated: true })
    }

    /// The transcript as it stood after its first `n` entries (time travel by
    /// log position; `n` counts the objects after the header, in file order).
    pub fn prefix(&self, n: usize) -> Transcript {
        Transcript {
            header: self.header.clone(),
            entries: self.entries[..n.min(self.entries.len())].to_vec(),
            original_version: self.original_version,
            migrated: self.migrated,
        }
    }

    /// The session id from the header.
    pub fn session_id(&self) -> Option<&str> {
        self.header.header().and_then(|h| h.session_id.as_deref())
    }

    /// Writes the file as Pi leaves it after opening: every line and a final `\n`.
    pub fn write_jsonl(&self, out: &mut Vec<u8>) {
        for entry in std::iter::once(&self.header).chain(&self.entries) {
            out.extend_from_slice(entry.raw().as_bytes());
            out.push(b'\n');
        }
    }

    /// The entries Pi indexes: every object after the header except stray
    /// `session` objects.
    pub fn tree_entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| !matches!(e.kind, EntryKind::Session(_)))
    }

    /// The leaf Pi starts from: the last entry in file order.
    pub fn default_leaf(&self) -> Option<&Entry> {
        self.default_leaf_index().map(|i| &self.entries[i])
    }

    /// Index in [`Transcript::entries`] of the leaf Pi starts from.
    pub fn default_leaf_index(&self) -> Option<usize> {
        self.entries.iter().rposition(|e| !matches!(e.kind, EntryKind::Session(_)))
    }

    /// The root-first path (entry indices) to the default leaf; empty without entries.
    pub fn default_path(&self) -> Result<Vec<usize>, CycleError> {
        match self.default_leaf_index() {
            // The tree's index without its child counts, which the path does not read.
            Some(leaf) => path_to(&self.entries, &index_by_id(&self.entries), leaf),
            None => Ok(Vec::new()),
        }
    }

    /// Labels resolved over all entries in file order (last per target wins,
    /// an empty or absent label removes it), listed in the file order of the
    /// labelled entries.
    pub fn labels(&self) -> Vec<(&str, &str)> {
        let mut labels: HashMap<&str, &str> = HashMap::new();
        for entry in self.tree_entries() {
            if let EntryKind::Label { target_id: Some(target), label } = &entry.kind {
                match label.as_deref() {
                    Some(text) if !text.is_empty() => {
                        labels.insert(target.as_str(), text);
                    }
                    _ => {
                        labels.remove(target.as_str());
                    }
                }
            }
        }
        self.tree_entries()
            .filter_map(|e| e.id.as_deref())
            .filter_map(|id| labels.remove(id).map(|label| (id, label)))
            .collect()
    }

    /// The session name: the latest non-empty `session_info` name in file order.
    pub fn session_name(&self) -> Option<&str> {
        // Pi 0.58.3 tests `name` for truthiness, so only "" counts as empty.
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::SessionInfo { name: Some(name) } if !name.is_empty() => Some(name.as_str()),
            _ => None,
        })
    }

    /// The tree of entries.
    pub fn tree(&self) -> Tree<'_> {
        Tree::new(&self.entries)
    }
}

/// The forest that entries form through `parentId`.
#[derive(Debug)]
pub struct Tree<'a> {
    entries: &'a [Entry],
    /// Hashed with foldhash: only looked up, never iterated.
    by_id: IdIndex<'a>,
    children: Vec<u32>,
}

impl<'a> Tree<'a> {
    /// Indexes entries by id (a later duplicate id wins, as in Pi; stray
    /// `session` objects are not indexed).
    pub fn new(entries: &'a [Entry]) -> Tree<'a> {
        let by_id = index_by_id(entries);
        let mut children = vec![0u32; entries.len()];
        for entry in entries {
            if let Some(parent) = entry.parent_id.as_deref().and_then(|p| by_id.get(p)) {
                children[*parent] += 1;
            }
        }
        Tree { entries, by_id, children }
    }

    /// The entry index an id resolves to.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The parent index of entry `index` (none at a root or a dangling parent).
    pub fn parent(&self, index: usize) -> Option<usize> {
        self.entries[index].parent_id.as_deref().and_then(|p| self.index_of(p))
    }

    /// Number of entries whose parent is entry `index`.
    pub fn child_count(&self, index: usize) -> u32 {
        self.children[index]
    }

    /// Indices of entries with more than one child, in file order.
    pub fn branch_points(&self) -> Vec<usize> {
        (0..self.entries.len()).filter(|&i| self.children[i] > 1).collect()
    }

    /// Indices of entries without children, in file order.
    pub fn leaves(&self) -> Vec<usize> {
        (0..self.entries.len()).filter(|&i| self.children[i] == 0).collect()
    }

    /// Root-first path of entry indices ending at `leaf`.
    ///
    /// Pi does not guard against cycles; this walk stops once it is longer
    /// than the transcript (so it has met an entry twice) and reports the
    /// cycle as an error, naming the entry it reached then, instead of looping.
    pub fn path(&self, leaf: usize) -> Result<Vec<usize>, CycleError> {
        path_to(self.entries, &self.by_id, leaf)
    }
}

/// Entry indices by id, hashed with foldhash (only looked up, never iterated).
type IdIndex<'a> = HashMap<&'a str, usize, foldhash::fast::RandomState>;

/// The index of [`Tree`]: each id's entry (a later duplicate id wins, as in
/// Pi; stray `session` objects are not indexed).
fn index_by_id(entries: &[Entry]) -> IdIndex<'_> {
    let mut by_id = IdIndex::with_capacity_and_hasher(entries.len(), Default::default());
    for (i, entry) in entries.iter().enumerate() {
        if matches!(entry.kind, EntryKind::Session(_)) {
            continue;
        }
        if let Some(id) = &entry.id {
            by_id.insert(id.as_str(), i);
        }
    }
    by_id
}

/// [`Tree::path`] over `entries` indexed by `by_id`.
fn path_to(entries: &[Entry], by_id: &IdIndex<'_>, leaf: usize) -> Result<Vec<usize>, CycleError> {
    let parent = |i: usize| entries[i].parent_id.as_deref().and_then(|p| by_id.get(p).copied());
    let mut path = vec![leaf];
    let mut current = leaf;
    while let Some(parent) = parent(current) {
        if path.len() > entries.len() {
            return Err(CycleError { at: entries[parent].id.clone().unwrap_or_default() });
        }
        path.push(parent);
        current = parent;
    }
    path.reverse();
    Ok(path)
}

/// A `parentId` chain that loops back on itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parentId chain loops at entry {at}")]
pub struct CycleError {
    /// An id on the cycle.
    pub at: String,
}

/// Counts that `inspect` reports for a transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Entries after the header.
    pub entry_count: usize,
    /// Entries per `type` (`"(none)"` for a missing type).
    pub by_type: BTreeMap<String, usize>,
    /// `message` entries per `message.role` (`"(none)"` for a missing role).
    pub by_role: BTreeMap<String, usize>,
    /// Ids of entries with more than one child.
    pub branch_points: Vec<String>,
    /// Ids of entries without children.
    pub leaves: Vec<String>,
    /// Entries without an id (cannot be addressed in the tree).
    pub without_id: usize,
}

impl Stats {
    /// Counts a transcript.
    pub fn of(transcript: &Transcript) -> Stats {
        let mut stats = Stats::default();
        for entry in transcript.tree_entries() {
            stats.entry_count += 1;
            let ty = entry.type_name().unwrap_or("(none)").to_owned();
            *stats.by_type.entry(ty).or_default() += 1;
            if let Some(message) = entry.message() {
                let role = message.role.as_deref().unwrap_or("(none)").to_owned();
                *stats.by_role.entry(role).or_default() += 1;
            }
            if entry.id.is_none() {
                stats.without_id += 1;
            }
        }
        let tree = transcript.tree();
        let id_of = |i: usize| transcript.entries[i].id.clone().unwrap_or_default();
        let is_entry = |i: &usize| !matches!(transcript.entries[*i].kind, EntryKind::Session(_));
        stats.branch_points = tree.branch_points().into_iter().map(id_of).collect();
        let has_id = |i: &usize| transcript.entries[*i].id.is_some();
        stats.leaves = tree.leaves().into_iter().filter(is_entry).filter(has_id).map(id_of).collect();
        stats
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The default path walked by hand: from the last entry that is not a
    /// `session` object, each parent is the last such entry with that id,
    /// and a walk longer than the entries is a cycle.
    fn path_by_hand(entries: &[Entry]) -> Result<Vec<usize>, CycleError> {
        let is_entry = |e: &Entry| !matches!(e.kind, EntryKind::Session(_));
        let Some(mut at) = entries.iter().rposition(is_entry) else { return Ok(Vec::new()) };
        let mut path = vec![at];
        while let Some(parent) = entries[at]
            .parent_id
            .as_deref()
            .and_then(|p| entries.iter().rposition(|e| is_entry(e) && e.id.as_deref() == Some(p)))
        {
            if path.len() > entries.len() {
                return Err(CycleError { at: entries[parent].id.clone().unwrap_or_default() });
            }
            path.push(parent);
            at = parent;
        }
        path.reverse();
        Ok(path)
    }

    /// An entry line: a `label`, or a stray `session` object, with an id and
    /// parent among a few letters (repeated ids, dangling parents, cycles).
    fn line(kind: u8, id: Option<u8>, parent: Option<u8>) -> Entry {
        let name = |n: Option<u8>| n.map_or("null".to_owned(), |n| format!("\"{}\"", char::from(b'a' + n)));
        let ty = if kind == 0 { "session" } else { "label" };
        Entry::parse(&format!(
            r#"{{"type":"{ty}","id":{},"parentId":{},"timestamp":"t"}}"#,
            name(id),
            name(parent)
        ))
        .expect("a valid line")
    }

    fn transcript(entries: Vec<Entry>) -> Transcript {
        let header = Entry::parse(r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#)
            .expect("a header");
        Transcript::from_objects(header, entries).expect("a v3 transcript")
    }

    #[test]
    fn default_path_by_hand() {
        // c's parent b is the later of the two b's (whose parent is none),
        // and the session object between is not an entry.
        let t = transcript(vec![
            line(1, Some(0), None),
            line(1, Some(1), Some(0)),
            line(1, Some(1), None),
            line(1, Some(2), Some(1)),
            line(0, Some(3), Some(2)),
        ]);
        assert_eq!(t.default_path(), Ok(vec![2, 3]));
        let cycle = transcript(vec![line(1, Some(0), Some(1)), line(1, Some(1), Some(0))]);
        assert!(cycle.default_path().is_err());
        assert_eq!(transcript(vec![line(0, Some(0), None)]).default_path(), Ok(Vec::new()));
    }

    proptest! {
        /// `default_path` and the tree's path agree with the walk by hand.
        #[test]
        fn default_path_is_the_walk_by_hand(
            specs in prop::collection::vec((0u8..6, prop::option::of(0u8..5), prop::option::of(0u8..5)), 0..14)
        ) {
            let t = transcript(specs.into_iter().map(|(k, id, parent)| line(k, id, parent)).collect());
            let expected = path_by_hand(&t.entries);
            prop_assert_eq!(t.default_path(), expected.clone());
            if let Some(leaf) = t.default_leaf_index() {
                prop_assert_eq!(t.tree().path(leaf), expected);
            }
        }
    }
}

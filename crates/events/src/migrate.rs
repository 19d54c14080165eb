//! Version 1 → 2 → 3 migration, exactly as Pi performs it on open.
//!
//! Pi mutates the parsed objects in place and rewrites the file with
//! `JSON.stringify`, so new keys land after existing ones and every line is
//! re-encoded. Ids are deterministic here: the n-th object that receives an id
//! gets `n` as 8 lowercase hex digits (what the Pi oracle's `--seq-ids` mode
//! produces), so migrating a file twice gives the same bytes.

use serde_json::{Map, Value};

use crate::entry::{Entry, LineError};

/// Which steps a file needs, derived from its header version as Pi does
/// (`version ?? 1`, compared with JavaScript semantics, so `NaN` rewrites
/// without changing anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Add ids and parent links, map `firstKeptEntryIndex` (version < 2).
    pub v1_to_v2: bool,
    /// Rename role `hookMessage` to `custom` (version < 3).
    pub v2_to_v3: bool,
}

impl Plan {
    /// The plan for a header version, or `None` when the file is current (>= 3).
    pub fn for_version(version: f64) -> Option<Plan> {
        if version >= 3.0 {
            return None;
        }
        Some(Plan { v1_to_v2: version < 2.0, v2_to_v3: version < 3.0 })
    }
}

/// The deterministic id of the n-th migrated entry (1-based).
pub fn seq_id(n: u32) -> String {
    format!("{n:08x}")
}

/// Migrates a header and its entries (file order) to version 3.
///
/// Returns the rewritten header and entries; each entry's raw text is the line
/// Pi would write. `objects` are all parsed objects of the file, header first.
pub fn migrate(plan: Plan, objects: Vec<Entry>) -> Result<Vec<Entry>, LineError> {
    let mut values: Vec<Value> = objects.iter().map(Entry::to_value).collect();
    if plan.v1_to_v2 {
        v1_to_v2(&mut values);
    }
    if plan.v2_to_v3 {
        v2_to_v3(&mut values);
    }
    values.iter().map(Entry::from_value).collect()
}

fn type_is(value: &Value, ty: &str) -> bool {
    value.get("type").and_then(Value::as_str) == Some(ty)
}

/// Sets `key` in place when present, else appends it (JavaScript assignment).
fn assign(obj: &mut Map<String, Value>, key: &str, value: Value) {
    match obj.get_mut(key) {
        Some(slot) => *slot = value,
        None => {
            obj.insert(key.to_owned(), value);
        }
    }
}

fn v1_to_v2(values: &mut [Value]) {
    let mut counter = 0u32;
    let mut prev: Option<String> = None;
    let mut assigned: Vec<Option<String>> = vec![None; values.len()];
    for index in 0..values.len() {
        if type_is(&values[index], "session") {
            if let Some(obj) = values[index].as_object_mut() {
                assign(obj, "version", Value::from(2));
            }
            continue;
        }
        let is_compaction = type_is(&values[index], "compaction");
        counter += 1;
        let id = seq_id(counter);
        assigned[index] = Some(id.clone());
        let first_kept =
            values[index].get("firstKeptEntryIndex").and_then(Value::as_f64).filter(|_| is_compaction);
        // What `entries[index]` is when Pi reads it: only objects at or before
        // this one have ids yet.
        let target = first_kept.and_then(|idx| {
            let valid = idx >= 0.0 && idx.fract() == 0.0 && (idx as usize) < values.len();
            valid.then_some(idx as usize)
        });
        let target = target.map(|t| {
            if type_is(&values[t], "session") {
                Target::Header
            } else {
                Target::Entry(assigned[t].clone())
            }
        });
        let parent = prev.replace(id.clone());
        // Pi gives a non-object line (an array) an id in memory only:
        // JSON.stringify drops it, but the next entry still points at it.
        let Some(obj) = values[index].as_object_mut() else { continue };
        assign(obj, "id", Value::from(id));
        assign(obj, "parentId", parent.map_or(Value::Null, Value::from));
        if first_kept.is_some() {
            match target {
                Some(Target::Entry(Some(target_id))) => {
                    assign(obj, "firstKeptEntryId", Value::from(target_id))
                }
                // A later entry has no id yet: Pi assigns `undefined`, which
                // JSON.stringify omits.
                Some(Target::Entry(None)) => {
                    obj.shift_remove("firstKeptEntryId");
                }
                Some(Target::Header) | None => {}
            }
            obj.shift_remove("firstKeptEntryIndex");
        }
    }
}

enum Target {
    Header,
    Entry(Option<String>),
}

fn v2_to_v3(values: &mut [Value]) {
    for value in values.iter_mut() {
        if type_is(value, "session") {
            if let Some(obj) = value.as_object_mut() {
                assign(obj, "version", Value::from(3));
            }
            continue;
        }
        if !type_is(value, "message") {
            continue;
        }
        if let Some(message) = value.get_mut("message").and_then(Value::as_object_mut) {
            if message.get("role").and_then(Value::as_str) == Some("hookMessage") {
                assign(message, "role", Value::from("custom"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lines: &[&str]) -> Vec<String> {
        let objects: Vec<Entry> = lines.iter().map(|l| Entry::parse(l).unwrap()).collect();
        let version = objects[0].header().unwrap().effective_version();
        let plan = Plan::for_version(version).unwrap();
        migrate(plan, objects).unwrap().iter().map(|e| e.raw().to_owned()).collect()
    }

    #[test]
    fn v1_adds_ids_parent_links_and_maps_indices() {
        let out = run(&[
            r#"{"type":"session","id":"s"}"#,
            r#"{"type":"message","message":{"role":"user","content":"a"}}"#,
            r#"{"type":"compaction","summary":"x","firstKeptEntryIndex":1,"tokensBefore":5}"#,
            r#"{"type":"compaction","summary":"y","firstKeptEntryIndex":0}"#,
            r#"{"type":"compaction","summary":"z","firstKeptEntryIndex":9}"#,
        ]);
        assert_eq!(
            out,
            [
                r#"{"type":"session","id":"s","version":3}"#,
                r#"{"type":"message","message":{"role":"user","content":"a"},"id":"00000001","parentId":null}"#,
                r#"{"type":"compaction","summary":"x","tokensBefore":5,"id":"00000002","parentId":"00000001","firstKeptEntryId":"00000001"}"#,
                r#"{"type":"compaction","summary":"y","id":"00000003","parentId":"00000002"}"#,
                r#"{"type":"compaction","summary":"z","id":"00000004","parentId":"00000003"}"#,
            ]
        );
    }

    #[test]
    fn v1_index_pointing_forward_gets_no_id() {
        let out = run(&[
            r#"{"type":"session","id":"s"}"#,
            r#"{"type":"compaction","summary":"x","firstKeptEntryIndex":2,"firstKeptEntryId":"old"}"#,
            r#"{"type":"message","message":{"role":"user","content":"a"}}"#,
        ]);
        assert_eq!(out[1], r#"{"type":"compaction","summary":"x","id":"00000001","parentId":null}"#);
    }

    #[test]
    fn v2_renames_hook_messages_in_place() {
        let out = run(&[
            r#"{"type":"session","version":2,"id":"s"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"hookMessage","customType":"x"}}"#,
        ]);
        assert_eq!(out[0], r#"{"type":"session","version":3,"id":"s"}"#);
        assert_eq!(
            out[1],
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"custom","customType":"x"}}"#
        );
    }

    #[test]
    fn current_files_need_no_plan() {
        assert_eq!(Plan::for_version(3.0), None);
        assert_eq!(Plan::for_version(f64::NAN), Some(Plan { v1_to_v2: false, v2_to_v3: false }));
    }
}

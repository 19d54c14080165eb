//! The store stream's vocabulary: one [`StoreEvent`] per line of a store log
//! (`events.jsonl` beside `sessions.json`), and its text form.
//!
//! Every change to a session of an agent's store is one event keyed by
//! session key; `sessions.json` is their fold (in `sessionlog-sessions`).
//! A line is the event as `JSON.stringify` writes it, e.g.
//!
//! ```text
//! {"type":"created","key":"agent:main:main","sessionId":"3f2c…","at":1771578000000,"reason":"inbound","fields":{}}
//! {"type":"usage_recorded","key":"agent:main:main","at":1771578001000,"input":133,"output":44,"cacheRead":38784,"cacheWrite":0,"total":38961}
//! ```
//!
//! Unknown event types and unknown fields are refused (a newer writer's log
//! is reported, not misread).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::entry::LineError;

/// One store event, as a line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreEvent {
    /// An entry taken over from an existing `sessions.json`, verbatim.
    Imported {
        /// The session key (as stored).
        key: String,
        /// The entry.
        entry: Map<String, Value>,
    },
    /// A new session.
    Created {
        /// The session key.
        key: String,
        /// Its session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// When (epoch ms).
        at: i64,
        /// Why (`inbound`, `fork`, `subagent`, `cron`, …).
        reason: String,
        /// Extra fields of the new entry (chatType, channel, origin, spawnedBy, …).
        #[serde(default)]
        fields: Map<String, Value>,
        /// Where the message that created the session came from (spec §6.2), kept in the log only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provenance: Option<crate::provenance::Provenance>,
    },
    /// Field changes: a present `null` clears a field, an absent one keeps it.
    Patched {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// The fields.
        patch: Map<String, Value>,
        /// Metadata and last-route updates do not count as activity (`updatedAt` kept).
        #[serde(rename = "preserveActivity", default)]
        preserve_activity: bool,
    },
    /// A reset: a new session id for the key, with what carries over (spec §3.9).
    Reset {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// The new session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// `daily`, `idle`, `new` or `reset`.
        reason: String,
    },
    /// The entry is removed.
    Deleted {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
    },
    /// A model/provider/auth-profile override set (or cleared with all `None`),
    /// spec §6.3: a switch drops the observed `model`, `modelProvider` and
    /// `contextTokens` (the cached window belongs to the old model).
    ModelOverride {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Provider override.
        #[serde(default)]
        provider: Option<String>,
        /// Model override.
        #[serde(default)]
        model: Option<String>,
        /// Auth profile override.
        #[serde(rename = "authProfile", default)]
        auth_profile: Option<String>,
    },
    /// A level override (`thinking`, `verbose`, `reasoning`, `elevated`, `fast`); `None` clears.
    LevelOverride {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Which level.
        level: String,
        /// The value.
        #[serde(default)]
        value: Option<String>,
    },
    /// A compaction finished (counted when it produced a result).
    CompactionCounted {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
    },
    /// A pre-compaction memory flush ran.
    MemoryFlushRecorded {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
    },
    /// A sub-agent session was spawned by `spawned_by`.
    SubagentSpawned {
        /// The child key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Its session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// The requester's key.
        #[serde(rename = "spawnedBy")]
        spawned_by: String,
        /// Nesting depth.
        depth: u32,
    },
    /// A sub-agent run finished (`completed`, `failed`, `killed`, …).
    SubagentEnded {
        /// The child key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// The final status.
        status: String,
    },
    /// The session was archived: the entry leaves the store and its
    /// transcript is renamed `<file>.<reason>.<time>` (sub-agent cleanup, `/reset`, delete).
    Archived {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// `reset`, `deleted` or `bak`.
        reason: String,
    },
    /// A thread session forked from its parent.
    Forked {
        /// The child key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Its session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// The parent key.
        #[serde(rename = "parentKey")]
        parent_key: String,
    },
    /// The last delivery route changed (metadata: not activity).
    RouteUpdated {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Channel.
        channel: Option<String>,
        /// Recipient.
        to: Option<String>,
        /// Account.
        #[serde(rename = "accountId", default)]
        account_id: Option<String>,
        /// Thread (an explicit route without one clears the stored thread).
        #[serde(rename = "threadId", default)]
        thread_id: Option<String>,
    },
    /// Token counters from the transcript's last valid assistant usage.
    UsageRecorded {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// Input tokens.
        input: u64,
        /// Output tokens.
        output: u64,
        /// Cache-read tokens.
        #[serde(rename = "cacheRead")]
        cache_read: u64,
        /// Cache-write tokens.
        #[serde(rename = "cacheWrite")]
        cache_write: u64,
        /// Context size (Pi's `calculateContextTokens`).
        total: u64,
        /// The model's context window (`contextTokens`), when the writer knows it.
        #[serde(rename = "contextTokens", default, skip_serializing_if = "Option::is_none")]
        context_tokens: Option<u64>,
    },
}

impl StoreEvent {
    /// The key the event is about.
    pub fn key(&self) -> &str {
        match self {
            StoreEvent::Imported { key, .. }
            | StoreEvent::Created { key, .. }
            | StoreEvent::Patched { key, .. }
            | StoreEvent::Reset { key, .. }
            | StoreEvent::Deleted { key, .. }
            | StoreEvent::ModelOverride { key, .. }
            | StoreEvent::LevelOverride { key, .. }
            | StoreEvent::CompactionCounted { key, .. }
            | StoreEvent::MemoryFlushRecorded { key, .. }
            | StoreEvent::SubagentSpawned { key, .. }
            | StoreEvent::SubagentEnded { key, .. }
            | StoreEvent::Archived { key, .. }
            | StoreEvent::Forked { key, .. }
            | StoreEvent::RouteUpdated { key, .. }
            | StoreEvent::UsageRecorded { key, .. } => key,
        }
    }

    /// The event as one line of a store log (`JSON.stringify` of it, no newline).
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        crate::json::to_js_string(&serde_json::to_value(self)?)
    }

    /// Reads one line of a store log.
    pub fn parse(line: &str) -> Result<StoreEvent, LineError> {
        serde_json::from_str(line).map_err(|e| LineError::from_json(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_keep_the_optional_window_out_when_unknown() {
        let event = StoreEvent::UsageRecorded {
            key: "agent:main:main".into(),
            at: 5,
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
            total: 10,
            context_tokens: None,
        };
        let line = event.to_line().unwrap();
        assert_eq!(
            line,
            r#"{"type":"usage_recorded","key":"agent:main:main","at":5,"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"total":10}"#
        );
        assert_eq!(StoreEvent::parse(&line), Ok(event));
        let err = StoreEvent::parse(r#"{"type":"teleported","key":"k"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `teleported`"), "{err}");
    }

    /// An integer beyond 2^53 in an entry is written as JavaScript writes it
    /// (`JSON.stringify(17751613834844413)` is `17751613834844412` in Node),
    /// so it changes once, and the written line then reads back to an event
    /// that writes the same line (found by fuzzing the store log reader).
    #[test]
    fn an_integer_beyond_2_53_is_written_as_javascript_writes_it_once() {
        let input = r#"{"type":"imported","key":"agent:build:main","entry":{"sessionId":"s","updatedAt":17751613834844413}}"#;
        let event = StoreEvent::parse(input).unwrap();
        let line = event.to_line().unwrap();
        assert_eq!(
            line,
            r#"{"type":"imported","key":"agent:build:main","entry":{"sessionId":"s","updatedAt":17751613834844412}}"#
        );
        assert_eq!(StoreEvent::parse(&line).unwrap().to_line().unwrap(), line);
    }
}

//! Input provenance on user messages (spec sessions §6.2).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a user message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A person on a channel.
    ExternalUser,
    /// Another session (`sessions_send`, sub-agent announcements).
    InterSession,
    /// The system itself (cron, completions).
    InternalSystem,
}

/// The `message.provenance` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The kind.
    pub kind: Kind,
    /// The originating session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_session_id: Option<String>,
    /// The originating session key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_session_key: Option<String>,
    /// The originating channel (`internal` for completions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_channel: Option<String>,
    /// The tool that sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_tool: Option<String>,
}

impl Provenance {
    /// Reads a provenance value; an unknown kind makes the whole value absent,
    /// empty strings are dropped.
    pub fn parse(value: &Value) -> Option<Provenance> {
        let mut p: Provenance = serde_json::from_value(value.clone()).ok()?;
        for f in
            [&mut p.origin_session_id, &mut p.source_session_key, &mut p.source_channel, &mut p.source_tool]
        {
            if f.as_deref().is_some_and(|s| s.trim().is_empty()) {
                *f = None;
            }
        }
        Some(p)
    }

    /// The header line an inter-session prompt starts with.
    pub fn header(&self) -> Option<String> {
        (self.kind == Kind::InterSession).then(|| {
            format!(
                "[Inter-session message] sourceSession={} sourceChannel={} sourceTool={} isUser=false",
                self.source_session_key.as_deref().unwrap_or("unknown"),
                self.source_channel.as_deref().unwrap_or("unknown"),
                self.source_tool.as_deref().unwrap_or("unknown"),
            )
        })
    }
}

/// Stamps provenance on a user message (a JSON object) unless it already has one.
pub fn stamp(message: &mut Value, provenance: &Provenance) -> bool {
    let is_user = message.get("role").and_then(Value::as_str) == Some("user");
    let has = message.get("provenance").and_then(Provenance::parse).is_some();
    if !is_user || has {
        return false;
    }
    match (message.as_object_mut(), serde_json::to_value(provenance)) {
        (Some(obj), Ok(v)) => {
            obj.insert("provenance".to_owned(), v);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_kinds_are_absent_and_upstream_provenance_wins() {
        assert_eq!(Provenance::parse(&json!({"kind": "alien"})), None);
        let p = Provenance::parse(
            &json!({"kind": "inter_session", "sourceSessionKey": "agent:main:main", "sourceChannel": ""}),
        )
        .unwrap();
        assert_eq!(p.source_channel, None);
        assert_eq!(p.header().unwrap(), "[Inter-session message] sourceSession=agent:main:main sourceChannel=unknown sourceTool=unknown isUser=false");
        let mut m = json!({"role": "user", "content": "hi"});
        assert!(stamp(&mut m, &p));
        let other = Provenance {
            kind: Kind::ExternalUser,
            origin_session_id: None,
            source_session_key: None,
            source_channel: None,
            source_tool: None,
        };
        assert!(!stamp(&mut m, &other), "an existing provenance is kept");
        assert_eq!(m["provenance"]["kind"], "inter_session");
        assert!(!stamp(&mut json!({"role": "assistant"}), &other));
    }
}

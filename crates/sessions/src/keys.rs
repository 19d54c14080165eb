//! Session ids and session keys (spec sessions §1): the grammar, the
//! normalisation that keeps provider-owned case, and the parsing helpers.

use serde::Serialize;

/// The default agent id.
pub const DEFAULT_AGENT_ID: &str = "main";
/// The default main key.
pub const DEFAULT_MAIN_KEY: &str = "main";
/// The default account id.
pub const DEFAULT_ACCOUNT_ID: &str = "default";

/// True when `s` looks like a (UUID) session id.
pub fn looks_like_session_id(s: &str) -> bool {
    let s = s.trim();
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    groups.len() == 5
        && groups.iter().zip(lens).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Why a session id cannot name a transcript file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSessionId(pub String);

impl std::fmt::Display for InvalidSessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Invalid session ID: {:?}", self.0)
    }
}

impl std::error::Error for InvalidSessionId {}

/// Checks that a session id can name a transcript file: `^[a-z0-9][a-z0-9._-]{0,127}$`
/// (any case), and is not a compaction-checkpoint stem.
pub fn validate_session_id(id: &str) -> Result<&str, InvalidSessionId> {
    let t = id.trim();
    let ok_chars = t
        .bytes()
        .enumerate()
        .all(|(i, b)| b.is_ascii_alphanumeric() || (i > 0 && matches!(b, b'.' | b'_' | b'-')));
    let checkpoint = t
        .split_once(".checkpoint.")
        .is_some_and(|(_, rest)| looks_like_session_id(rest.trim_end_matches(".jsonl")));
    if t.is_empty() || t.len() > 128 || !ok_chars || checkpoint {
        return Err(InvalidSessionId(id.to_owned()));
    }
    Ok(t)
}

fn normalize_id(raw: &str, default: &str, reject_proto: bool) -> String {
    let t = raw.trim();
    if t.is_empty() {
        return default.to_owned();
    }
    if reject_proto && matches!(t, "__proto__" | "constructor" | "prototype") {
        return default.to_owned();
    }
    let valid = t.len() <= 64
        && t.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        return t.to_lowercase();
    }
    let lower = t.to_lowercase();
    let mut out = String::new();
    let mut in_bad = false;
    for c in lower.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
            in_bad = false;
        } else if !in_bad {
            out.push('-');
            in_bad = true;
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(64).collect();
    if trimmed.is_empty() {
        default.to_owned()
    } else {
        trimmed
    }
}

/// `normalizeAgentId`: lowercase, runs of other characters become `-`, ≤ 64, default `main`.
pub fn normalize_agent_id(raw: &str) -> String {
    normalize_id(raw, DEFAULT_AGENT_ID, false)
}

/// `normalizeAccountId`: as agent ids, default `default`, object-prototype names rejected.
pub fn normalize_account_id(raw: &str) -> String {
    normalize_id(raw, DEFAULT_ACCOUNT_ID, true)
}

/// `normalizeMainKey`: trimmed, lowercased, default `main`.
pub fn normalize_main_key(raw: &str) -> String {
    let t = raw.trim().to_lowercase();
    if t.is_empty() {
        DEFAULT_MAIN_KEY.to_owned()
    } else {
        t
    }
}

/// Byte spans of `key` whose case is provider-owned (Signal group ids,
/// Matrix room tails without their `:thread:` marker).
fn preserved_spans(key: &str) -> Vec<(usize, usize)> {
    let lower = key.to_lowercase();
    let mut spans = Vec::new();
    if lower.len() != key.len() {
        return spans; // case folding changed byte lengths: keep it simple, lowercase all
    }
    if let Some(at) = lower.find("signal:group:") {
        let start = at + "signal:group:".len();
        let end = key[start..].find(':').map_or(key.len(), |e| start + e);
        spans.push((start, end));
    }
    for kind in ["matrix:channel:", "matrix:group:"] {
        if let Some(at) = lower.find(kind) {
            let start = at + kind.len();
            match lower[start..].find(":thread:") {
                Some(t) => {
                    spans.push((start, start + t));
                    spans.push((start + t + ":thread:".len(), key.len()));
                }
                None => spans.push((start, key.len())),
            }
        }
    }
    spans
}

/// Normalises a store key: trimmed and lowercased, except provider-owned
/// case-sensitive peer ids (spec §1.4).
pub fn normalize_key(key: &str) -> String {
    let key = key.trim();
    let spans = preserved_spans(key);
    let mut out = String::with_capacity(key.len());
    let mut pos = 0;
    for (s, e) in spans {
        if s < pos {
            continue;
        }
        out.push_str(&key[pos..s].to_lowercase());
        out.push_str(&key[s..e]);
        pos = e;
    }
    out.push_str(&key[pos..].to_lowercase());
    out
}

/// A parsed agent-scoped key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentKey {
    /// The agent id segment.
    pub agent_id: String,
    /// Everything after `agent:<id>:`.
    pub rest: String,
}

/// `parseAgentSessionKey`: normalise, split on `:`, drop empty segments,
/// require `agent` and at least three parts.
pub fn parse_agent_key(key: &str) -> Option<AgentKey> {
    let n = normalize_key(key);
    let parts: Vec<&str> = n.split(':').filter(|p| !p.is_empty()).collect();
    if parts.len() < 3 || parts[0] != "agent" {
        return None;
    }
    Some(AgentKey { agent_id: parts[1].to_owned(), rest: parts[2..].join(":") })
}

/// The agent a key belongs to (`main` when it is not agent-scoped).
pub fn agent_id_of(key: &str) -> String {
    parse_agent_key(key).map_or_else(|| DEFAULT_AGENT_ID.to_owned(), |k| normalize_agent_id(&k.agent_id))
}

/// `classifySessionKeyShape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyShape {
    /// Blank.
    Missing,
    /// `agent:<a>:<rest>`.
    Agent,
    /// Starts with `agent:` but does not parse.
    MalformedAgent,
    /// Anything else (legacy keys, aliases, `global`, `hook:…`).
    LegacyOrAlias,
}

/// Classifies a key's shape.
pub fn classify(key: &str) -> KeyShape {
    let t = key.trim();
    if t.is_empty() {
        KeyShape::Missing
    } else if parse_agent_key(t).is_some() {
        KeyShape::Agent
    } else if t.to_lowercase().starts_with("agent:") {
        KeyShape::MalformedAgent
    } else {
        KeyShape::LegacyOrAlias
    }
}

fn rest_or_key(key: &str) -> String {
    parse_agent_key(key).map_or_else(|| normalize_key(key), |k| k.rest)
}

/// A cron job's session (`cron:` after the agent prefix).
pub fn is_cron(key: &str) -> bool {
    parse_agent_key(key).is_some_and(|k| k.rest.starts_with("cron:"))
}

/// An isolated cron run (`cron:<job>:run:<sessionId>`).
pub fn is_cron_run(key: &str) -> bool {
    parse_agent_key(key).is_some_and(|k| {
        let p: Vec<&str> = k.rest.split(':').collect();
        p.len() >= 4 && p[0] == "cron" && p[2] == "run"
    })
}

/// A sub-agent session (the raw key or its rest starts with `subagent:`).
pub fn is_subagent(key: &str) -> bool {
    normalize_key(key).starts_with("subagent:") || rest_or_key(key).starts_with("subagent:")
}

/// Nesting depth of a sub-agent key: occurrences of `:subagent:`.
pub fn subagent_depth(key: &str) -> usize {
    normalize_key(key).matches(":subagent:").count()
}

/// An ACP harness session.
pub fn is_acp(key: &str) -> bool {
    normalize_key(key).starts_with("acp:") || rest_or_key(key).starts_with("acp:")
}

/// A webhook session (`hook:…`).
pub fn is_hook(key: &str) -> bool {
    normalize_key(key).starts_with("hook:") || rest_or_key(key).starts_with("hook:")
}

/// `parseThreadSessionSuffix`: the base key and thread id, split at the last
/// `:thread:` or `:topic:` (whichever occurs later).
pub fn thread_suffix(key: &str) -> Option<(String, String)> {
    let lower = key.to_lowercase();
    let at = [":thread:", ":topic:"]
        .iter()
        .filter_map(|m| lower.rfind(m).map(|i| (i, m.len())))
        .max_by_key(|(i, _)| *i)?;
    let id = key[at.0 + at.1..].trim();
    (!id.is_empty()).then(|| (key[..at.0].to_owned(), id.to_owned()))
}

/// The chat type a key implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatType {
    /// A direct message.
    Direct,
    /// A group.
    Group,
    /// A channel or room.
    Channel,
    /// Not derivable.
    Unknown,
}

/// Chat type from a key: `group`/`channel`/`direct`/`dm` tokens, then the
/// legacy shapes (`…@g.us`, `discord:…:channel-…`, `<ch>:dm:<peer>`).
pub fn chat_type(key: &str) -> ChatType {
    let rest = rest_or_key(key);
    let tokens: Vec<&str> = rest.split(':').collect();
    if tokens.contains(&"group") {
        return ChatType::Group;
    }
    if tokens.contains(&"channel") || tokens.contains(&"room") {
        return ChatType::Channel;
    }
    if tokens.contains(&"direct") || tokens.contains(&"dm") {
        return ChatType::Direct;
    }
    if rest.ends_with("@g.us") {
        return ChatType::Group;
    }
    if rest.starts_with("discord:") && rest.contains("channel-") {
        return ChatType::Channel;
    }
    ChatType::Unknown
}

/// Everything `sessionlog key parse` reports about a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    /// The normalised key.
    pub normalized: String,
    /// Its shape.
    pub shape: KeyShape,
    /// Agent id (`main` when not agent-scoped).
    pub agent_id: String,
    /// The part after `agent:<a>:`.
    pub rest: Option<String>,
    /// Chat type.
    pub chat_type: ChatType,
    /// Cron job session.
    pub cron: bool,
    /// Isolated cron run.
    pub cron_run: bool,
    /// Sub-agent session.
    pub subagent: bool,
    /// Sub-agent nesting depth.
    pub subagent_depth: usize,
    /// ACP harness session.
    pub acp: bool,
    /// Webhook session.
    pub hook: bool,
    /// Base key when the key has a thread or topic suffix.
    pub thread_parent: Option<String>,
    /// The thread or topic id.
    pub thread_id: Option<String>,
}

/// Parses everything about a key.
pub fn key_info(key: &str) -> KeyInfo {
    let parsed = parse_agent_key(key);
    let thread = thread_suffix(&normalize_key(key));
    KeyInfo {
        normalized: normalize_key(key),
        shape: classify(key),
        agent_id: agent_id_of(key),
        rest: parsed.map(|p| p.rest),
        chat_type: chat_type(key),
        cron: is_cron(key),
        cron_run: is_cron_run(key),
        subagent: is_subagent(key),
        subagent_depth: subagent_depth(key),
        acp: is_acp(key),
        hook: is_hook(key),
        thread_parent: thread.as_ref().map(|t| t.0.clone()),
        thread_id: thread.map(|t| t.1),
    }
}

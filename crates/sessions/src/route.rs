//! Routing an inbound message to its session key (spec sessions §2):
//! bindings choose the agent, the DM scope chooses the key.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::keys::{normalize_account_id, normalize_agent_id, normalize_main_key, DEFAULT_ACCOUNT_ID};

/// What kind of conversation a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerKind {
    /// A direct message.
    #[default]
    Direct,
    /// A group.
    Group,
    /// A channel.
    Channel,
}

impl PeerKind {
    fn name(self) -> &'static str {
        match self {
            PeerKind::Direct => "direct",
            PeerKind::Group => "group",
            PeerKind::Channel => "channel",
        }
    }
}

/// The other side of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Peer {
    /// Its kind.
    pub kind: PeerKind,
    /// Its id on the channel.
    pub id: String,
}

impl Peer {
    fn matches(&self, other: &Peer) -> bool {
        // Groups and channels match each other.
        let kinds =
            self.kind == other.kind || (self.kind != PeerKind::Direct && other.kind != PeerKind::Direct);
        kinds && self.id.trim().eq_ignore_ascii_case(other.id.trim())
    }
}

/// How direct messages are bucketed (`session.dmScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DmScope {
    /// Every DM in the agent's main session.
    #[default]
    Main,
    /// One session per peer.
    PerPeer,
    /// One per channel and peer.
    PerChannelPeer,
    /// One per account, channel and peer.
    PerAccountChannelPeer,
}

impl std::str::FromStr for PeerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [PeerKind::Direct, PeerKind::Group, PeerKind::Channel]
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("`{s}` (direct, group, channel)"))
    }
}

impl std::str::FromStr for DmScope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "main" => Ok(DmScope::Main),
            "per-peer" => Ok(DmScope::PerPeer),
            "per-channel-peer" => Ok(DmScope::PerChannelPeer),
            "per-account-channel-peer" => Ok(DmScope::PerAccountChannelPeer),
            other => Err(format!("`{other}` (main, per-peer, per-channel-peer, per-account-channel-peer)")),
        }
    }
}

/// A binding from config: which agent handles what.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding {
    /// The agent.
    pub agent_id: String,
    /// The channel it binds.
    pub channel: String,
    /// The account (`*` = any; none = the default account).
    pub account_id: Option<String>,
    /// A specific peer.
    pub peer: Option<Peer>,
    /// A guild (Discord server).
    pub guild_id: Option<String>,
    /// A team (Slack workspace).
    pub team_id: Option<String>,
    /// Member roles, any of which matches (with the guild).
    pub roles: Vec<String>,
}

/// Routing configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteConfig {
    /// Bindings in config order.
    pub bindings: Vec<Binding>,
    /// `agents.list` ids; the first is the default unless `default_agent` is set.
    pub agents: Vec<String>,
    /// The agent flagged `default: true`.
    pub default_agent: Option<String>,
    /// DM bucketing.
    pub dm_scope: DmScope,
    /// The main key (legacy setting; `main`).
    pub main_key: String,
    /// Identity links: canonical name → `["telegram:123", "discord:987", "rawid"]`.
    pub identity_links: BTreeMap<String, Vec<String>>,
    /// `session.scope: "global"`.
    pub global_scope: bool,
}

/// An inbound message's routing facts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inbound {
    /// The channel (`telegram`, `discord`, …).
    pub channel: String,
    /// The account on the channel.
    pub account_id: Option<String>,
    /// The conversation.
    pub peer: Peer,
    /// The thread's parent conversation, for threads.
    pub parent_peer: Option<Peer>,
    /// Guild id.
    pub guild_id: Option<String>,
    /// Team id.
    pub team_id: Option<String>,
    /// The sender's roles.
    pub member_roles: Vec<String>,
    /// Thread id, when the message is in a thread.
    pub thread_id: Option<String>,
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// The agent.
    pub agent_id: String,
    /// The session key.
    pub session_key: String,
    /// The agent's main key.
    pub main_session_key: String,
    /// `main` when the session is the main one (last-route updates target it).
    pub last_route_policy: &'static str,
    /// Which tier chose the agent.
    pub matched_by: &'static str,
}

fn account_matches(binding: &Binding, account: &str) -> bool {
    match binding.account_id.as_deref().map(str::trim) {
        Some("*") => true,
        Some(a) => normalize_account_id(a) == account,
        None => account == DEFAULT_ACCOUNT_ID,
    }
}

fn opt_eq(a: &Option<String>, b: &Option<String>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x.trim().eq_ignore_ascii_case(y.trim()))
}

/// Picks the agent by the binding tiers, first hit wins.
fn select_agent(cfg: &RouteConfig, m: &Inbound, account: &str) -> (String, &'static str) {
    let channel = m.channel.trim().to_lowercase();
    let candidates: Vec<&Binding> = cfg
        .bindings
        .iter()
        .filter(|b| b.channel.trim().eq_ignore_ascii_case(&channel) && account_matches(b, account))
        .collect();
    let plain = |b: &Binding| b.peer.is_none() && b.guild_id.is_none() && b.team_id.is_none();
    type Tier<'t> = (&'static str, &'t dyn Fn(&Binding) -> bool);
    let tiers: [Tier<'_>; 7] = [
        ("binding.peer", &|b| b.peer.as_ref().is_some_and(|p| p.matches(&m.peer))),
        ("binding.peer.parent", &|b| {
            b.peer.as_ref().is_some_and(|p| m.parent_peer.as_ref().is_some_and(|pp| p.matches(pp)))
        }),
        ("binding.guild+roles", &|b| {
            b.peer.is_none()
                && opt_eq(&b.guild_id, &m.guild_id)
                && !b.roles.is_empty()
                && b.roles.iter().any(|r| m.member_roles.contains(r))
        }),
        ("binding.guild", &|b| b.peer.is_none() && b.roles.is_empty() && opt_eq(&b.guild_id, &m.guild_id)),
        ("binding.team", &|b| b.peer.is_none() && b.guild_id.is_none() && opt_eq(&b.team_id, &m.team_id)),
        ("binding.account", &|b| plain(b) && b.account_id.as_deref().is_some_and(|a| a.trim() != "*")),
        ("binding.channel", &|b| plain(b) && b.account_id.as_deref().map(str::trim) == Some("*")),
    ];
    let default_agent = || {
        cfg.default_agent.clone().or_else(|| cfg.agents.first().cloned()).unwrap_or_else(|| "main".to_owned())
    };
    for (name, test) in tiers {
        if let Some(b) = candidates.iter().find(|b| test(b)) {
            let id = normalize_agent_id(&b.agent_id);
            let known = cfg.agents.is_empty() || cfg.agents.iter().any(|a| normalize_agent_id(a) == id);
            return (if known { id } else { normalize_agent_id(&default_agent()) }, name);
        }
    }
    (normalize_agent_id(&default_agent()), "default")
}

/// `peerKey`: the session key for a peer under a DM scope (spec §2.2).
pub fn peer_key(agent: &str, channel: &str, account: &str, peer: &Peer, cfg: &RouteConfig) -> String {
    let ch =
        Some(channel.trim().to_lowercase()).filter(|c| !c.is_empty()).unwrap_or_else(|| "unknown".to_owned());
    let main_key = normalize_main_key(&cfg.main_key);
    if peer.kind != PeerKind::Direct {
        let id = Some(peer.id.trim().to_lowercase())
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());
        return format!("agent:{agent}:{ch}:{}:{id}", peer.kind.name());
    }
    let mut id = peer.id.trim().to_owned();
    if cfg.dm_scope != DmScope::Main {
        let candidates = [id.to_lowercase(), format!("{ch}:{}", id.to_lowercase())];
        if let Some((canonical, _)) = cfg
            .identity_links
            .iter()
            .find(|(_, ids)| ids.iter().any(|l| candidates.contains(&l.trim().to_lowercase())))
        {
            id = canonical.clone();
        }
    }
    let id = id.to_lowercase();
    match cfg.dm_scope {
        _ if id.is_empty() => format!("agent:{agent}:{main_key}"),
        DmScope::PerAccountChannelPeer => format!("agent:{agent}:{ch}:{account}:direct:{id}"),
        DmScope::PerChannelPeer => format!("agent:{agent}:{ch}:direct:{id}"),
        DmScope::PerPeer => format!("agent:{agent}:direct:{id}"),
        DmScope::Main => format!("agent:{agent}:{main_key}"),
    }
}

/// Routes an inbound message: bindings → agent, DM scope → key, thread suffix.
pub fn route(cfg: &RouteConfig, m: &Inbound) -> Route {
    let account = normalize_account_id(m.account_id.as_deref().unwrap_or(""));
    let (agent_id, matched_by) = select_agent(cfg, m, &account);
    let main_session_key = format!("agent:{agent_id}:{}", normalize_main_key(&cfg.main_key));
    let mut session_key = if cfg.global_scope {
        "global".to_owned()
    } else {
        peer_key(&agent_id, &m.channel, &account, &m.peer, cfg)
    };
    if let Some(thread) = m.thread_id.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        if !cfg.global_scope {
            session_key = format!("{session_key}:thread:{}", thread.to_lowercase());
        }
    }
    let last_route_policy = if session_key == main_session_key { "main" } else { "session" };
    Route { agent_id, session_key, main_session_key, last_route_policy, matched_by }
}

//! Table-driven checks of every key shape in spec sessions §1.3 and of routing (§2).

use std::collections::BTreeMap;

use sessionlog_sessions::keys::*;
use sessionlog_sessions::route::*;

/// (key, shape, agent, chat type, cron, cron run, subagent depth, acp, hook, thread id)
type Row =
    (&'static str, KeyShape, &'static str, ChatType, bool, bool, usize, bool, bool, Option<&'static str>);

#[test]
fn every_key_shape() {
    use ChatType::*;
    use KeyShape::*;
    let rows: Vec<Row> = vec![
        ("agent:main:main", Agent, "main", Unknown, false, false, 0, false, false, None),
        ("global", LegacyOrAlias, "main", Unknown, false, false, 0, false, false, None),
        ("unknown", LegacyOrAlias, "main", Unknown, false, false, 0, false, false, None),
        ("agent:main:direct:alice", Agent, "main", Direct, false, false, 0, false, false, None),
        ("agent:ops:telegram:direct:12345", Agent, "ops", Direct, false, false, 0, false, false, None),
        ("agent:ops:telegram:acct2:direct:12345", Agent, "ops", Direct, false, false, 0, false, false, None),
        ("agent:build:discord:group:987", Agent, "build", Group, false, false, 0, false, false, None),
        (
            "agent:build:discord:channel:1470812208257826836",
            Agent,
            "build",
            Channel,
            false,
            false,
            0,
            false,
            false,
            None,
        ),
        ("agent:build:slack:room:c01", Agent, "build", Channel, false, false, 0, false, false, None),
        (
            "agent:build:discord:channel:42:thread:777",
            Agent,
            "build",
            Channel,
            false,
            false,
            0,
            false,
            false,
            Some("777"),
        ),
        (
            "agent:main:telegram:group:-100123:topic:9",
            Agent,
            "main",
            Group,
            false,
            false,
            0,
            false,
            false,
            Some("9"),
        ),
        (
            "agent:build:subagent:3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f",
            Agent,
            "build",
            Unknown,
            false,
            false,
            1,
            false,
            false,
            None,
        ),
        ("agent:build:subagent:a:subagent:b", Agent, "build", Unknown, false, false, 2, false, false, None),
        ("agent:build:cron:041c005d", Agent, "build", Unknown, true, false, 0, false, false, None),
        (
            "agent:build:cron:041c005d:run:678366ea-e225-4877-a005-d4b79b0ed0ec",
            Agent,
            "build",
            Unknown,
            true,
            true,
            0,
            false,
            false,
            None,
        ),
        ("hook:8d7e", LegacyOrAlias, "main", Unknown, false, false, 0, false, true, None),
        ("node-abc", LegacyOrAlias, "main", Unknown, false, false, 0, false, false, None),
        ("acp:session-1", LegacyOrAlias, "main", Unknown, false, false, 0, true, false, None),
        ("agent:main:acp:x", Agent, "main", Unknown, false, false, 0, true, false, None),
        ("agent:main:main:heartbeat", Agent, "main", Unknown, false, false, 0, false, false, None),
        ("agent:main:explicit:model-run-1", Agent, "main", Unknown, false, false, 0, false, false, None),
        ("group:123", LegacyOrAlias, "main", Group, false, false, 0, false, false, None),
        ("120363@g.us", LegacyOrAlias, "main", Group, false, false, 0, false, false, None),
        ("whatsapp:120363@g.us", LegacyOrAlias, "main", Group, false, false, 0, false, false, None),
        (
            "discord:acct:guild-1:channel-2",
            LegacyOrAlias,
            "main",
            Channel,
            false,
            false,
            0,
            false,
            false,
            None,
        ),
        ("telegram:dm:55", LegacyOrAlias, "main", Direct, false, false, 0, false, false, None),
        (
            "agent:build:discord:pip-build:direct:1470",
            Agent,
            "build",
            Direct,
            false,
            false,
            0,
            false,
            false,
            None,
        ),
        ("agent:", MalformedAgent, "main", Unknown, false, false, 0, false, false, None),
        ("agent::main", MalformedAgent, "main", Unknown, false, false, 0, false, false, None),
        ("  ", Missing, "main", Unknown, false, false, 0, false, false, None),
    ];
    for (key, shape, agent, chat, cron, cron_run, depth, acp, hook, thread) in rows {
        let i = key_info(key);
        assert_eq!(i.shape, shape, "{key}");
        assert_eq!(i.agent_id, agent, "{key}");
        assert_eq!(i.chat_type, chat, "{key}");
        assert_eq!((i.cron, i.cron_run), (cron, cron_run), "{key}");
        assert_eq!(i.subagent_depth, depth, "{key}");
        assert_eq!(i.subagent, depth > 0, "{key}");
        assert_eq!((i.acp, i.hook), (acp, hook), "{key}");
        assert_eq!(i.thread_id.as_deref(), thread, "{key}");
    }
}

#[test]
fn normalisation_keeps_provider_owned_case() {
    let cases = [
        ("  Agent:Main:MAIN ", "agent:main:main"),
        ("agent:main:signal:group:AbC+/=:thread:X", "agent:main:signal:group:AbC+/=:thread:x"),
        ("signal:group:AbC", "signal:group:AbC"),
        ("agent:main:matrix:channel:!RoomID:Server.org", "agent:main:matrix:channel:!RoomID:Server.org"),
        (
            "agent:main:Matrix:Group:!Room:S.org:THREAD:$EvT",
            "agent:main:matrix:group:!Room:S.org:thread:$EvT",
        ),
        ("agent:main:Discord:Channel:ABC", "agent:main:discord:channel:abc"),
    ];
    for (raw, want) in cases {
        assert_eq!(normalize_key(raw), want, "{raw}");
    }
}

#[test]
fn ids_normalise_as_openclaw_does() {
    assert_eq!(normalize_agent_id(""), "main");
    assert_eq!(normalize_agent_id("Build"), "build");
    assert_eq!(normalize_agent_id("  My Agent!! v2 "), "my-agent-v2");
    assert_eq!(normalize_agent_id("***"), "main");
    assert_eq!(normalize_account_id("__proto__"), "default");
    assert_eq!(normalize_account_id("_bot"), "_bot");
    assert_eq!(normalize_main_key(" MAIN "), "main");
    assert!(looks_like_session_id(" 678366EA-e225-4877-a005-d4b79b0ed0ec "));
    assert!(!looks_like_session_id("sess-1"));
    assert_eq!(validate_session_id("sess-1"), Ok("sess-1"));
    assert!(validate_session_id("../etc/passwd").is_err());
    assert!(validate_session_id("a/b").is_err());
    assert!(validate_session_id("-x").is_err());
    assert!(validate_session_id("x.checkpoint.678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl").is_err());
    assert!(validate_session_id(&"a".repeat(129)).is_err());
}

fn inbound(channel: &str, kind: PeerKind, id: &str) -> Inbound {
    Inbound {
        channel: channel.to_owned(),
        account_id: None,
        peer: Peer { kind, id: id.to_owned() },
        parent_peer: None,
        guild_id: None,
        team_id: None,
        member_roles: vec![],
        thread_id: None,
    }
}

#[test]
fn dm_scopes_build_the_documented_keys() {
    let mut cfg = RouteConfig { main_key: "main".into(), ..RouteConfig::default() };
    cfg.identity_links =
        BTreeMap::from([("bill".to_owned(), vec!["telegram:123".to_owned(), "discord:987".to_owned()])]);
    let dm = inbound("Telegram", PeerKind::Direct, "123");
    let cases = [
        (DmScope::Main, "agent:main:main", "main"),
        (DmScope::PerPeer, "agent:main:direct:bill", "session"),
        (DmScope::PerChannelPeer, "agent:main:telegram:direct:bill", "session"),
        (DmScope::PerAccountChannelPeer, "agent:main:telegram:default:direct:bill", "session"),
    ];
    for (scope, key, policy) in cases {
        cfg.dm_scope = scope;
        let r = route(&cfg, &dm);
        assert_eq!((r.session_key.as_str(), r.last_route_policy), (key, policy), "{scope:?}");
    }
    let group = inbound("discord", PeerKind::Channel, "1470812208257826836");
    assert_eq!(route(&cfg, &group).session_key, "agent:main:discord:channel:1470812208257826836");
    let mut threaded = group.clone();
    threaded.thread_id = Some("T99".into());
    assert_eq!(
        route(&cfg, &threaded).session_key,
        "agent:main:discord:channel:1470812208257826836:thread:t99"
    );
    cfg.global_scope = true;
    assert_eq!(route(&cfg, &group).session_key, "global");
}

#[test]
fn binding_tiers_pick_the_agent_first_hit_wins() {
    let b = |agent: &str| Binding {
        agent_id: agent.into(),
        channel: "discord".into(),
        account_id: Some("*".into()),
        ..Binding::default()
    };
    let cfg = RouteConfig {
        main_key: "main".into(),
        agents: vec![
            "main".into(),
            "ops".into(),
            "build".into(),
            "mods".into(),
            "team".into(),
            "acct".into(),
        ],
        bindings: vec![
            b("build"),
            Binding { account_id: Some("bot2".into()), ..b("acct") },
            Binding { team_id: Some("T1".into()), ..b("team") },
            Binding { guild_id: Some("G1".into()), ..b("ops") },
            Binding { guild_id: Some("G1".into()), roles: vec!["mod".into()], ..b("mods") },
            Binding { peer: Some(Peer { kind: PeerKind::Group, id: "42".into() }), ..b("ops") },
            Binding {
                agent_id: "ghost".into(),
                peer: Some(Peer { kind: PeerKind::Channel, id: "7".into() }),
                ..b("x")
            },
        ],
        ..RouteConfig::default()
    };
    let mut m = inbound("discord", PeerKind::Channel, "42");
    assert_eq!((route(&cfg, &m).agent_id.as_str(), route(&cfg, &m).matched_by), ("ops", "binding.peer"));
    m.peer.id = "43".into();
    m.parent_peer = Some(Peer { kind: PeerKind::Group, id: "42".into() });
    assert_eq!(route(&cfg, &m).matched_by, "binding.peer.parent");
    m.parent_peer = None;
    m.guild_id = Some("g1".into());
    m.member_roles = vec!["mod".into()];
    assert_eq!(
        (route(&cfg, &m).agent_id.as_str(), route(&cfg, &m).matched_by),
        ("mods", "binding.guild+roles")
    );
    m.member_roles.clear();
    assert_eq!((route(&cfg, &m).agent_id.as_str(), route(&cfg, &m).matched_by), ("ops", "binding.guild"));
    m.guild_id = None;
    m.team_id = Some("T1".into());
    assert_eq!(route(&cfg, &m).agent_id, "team");
    m.team_id = None;
    m.account_id = Some("bot2".into());
    assert_eq!((route(&cfg, &m).agent_id.as_str(), route(&cfg, &m).matched_by), ("acct", "binding.account"));
    m.account_id = None;
    assert_eq!((route(&cfg, &m).agent_id.as_str(), route(&cfg, &m).matched_by), ("build", "binding.channel"));
    // A bound agent missing from agents.list falls back to the default (the first listed).
    m.peer = Peer { kind: PeerKind::Channel, id: "7".into() };
    assert_eq!(route(&cfg, &m).agent_id, "main");
    // Another channel: no binding, the default agent.
    let other = inbound("telegram", PeerKind::Direct, "5");
    assert_eq!((route(&cfg, &other).agent_id.as_str(), route(&cfg, &other).matched_by), ("main", "default"));
}

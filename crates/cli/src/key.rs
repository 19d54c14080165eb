//! `sessionlog key`: what a session key means; which key an inbound message gets.

use std::io::Write;

use anyhow::Result;
use sessionlog_sessions::route::{DmScope, Inbound, Peer, PeerKind, RouteConfig};

use crate::common::print_pretty;

/// `sessionlog key …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Parse a session key: normalised form, shape, agent, chat type, cron/sub-agent/ACP/hook, thread.
    Parse {
        /// The key.
        key: String,
        /// Print JSON (the default is text).
        #[arg(long)]
        json: bool,
    },
    /// Route an inbound message to its session key (no bindings: the default agent).
    Route {
        /// The channel (telegram, discord, …).
        #[arg(long)]
        channel: String,
        /// direct, group or channel.
        #[arg(long, default_value = "direct")]
        peer_kind: PeerKind,
        /// The peer id on the channel.
        #[arg(long)]
        peer: String,
        /// The account on the channel.
        #[arg(long)]
        account: Option<String>,
        /// Thread id.
        #[arg(long)]
        thread: Option<String>,
        /// main, per-peer, per-channel-peer or per-account-channel-peer.
        #[arg(long, default_value = "main")]
        dm_scope: DmScope,
        /// The agent handling the channel.
        #[arg(long, default_value = "main")]
        agent: String,
    },
}

pub(crate) fn run(command: Command, out: &mut dyn Write) -> Result<()> {
    match command {
        Command::Parse { key, json } => {
            let info = sessionlog_sessions::key_info(&key);
            if json {
                print_pretty(out, &serde_json::to_value(&info)?)
            } else {
                writeln!(out, "{}", serde_json::to_string(&info)?)?;
                Ok(())
            }
        }
        Command::Route { channel, peer_kind: kind, peer, account, thread, dm_scope, agent } => {
            let cfg = RouteConfig {
                agents: vec![agent],
                dm_scope,
                main_key: "main".to_owned(),
                ..RouteConfig::default()
            };
            let peer = Peer { kind, id: peer };
            let inbound =
                Inbound { channel, account_id: account, peer, thread_id: thread, ..Inbound::default() };
            print_pretty(out, &serde_json::to_value(sessionlog_sessions::route(&cfg, &inbound))?)
        }
    }
}

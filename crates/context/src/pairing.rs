//! Tool-call/result pairing in an assembled context: a diagnostic, not a
//! repair (provider-specific repair is transcript hygiene's job).

use std::collections::HashMap;

use sessionlog_events::Role;

use crate::assemble::AgentMessage;

/// A broken tool-call/result pair in a context.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PairingIssue {
    /// An assistant tool call with no result after it in the context.
    MissingResult {
        /// The tool call id.
        call_id: String,
        /// The entry holding the call.
        entry_id: Option<String>,
    },
    /// A tool result whose call is not before it in the context.
    OrphanResult {
        /// The tool call id it answers.
        call_id: String,
        /// The entry holding the result.
        entry_id: Option<String>,
    },
}

/// Lists every unanswered tool call and every orphaned tool result, in order.
pub fn check_pairs(messages: &[AgentMessage<'_>]) -> Vec<PairingIssue> {
    let mut open: HashMap<&str, Option<String>> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut issues = Vec::new();
    for m in messages {
        match m.message.role() {
            Role::Assistant => {
                for block in m.message.blocks() {
                    if block.kind.as_deref() == Some("toolCall") {
                        if let Some(id) = block.id.as_deref() {
                            open.insert(id, m.entry.id.clone());
                            order.push(id);
                        }
                    }
                }
            }
            Role::ToolResult => {
                let call = m.message.tool_call_id.as_deref().unwrap_or_default();
                if open.remove(call).is_none() {
                    issues.push(PairingIssue::OrphanResult {
                        call_id: call.to_owned(),
                        entry_id: m.entry.id.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    for id in order {
        if let Some(entry_id) = open.remove(id) {
            issues.push(PairingIssue::MissingResult { call_id: id.to_owned(), entry_id });
        }
    }
    issues
}

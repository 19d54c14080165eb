//! Tools the model calls: the [`Tool`] trait, the [`Workspace`] every
//! built-in is rooted at, and Pi's built-ins [`Read`], [`Write`], [`Edit`]
//! and [`Bash`] with Pi's texts, limits and truncation.
//!
//! A call becomes a `toolResult` message exactly as Pi's agent loop writes
//! it ([`result_message`]): `role, toolCallId, toolName, content, details,
//! isError, timestamp`; a failure is the error's text with `details: {}`.

mod bash;
mod edit;
mod memory;
mod read;
pub mod truncate;
mod workspace;
mod write;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use sessionlog_provider::CancellationToken;

pub use bash::Bash;
pub use edit::Edit;
pub use memory::{MemoryGet, MemorySearch};
pub use read::Read;
pub use workspace::{PathError, Workspace};
pub use write::Write;

/// What a tool returns on success (Pi's `AgentToolResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The content blocks the model sees (`text`, `image`).
    pub content: Vec<Value>,
    /// What the UI keeps (never sent to the model); `None` is left out.
    pub details: Option<Value>,
}

impl ToolOutput {
    /// One text block, no details.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput { content: vec![json!({"type": "text", "text": text.into()})], details: None }
    }
}

/// A boxed future a tool returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, String>> + Send + 'a>>;

/// A tool: its definition for the model and its execution. An `Err` is the
/// message of the error result the model receives.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> String;
    /// Its arguments as a JSON Schema object (TypeBox's key order).
    fn parameters(&self) -> Value;
    /// Runs the call; `cancel` aborts it.
    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a>;
}

/// The definition the provider sends for `tool`.
pub fn definition(tool: &dyn Tool) -> sessionlog_provider::Tool {
    sessionlog_provider::Tool {
        name: tool.name().to_owned(),
        description: tool.description(),
        parameters: tool.parameters(),
    }
}

/// A string property of a TypeBox schema: `{description, type}`.
pub(crate) fn string_prop(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

/// A number property of a TypeBox schema.
pub(crate) fn number_prop(description: &str) -> Value {
    json!({"description": description, "type": "number"})
}

/// A TypeBox object schema: `{type, properties, required}`.
pub(crate) fn object_schema(properties: &[(&str, Value)], required: &[&str]) -> Value {
    let props: Map<String, Value> = properties.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// Pi's built-in coding tools rooted at `workspace`: `read`, `bash`,
/// `edit`, `write` (Pi's default order).
pub fn builtins(workspace: &Workspace, bash_timeout_secs: Option<f64>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Read::new(workspace.clone())),
        Arc::new(Bash::new(workspace.clone(), bash_timeout_secs)),
        Arc::new(Edit::new(workspace.clone())),
        Arc::new(Write::new(workspace.clone())),
    ]
}

/// OpenClaw's memory tools for `workspace`: `memory_search` over the index
/// at `<state_dir>/memory/index.sqlite`, and `memory_get`.
pub fn memory_tools(workspace: &Workspace, state_dir: &std::path::Path) -> Vec<Arc<dyn Tool>> {
    let config = sessionlog_memory::IndexConfig::new(workspace.root(), Some(state_dir));
    vec![Arc::new(MemorySearch::new(config)), Arc::new(MemoryGet::new(workspace.root().to_path_buf()))]
}

/// The tools an agent gets from its configuration: Pi's built-ins, then the
/// memory tools when `[memory] enabled = true`.
pub fn configured(workspace: &Workspace, config: &crate::Config) -> Vec<Arc<dyn Tool>> {
    let mut tools = builtins(workspace, config.bash_timeout_secs);
    if config.memory.enabled {
        tools.extend(memory_tools(workspace, &config.state_dir));
    }
    tools
}

/// The arguments checked against the tool's schema as Pi's
/// `validateToolArguments` reports a failure (required properties and
/// primitive types).
fn validate(tool: &dyn Tool, args: &Value) -> Result<(), String> {
    let schema = tool.parameters();
    let mut errors = Vec::new();
    let obj = args.as_object();
    if obj.is_none() {
        errors.push("  - root: must be object".to_owned());
    }
    if let Some(obj) = obj {
        for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                errors.push(format!("  - {name}: must have required property '{name}'"));
            }
        }
        for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
            let Some(value) = obj.get(name) else { continue };
            let ok = match prop["type"].as_str() {
                Some("string") => value.is_string(),
                Some("number") => value.is_number(),
                _ => true,
            };
            if !ok {
                errors.push(format!("  - {name}: must be {}", prop["type"].as_str().unwrap_or("valid")));
            }
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut received = Vec::new();
    let _ = sessionlog_events::json::write_js_pretty(&mut received, args);
    let received = String::from_utf8_lossy(&received);
    Err(format!(
        "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{received}",
        tool.name(),
        errors.join("\n")
    ))
}

/// Runs one tool call as Pi's agent loop does: an unknown tool, invalid
/// arguments or a failure become an error result; returns the output and
/// whether it is an error.
pub async fn execute(
    tools: &[Arc<dyn Tool>],
    name: &str,
    args: &Value,
    cancel: CancellationToken,
) -> (ToolOutput, bool) {
    let error = |message: String| {
        (
            ToolOutput { content: vec![json!({"type": "text", "text": message})], details: Some(json!({})) },
            true,
        )
    };
    let Some(tool) = tools.iter().find(|t| t.name() == name) else {
        return error(format!("Tool {name} not found"));
    };
    if let Err(message) = validate(tool.as_ref(), args) {
        return error(message);
    }
    match tool.call(args, cancel).await {
        Ok(output) => (output, false),
        Err(message) => error(message),
    }
}

/// The `toolResult` message as Pi writes it.
pub fn result_message(
    tool_call_id: &str,
    tool_name: &str,
    output: &ToolOutput,
    is_error: bool,
    timestamp_ms: i64,
) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("toolResult"));
    m.insert("toolCallId".into(), json!(tool_call_id));
    m.insert("toolName".into(), json!(tool_name));
    m.insert("content".into(), Value::Array(output.content.clone()));
    if let Some(details) = &output.details {
        m.insert("details".into(), details.clone());
    }
    m.insert("isError".into(), json!(is_error));
    m.insert("timestamp".into(), json!(timestamp_ms));
    Value::Object(m)
}

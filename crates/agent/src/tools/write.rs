//! Pi's `write`: creates or overwrites a file, parent folders included.

use serde_json::Value;
use sessionlog_provider::CancellationToken;

use super::read::node_io_error;
use super::{object_schema, string_prop, Tool, ToolFuture, ToolOutput, Workspace};

/// Pi's `write` tool.
#[derive(Debug, Clone)]
pub struct Write {
    workspace: Workspace,
}

impl Write {
    /// `write` rooted at `workspace`.
    pub fn new(workspace: Workspace) -> Write {
        Write { workspace }
    }
}

impl Tool for Write {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> String {
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".to_owned()
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("path", string_prop("Path to the file to write (relative or absolute)")),
                ("content", string_prop("Content to write to the file")),
            ],
            &["path", "content"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err("Operation aborted".to_owned());
            }
            let path_arg = args["path"].as_str().unwrap_or_default().to_owned();
            let content = args["content"].as_str().unwrap_or_default().to_owned();
            let path = self.workspace.resolve(&path_arg).map_err(|e| e.to_string())?;
            tokio::task::spawn_blocking(move || {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| node_io_error(&e, "mkdir", dir))?;
                }
                std::fs::write(&path, content.as_bytes()).map_err(|e| node_io_error(&e, "open", &path))?;
                // JavaScript's `content.length`: UTF-16 code units.
                let n = content.encode_utf16().count();
                Ok(ToolOutput::text(format!("Successfully wrote {n} bytes to {path_arg}")))
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }
}

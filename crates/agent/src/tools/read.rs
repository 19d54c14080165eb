//! Pi's `read`: a text file (from `offset`, at most `limit` lines),
//! truncated to 2000 lines or 50 KB with Pi's notices, or an image as an
//! attachment.

use serde_json::{json, Value};
use sessionlog_provider::CancellationToken;

use super::truncate::{format_size, truncate_head, TruncatedBy, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::{number_prop, object_schema, string_prop, Tool, ToolFuture, ToolOutput, Workspace};

/// Pi's `read` tool.
#[derive(Debug, Clone)]
pub struct Read {
    workspace: Workspace,
}

impl Read {
    /// `read` rooted at `workspace`.
    pub fn new(workspace: Workspace) -> Read {
        Read { workspace }
    }
}

/// The image type of `bytes` by its magic number (the types Pi attaches).
fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Node's message for a failed `access`/`open`.
pub(crate) fn node_io_error(e: &std::io::Error, syscall: &str, path: &std::path::Path) -> String {
    let p = path.display();
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("ENOENT: no such file or directory, {syscall} '{p}'"),
        std::io::ErrorKind::PermissionDenied => format!("EACCES: permission denied, {syscall} '{p}'"),
        _ if e.raw_os_error() == Some(21) => "EISDIR: illegal operation on a directory, read".to_owned(),
        _ => format!("{e}, {syscall} '{p}'"),
    }
}

/// The read itself (Pi's text branch), from the file's bytes.
pub(crate) fn read_text(
    path_arg: &str,
    text: &str,
    offset: Option<f64>,
    limit: Option<f64>,
) -> Result<ToolOutput, String> {
    let all: Vec<&str> = text.split('\n').collect();
    let start = match offset {
        Some(o) if o != 0.0 && !o.is_nan() => (o.trunc() as i64 - 1).max(0) as usize,
        _ => 0,
    };
    let offset_text =
        offset.map_or_else(|| "undefined".to_owned(), |o| sessionlog_events::json::js_number(o).to_string());
    if start >= all.len() {
        return Err(format!("Offset {offset_text} is beyond end of file ({} lines total)", all.len()));
    }
    let start_display = start + 1;
    let (selected, user_limited) = match limit {
        Some(l) => {
            let end = (start as i64).saturating_add(l.trunc() as i64).clamp(start as i64, all.len() as i64)
                as usize;
            (all[start..end].join("\n"), Some(end - start))
        }
        None => (all[start..].join("\n"), None),
    };
    let t = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let (text, details) = if t.first_line_exceeds_limit {
        let size = format_size(all[start].len());
        let max = format_size(DEFAULT_MAX_BYTES);
        (
            format!("[Line {start_display} is {size}, exceeds {max} limit. Use bash: sed -n '{start_display}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]"),
            Some(json!({"truncation": t.to_json()})),
        )
    } else if t.truncated {
        let end = start_display + t.output_lines - 1;
        let next = end + 1;
        let total = all.len();
        let notice = match t.truncated_by {
            Some(TruncatedBy::Lines) => format!("\n\n[Showing lines {start_display}-{end} of {total}. Use offset={next} to continue.]"),
            _ => format!(
                "\n\n[Showing lines {start_display}-{end} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            ),
        };
        (format!("{}{notice}", t.content), Some(json!({"truncation": t.to_json()})))
    } else if let Some(n) = user_limited.filter(|n| start + n < all.len()) {
        let remaining = all.len() - (start + n);
        let next = start + n + 1;
        (format!("{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]", t.content), None)
    } else {
        (t.content.clone(), None)
    };
    Ok(ToolOutput { content: vec![json!({"type": "text", "text": text})], details })
}

impl Tool for Read {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> String {
        format!(
            "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.",
            DEFAULT_MAX_BYTES / 1024
        )
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("path", string_prop("Path to the file to read (relative or absolute)")),
                ("offset", number_prop("Line number to start reading from (1-indexed)")),
                ("limit", number_prop("Maximum number of lines to read")),
            ],
            &["path"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err("Operation aborted".to_owned());
            }
            let path_arg = args["path"].as_str().unwrap_or_default().to_owned();
            let offset = args.get("offset").and_then(Value::as_f64);
            let limit = args.get("limit").and_then(Value::as_f64);
            let path = self.workspace.resolve(&path_arg).map_err(|e| e.to_string())?;
            let work = tokio::task::spawn_blocking(move || -> Result<ToolOutput, String> {
                let bytes = std::fs::read(&path).map_err(|e| node_io_error(&e, "access", &path))?;
                if let Some(mime) = image_mime(&bytes) {
                    return Ok(ToolOutput {
                        content: vec![
                            json!({"type": "text", "text": format!("Read image file [{mime}]")}),
                            json!({"type": "image", "data": base64(&bytes), "mimeType": mime}),
                        ],
                        details: None,
                    });
                }
                read_text(&path_arg, &String::from_utf8_lossy(&bytes), offset, limit)
            });
            tokio::select! {
                _ = cancel.cancelled() => Err("Operation aborted".to_owned()),
                done = work => done.map_err(|e| e.to_string())?,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }

    #[test]
    fn offsets_limits_and_notices_follow_pi() {
        let text = "one\ntwo\nthree\nfour";
        let out = read_text("f", text, Some(2.0), Some(2.0)).unwrap();
        assert_eq!(out.content[0]["text"], "two\nthree\n\n[1 more lines in file. Use offset=4 to continue.]");
        assert_eq!(
            read_text("f", text, Some(9.0), None).unwrap_err(),
            "Offset 9 is beyond end of file (4 lines total)"
        );
        let long: String = (1..=2500).map(|i| format!("l{i}\n")).collect();
        let out = read_text("f", &long, None, None).unwrap();
        let t = out.content[0]["text"].as_str().unwrap();
        assert!(
            t.ends_with("l2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"),
            "{}",
            &t[t.len() - 80..]
        );
        assert_eq!(out.details.unwrap()["truncation"]["truncatedBy"], "lines");
    }
}

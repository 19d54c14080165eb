//! Pi's `edit`: replaces one exact (or whitespace- and punctuation-fuzzy)
//! occurrence of a text, keeping the file's BOM and line endings; the
//! details carry Pi's numbered diff.

use serde_json::{json, Value};
use sessionlog_provider::CancellationToken;

use super::{object_schema, string_prop, Tool, ToolFuture, ToolOutput, Workspace};

/// Pi's `edit` tool.
#[derive(Debug, Clone)]
pub struct Edit {
    workspace: Workspace,
}

impl Edit {
    /// `edit` rooted at `workspace`.
    pub fn new(workspace: Workspace) -> Edit {
        Edit { workspace }
    }
}

fn normalize_to_lf(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// Pi's `normalizeForFuzzyMatch` (without its NFKC step): trailing
/// whitespace per line, smart quotes, Unicode dashes and spaces.
fn fuzzy(s: &str) -> String {
    let trimmed: Vec<&str> = s.split('\n').map(str::trim_end).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// Lines with their newline (jsdiff's `diffLines` tokens).
fn tokens(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

/// Pi's `generateDiffString` for a change confined to one region (what an
/// edit makes): common lines around it as context, 4 lines each side.
pub(crate) fn diff_string(old: &str, new: &str) -> (String, Option<usize>) {
    const CONTEXT: usize = 4;
    let (a, b) = (tokens(old), tokens(new));
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a.iter().rev().zip(b.iter().rev()).take(max_suffix).take_while(|(x, y)| x == y).count();
    let width = old.split('\n').count().max(new.split('\n').count()).to_string().len();
    let pad = |n: usize| format!("{n:>width$}");
    let strip = |t: &str| t.strip_suffix('\n').unwrap_or(t).to_owned();
    let mut out = Vec::new();
    let (mut old_n, mut new_n) = (1, 1);
    let removed = &a[prefix..a.len() - suffix];
    let added = &b[prefix..b.len() - suffix];
    let changed = !removed.is_empty() || !added.is_empty();
    // Leading context.
    if prefix > 0 {
        let lead = &a[..prefix];
        if changed {
            let skip = lead.len().saturating_sub(CONTEXT);
            if skip > 0 {
                out.push(format!(" {} ...", " ".repeat(width)));
            }
            old_n += skip;
            new_n += skip;
            for line in &lead[skip..] {
                out.push(format!(" {} {}", pad(old_n), strip(line)));
                old_n += 1;
                new_n += 1;
            }
        } else {
            old_n += lead.len();
            new_n += lead.len();
        }
    }
    let first = changed.then_some(new_n);
    for line in removed {
        out.push(format!("-{} {}", pad(old_n), strip(line)));
        old_n += 1;
    }
    for line in added {
        out.push(format!("+{} {}", pad(new_n), strip(line)));
        new_n += 1;
    }
    if suffix > 0 && changed {
        let trail = &a[a.len() - suffix..];
        for line in trail.iter().take(CONTEXT) {
            out.push(format!(" {} {}", pad(old_n), strip(line)));
            old_n += 1;
        }
        if trail.len() > CONTEXT {
            out.push(format!(" {} ...", " ".repeat(width)));
        }
    }
    (out.join("\n"), first)
}

pub(crate) fn apply(
    path_arg: &str,
    raw: &str,
    old_text: &str,
    new_text: &str,
) -> Result<(String, Value), String> {
    let (bom, content) = match raw.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", raw),
    };
    let crlf = match (content.find("\r\n"), content.find('\n')) {
        (Some(c), Some(l)) => c < l,
        _ => false,
    };
    let content = normalize_to_lf(content);
    let old = normalize_to_lf(old_text);
    let new = normalize_to_lf(new_text);
    let (base, index, len) = match content.find(&old) {
        Some(i) => (content.clone(), i, old.len()),
        None => {
            let fc = fuzzy(&content);
            let fo = fuzzy(&old);
            match fc.find(&fo) {
                Some(i) => (fc, i, fo.len()),
                None => {
                    return Err(format!("Could not find the exact text in {path_arg}. The old text must match exactly including all whitespace and newlines."))
                }
            }
        }
    };
    let fo = fuzzy(&old);
    let occurrences = if fo.is_empty() { 0 } else { fuzzy(&content).matches(&fo).count() };
    if occurrences > 1 {
        return Err(format!("Found {occurrences} occurrences of the text in {path_arg}. The text must be unique. Please provide more context to make it unique."));
    }
    let replaced = format!("{}{}{}", &base[..index], new, &base[index + len..]);
    if replaced == base {
        return Err(format!("No changes made to {path_arg}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."));
    }
    let (diff, first) = diff_string(&base, &replaced);
    let restored = if crlf { replaced.replace('\n', "\r\n") } else { replaced };
    let mut details = serde_json::Map::new();
    details.insert("diff".into(), json!(diff));
    if let Some(first) = first {
        details.insert("firstChangedLine".into(), json!(first));
    }
    Ok((format!("{bom}{restored}"), Value::Object(details)))
}

impl Tool for Edit {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> String {
        "Edit a file by replacing exact text. The oldText must match exactly (including whitespace). Use this for precise, surgical edits.".to_owned()
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("path", string_prop("Path to the file to edit (relative or absolute)")),
                ("oldText", string_prop("Exact text to find and replace (must match exactly)")),
                ("newText", string_prop("New text to replace the old text with")),
            ],
            &["path", "oldText", "newText"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err("Operation aborted".to_owned());
            }
            let path_arg = args["path"].as_str().unwrap_or_default().to_owned();
            let old_text = args["oldText"].as_str().unwrap_or_default().to_owned();
            let new_text = args["newText"].as_str().unwrap_or_default().to_owned();
            let path = self.workspace.resolve(&path_arg).map_err(|e| e.to_string())?;
            tokio::task::spawn_blocking(move || {
                let bytes = std::fs::read(&path).map_err(|_| format!("File not found: {path_arg}"))?;
                let raw = String::from_utf8_lossy(&bytes);
                let (content, details) = apply(&path_arg, &raw, &old_text, &new_text)?;
                std::fs::write(&path, content.as_bytes()).map_err(|e| e.to_string())?;
                Ok(ToolOutput {
                    content: vec![
                        json!({"type": "text", "text": format!("Successfully replaced text in {path_arg}.")}),
                    ],
                    details: Some(details),
                })
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_occurrence_is_replaced_keeping_crlf_and_the_bom() {
        let (out, details) = apply("f", "\u{FEFF}a\r\nb\r\nc\r\n", "b", "B").unwrap();
        assert_eq!(out, "\u{FEFF}a\r\nB\r\nc\r\n");
        // Four lines counting the empty one after the last newline: numbers one digit wide.
        assert_eq!(details["diff"], " 1 a\n-2 b\n+2 B\n 3 c");
        assert_eq!(details["firstChangedLine"], 2);
        assert!(apply("f", "x x", "x", "y")
            .unwrap_err()
            .starts_with("Found 2 occurrences of the text in f."));
        assert!(apply("f", "abc", "zzz", "y")
            .unwrap_err()
            .starts_with("Could not find the exact text in f."));
        // Fuzzy: a smart quote in the file matches a straight one.
        assert_eq!(apply("f", "say \u{2019}hi\u{2019}\n", "'hi'", "'yo'").unwrap().0, "say 'yo'\n");
    }
}

//! Tool output truncation as Pi does it (`core/tools/truncate.ts`): two
//! limits, lines and bytes, whichever is hit first; never a partial line,
//! except the last line of a tail cut that alone is larger than the limit.

use serde_json::{json, Value};

/// Pi's `DEFAULT_MAX_LINES`.
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Pi's `DEFAULT_MAX_BYTES` (50 KB).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;

/// Pi's `formatSize`: `512B`, `1.5KB`, `2.0MB` (one decimal rounded half
/// up, as JavaScript's `toFixed(1)` rounds these exact quotients).
pub fn format_size(bytes: usize) -> String {
    let tenths = |unit: u128| (bytes as u128 * 10 + unit / 2) / unit;
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        let t = tenths(1024);
        format!("{}.{}KB", t / 10, t % 10)
    } else {
        let t = tenths(1024 * 1024);
        format!("{}.{}MB", t / 10, t % 10)
    }
}

/// Which limit cut the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
    /// The line limit.
    Lines,
    /// The byte limit.
    Bytes,
}

/// What a truncation kept (Pi's `TruncationResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The text kept.
    pub content: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Which limit cut it.
    pub truncated_by: Option<TruncatedBy>,
    /// Lines of the input.
    pub total_lines: usize,
    /// UTF-8 bytes of the input.
    pub total_bytes: usize,
    /// Lines kept.
    pub output_lines: usize,
    /// UTF-8 bytes kept.
    pub output_bytes: usize,
    /// The kept text starts inside a line (tail cut of one long line).
    pub last_line_partial: bool,
    /// The first line alone is over the byte limit (head cut keeps nothing).
    pub first_line_exceeds_limit: bool,
    /// The line limit.
    pub max_lines: usize,
    /// The byte limit.
    pub max_bytes: usize,
}

impl Truncation {
    /// The object Pi stores under `details.truncation`, keys in Pi's order.
    pub fn to_json(&self) -> Value {
        json!({
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": match self.truncated_by {
                None => Value::Null,
                Some(TruncatedBy::Lines) => json!("lines"),
                Some(TruncatedBy::Bytes) => json!("bytes"),
            },
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        })
    }

    fn whole(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
        let lines = content.split('\n').count();
        Truncation {
            content: content.to_owned(),
            truncated: false,
            truncated_by: None,
            total_lines: lines,
            total_bytes: content.len(),
            output_lines: lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }
}

/// Pi's `truncateHead`: the first lines that fit.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() <= max_lines && content.len() <= max_bytes {
        return Truncation::whole(content, max_lines, max_bytes);
    }
    let base = Truncation {
        truncated: true,
        truncated_by: Some(TruncatedBy::Bytes),
        output_lines: 0,
        output_bytes: 0,
        content: String::new(),
        first_line_exceeds_limit: false,
        ..Truncation::whole(content, max_lines, max_bytes)
    };
    if lines[0].len() > max_bytes {
        return Truncation { first_line_exceeds_limit: true, ..base };
    }
    let mut kept = 0;
    let mut bytes = 0;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let n = line.len() + usize::from(i > 0);
        if bytes + n > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        kept += 1;
        bytes += n;
    }
    if kept >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    let out = lines[..kept].join("\n");
    Truncation { output_bytes: out.len(), content: out, output_lines: kept, truncated_by: Some(by), ..base }
}

/// The end of `s` in at most `max_bytes` bytes, starting on a character boundary.
fn tail_bytes(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Pi's `truncateTail`: the last lines that fit.
pub fn truncate_tail(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() <= max_lines && content.len() <= max_bytes {
        return Truncation::whole(content, max_lines, max_bytes);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut bytes = 0;
    let mut by = TruncatedBy::Lines;
    let mut partial = false;
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let n = line.len() + usize::from(!kept.is_empty());
        if bytes + n > max_bytes {
            by = TruncatedBy::Bytes;
            if kept.is_empty() {
                let cut = tail_bytes(line, max_bytes);
                kept.push(cut);
                bytes = cut.len();
                partial = true;
            }
            break;
        }
        kept.push(line);
        bytes += n;
    }
    if kept.len() >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    kept.reverse();
    let out = kept.join("\n");
    Truncation {
        output_bytes: out.len(),
        output_lines: kept.len(),
        content: out,
        truncated: true,
        truncated_by: Some(by),
        last_line_partial: partial,
        ..Truncation::whole(content, max_lines, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_pi_prints_them() {
        // (1280 / 1024).toFixed(1) === "1.3" in JavaScript (1.25 rounds up).
        assert_eq!(format_size(1280), "1.3KB");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(50 * 1024), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
    }

    #[test]
    fn head_keeps_whole_lines_within_both_limits() {
        let t = truncate_head("a\nbb\nccc\ndddd", 3, 100);
        assert_eq!((t.content.as_str(), t.truncated_by), ("a\nbb\nccc", Some(TruncatedBy::Lines)));
        // "a\nbb" is 4 bytes, "\nccc" would make 8 > 6.
        let t = truncate_head("a\nbb\nccc\ndddd", 10, 6);
        assert_eq!((t.content.as_str(), t.output_bytes, t.total_bytes), ("a\nbb", 4, 13));
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        let t = truncate_head("0123456789\nx", 10, 5);
        assert!(t.first_line_exceeds_limit && t.content.is_empty());
    }

    #[test]
    fn tail_keeps_the_end_and_cuts_a_long_last_line_on_a_char_boundary() {
        let t = truncate_tail("a\nbb\nccc\ndddd", 2, 100);
        assert_eq!((t.content.as_str(), t.output_lines), ("ccc\ndddd", 2));
        let t = truncate_tail("x\néééé", 10, 5);
        // 5 bytes back from the end lands inside "é"; the cut moves forward to "éé".
        assert_eq!((t.content.as_str(), t.last_line_partial), ("éé", true));
    }
}

//! Tool-result truncation, the overflow-recovery helper (spec compaction §3.9):
//! when compaction alone cannot make a request fit, oversized tool results
//! are cut to a share of the window, keeping the head — and the tail too when
//! the tail looks important (errors, exit codes, totals, a closing `}`).

/// Share of the window one tool result may take (30%).
pub const TOOL_RESULT_SHARE: f64 = 0.3;
/// Characters always kept.
pub const MIN_KEEP_CHARS: usize = 2_000;
/// Longest tail kept for an important tail.
pub const MAX_TAIL_CHARS: usize = 4_000;

/// The live cap on one tool result for a window (OpenClaw docs: 16k, 32k and
/// 64k characters for windows under 100k, from 100k, from 200k tokens).
pub fn hard_cap_chars(context_window: u64) -> usize {
    match context_window {
        w if w >= 200_000 => 64_000,
        w if w >= 100_000 => 32_000,
        _ => 16_000,
    }
}

/// Largest tool result, in characters, that may stay whole in `context_window`.
pub fn max_tool_result_chars(context_window: u64) -> usize {
    let share = (context_window as f64 * TOOL_RESULT_SHARE * 4.0) as usize;
    share.min(hard_cap_chars(context_window)).max(MIN_KEEP_CHARS)
}

fn tail_is_important(tail: &str) -> bool {
    let lower = tail.to_lowercase();
    let words = [
        "error",
        "exception",
        "failed",
        "fatal",
        "traceback",
        "panic",
        "exit code",
        "total",
        "summary",
        "result",
        "done",
    ];
    words.iter().any(|w| lower.contains(w)) || tail.trim_end().ends_with('}')
}

/// Byte index of the `n`-th character of `s` (or its end): the `n`-th byte
/// when the bytes before it are ASCII (most tool output; checked a word at a
/// time), else found by counting the bytes that start a character.
fn char_index(s: &str, n: usize) -> usize {
    let bytes = s.as_bytes();
    let k = n.min(bytes.len());
    if bytes[..k].is_ascii() {
        return k;
    }
    let mut seen = 0;
    for (i, &b) in bytes.iter().enumerate() {
        // UTF-8 continuation bytes are 0b10xx_xxxx, below -0x40 as i8.
        if (b as i8) >= -0x40 {
            if seen == n {
                return i;
            }
            seen += 1;
        }
    }
    s.len()
}

/// Cuts `text` to at most about `max_chars` characters; `None` when it fits.
pub fn truncate_tool_result(text: &str, max_chars: usize) -> Option<String> {
    let total = text.chars().count();
    let max_chars = max_chars.max(MIN_KEEP_CHARS);
    if total <= max_chars {
        return None;
    }
    let last_2000 = &text[char_index(text, total.saturating_sub(2_000))..];
    let (head_chars, tail_chars) = if tail_is_important(last_2000) {
        let tail = ((max_chars as f64 * TOOL_RESULT_SHARE) as usize).min(MAX_TAIL_CHARS);
        (max_chars - tail, tail)
    } else {
        (max_chars, 0)
    };
    // Snap the head back to a newline within its last 20%.
    let mut head = &text[..char_index(text, head_chars)];
    let floor = char_index(head, head_chars * 4 / 5);
    if let Some(nl) = head[floor..].rfind('\n') {
        head = &head[..floor + nl];
    }
    let mut out = head.to_owned();
    let mut kept = head.chars().count();
    if tail_chars > 0 {
        // Snap the tail forward to a newline within its first 20%.
        let mut tail = &text[char_index(text, total - tail_chars)..];
        let limit = char_index(tail, tail_chars / 5);
        if let Some(nl) = tail[..limit].find('\n') {
            tail = &tail[nl + 1..];
        }
        out.push_str("\n\n[... middle omitted ...]\n\n");
        out.push_str(tail);
        kept += tail.chars().count();
    }
    out.push_str(&format!(
        "\n\n[Tool result truncated: {} characters removed to fit the context window]",
        total - kept
    ));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_follow_the_window() {
        assert_eq!(max_tool_result_chars(200_000), 64_000);
        assert_eq!(max_tool_result_chars(128_000), 32_000);
        assert_eq!(max_tool_result_chars(32_000), 16_000);
        // 30% of a 4000-token window is 4800 characters.
        assert_eq!(max_tool_result_chars(4_000), 4_800);
        assert_eq!(max_tool_result_chars(1_000), 2_000);
    }

    proptest::proptest! {
        /// The byte index of the `n`-th character is `char_indices`'s, over
        /// ASCII and multi-byte text, `n` within, at and past the end.
        #[test]
        fn char_index_is_char_indices_nth(text in "[a-z\\n ]{0,20}|[a-zé日🦀\\n ]{0,20}", n in 0usize..30) {
            let expected = text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
            proptest::prop_assert_eq!(char_index(&text, n), expected);
        }
    }

    #[test]
    fn short_results_are_left_alone() {
        assert_eq!(truncate_tool_result("ok", 2_000), None);
    }

    #[test]
    fn a_plain_tail_keeps_the_head_only() {
        let text = "line of output\n".repeat(1_000); // 15000 chars
        let out = truncate_tool_result(&text, 3_000).unwrap();
        assert!(out.starts_with("line of output\n"));
        assert!(!out.contains("middle omitted"));
        let head = out.split("\n\n[Tool result truncated").next().unwrap();
        assert!(head.chars().count() <= 3_000 && head.chars().count() >= 2_400, "{}", head.len());
        assert!(head.ends_with("line of output"), "snapped to a line end");
        let removed = 15_000 - head.chars().count();
        assert!(out.ends_with(&format!(
            "[Tool result truncated: {removed} characters removed to fit the context window]"
        )));
    }

    #[test]
    fn an_important_tail_is_kept_with_the_head() {
        let mut text = "compiling crate\n".repeat(1_000);
        text.push_str("error[E0308]: mismatched types\nexit code 101\n");
        let out = truncate_tool_result(&text, 5_000).unwrap();
        assert!(out.starts_with("compiling crate\n"));
        assert!(out.contains("\n\n[... middle omitted ...]\n\n"));
        assert!(out.contains("error[E0308]: mismatched types\nexit code 101\n"));
    }
}

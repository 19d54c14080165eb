//! Chunking as OpenClaw's `chunkMarkdown` does it (spec §1.4): lines are
//! packed into chunks of about `tokens × 4` characters, each new chunk
//! starting with the last whole lines of the previous one (about
//! `overlap × 4` characters).
//!
//! Lengths count Unicode scalar values (upstream counts UTF-16 units); a line
//! is never split inside a character.

use sha2::{Digest, Sha256};

/// Chunk size and overlap, in approximate tokens (4 characters each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSettings {
    /// Target chunk size in tokens (OpenClaw's default 400).
    pub tokens: usize,
    /// Overlap carried into the next chunk, in tokens (default 80).
    pub overlap: usize,
}

impl Default for ChunkSettings {
    fn default() -> Self {
        ChunkSettings { tokens: 400, overlap: 80 }
    }
}

impl ChunkSettings {
    /// The chunk budget in characters: `max(32, tokens × 4)`.
    pub fn max_chars(&self) -> usize {
        (self.tokens.max(1) * 4).max(32)
    }

    /// The overlap budget in characters (overlap clamped to `tokens − 1`).
    pub fn overlap_chars(&self) -> usize {
        self.overlap.min(self.tokens.max(1) - 1) * 4
    }
}

/// One chunk of a file: its 1-based inclusive line range, its text and the
/// SHA-256 hex of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// First line (1-based).
    pub start_line: usize,
    /// Last line (1-based, inclusive).
    pub end_line: usize,
    /// The chunk's text (lines joined by `\n`).
    pub text: String,
    /// SHA-256 hex of `text`.
    pub hash: String,
}

/// SHA-256 hex of a string.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Splits `content` into chunks (whitespace-only chunks are dropped).
pub fn chunk_markdown(content: &str, settings: ChunkSettings) -> Vec<Chunk> {
    let max_chars = settings.max_chars();
    let cap = settings.overlap_chars().min(max_chars / 2);
    let mut chunks = Vec::new();
    // (segment, its length in chars, line number)
    let mut current: Vec<(&str, usize, usize)> = Vec::new();
    let mut current_chars = 0usize;

    let flush = |current: &[(&str, usize, usize)], chunks: &mut Vec<Chunk>| {
        let Some(first) = current.first() else { return };
        let last = current[current.len() - 1];
        let mut text = current.iter().map(|s| s.0).collect::<Vec<_>>().join("\n");
        if let Some((cut, _)) = text.char_indices().nth(max_chars) {
            text.truncate(cut);
        }
        if text.trim().is_empty() {
            return;
        }
        let hash = sha256_hex(&text);
        chunks.push(Chunk { start_line: first.2, end_line: last.2, text, hash });
    };

    for (i, line) in content.split('\n').enumerate() {
        let line_no = i + 1;
        for segment in segments(line, max_chars) {
            let len = segment.chars().count();
            let cost = len + 1;
            if current_chars + cost > max_chars && !current.is_empty() {
                flush(&current, &mut chunks);
                // Carry the last whole lines, within the overlap cap.
                let mut kept = Vec::new();
                if cap > 0 {
                    let mut acc = 0;
                    for entry in current.iter().rev() {
                        acc += entry.1 + 1;
                        if !kept.is_empty() && acc > cap {
                            break;
                        }
                        kept.push(*entry);
                        if acc >= cap {
                            break;
                        }
                    }
                    kept.reverse();
                }
                current = kept;
                current_chars = current.iter().map(|e| e.1 + 1).sum();
            }
            current.push((segment, len, line_no));
            current_chars += cost;
        }
    }
    flush(&current, &mut chunks);
    chunks
}

/// A line cut into segments of at most `max_chars` characters (an empty
/// line is one empty segment).
fn segments(line: &str, max_chars: usize) -> Vec<&str> {
    if line.is_empty() {
        return vec![""];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (idx, _) in line.char_indices() {
        if count == max_chars {
            out.push(&line[start..idx]);
            start = idx;
            count = 0;
        }
        count += 1;
    }
    out.push(&line[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(tokens: usize, overlap: usize) -> ChunkSettings {
        ChunkSettings { tokens, overlap }
    }

    #[test]
    fn defaults_are_openclaws() {
        let s = ChunkSettings::default();
        assert_eq!((s.max_chars(), s.overlap_chars()), (1600, 320));
        // Tiny settings are clamped: 32 characters at least, overlap below tokens.
        assert_eq!(small(1, 5).max_chars(), 32);
        assert_eq!(small(1, 5).overlap_chars(), 0);
    }

    #[test]
    fn packs_lines_and_carries_overlap() {
        // maxChars 40, overlap cap min(16, 20) = 16. Each 9-char line costs 10.
        let content = "aaaaaaaaa\nbbbbbbbbb\nccccccccc\nddddddddd\neeeeeeeee\nfffffffff";
        let chunks = chunk_markdown(content, small(10, 4));
        // Chunk 1: a..d (40). e would make 50 > 40 → emit; carry d (10 ≤ 16),
        // then c would make 20 > 16 → stop. Chunk 2: d, e, f.
        let ranges: Vec<_> = chunks.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(ranges, vec![(1, 4), (4, 6)]);
        assert_eq!(chunks[1].text, "ddddddddd\neeeeeeeee\nfffffffff");
        assert_eq!(chunks[0].hash, sha256_hex(&chunks[0].text));
    }

    #[test]
    fn long_lines_are_cut_and_keep_their_number() {
        let line = "x".repeat(70);
        let chunks = chunk_markdown(&format!("head\n{line}"), small(8, 0));
        // maxChars 32: "head" (5) then segments of 32, 32, 6 of line 2.
        let ranges: Vec<_> =
            chunks.iter().map(|c| (c.start_line, c.end_line, c.text.chars().count())).collect();
        assert_eq!(ranges, vec![(1, 1, 4), (2, 2, 32), (2, 2, 32), (2, 2, 6)]);
    }

    #[test]
    fn never_splits_a_character_and_drops_blank_chunks() {
        let text = "数据库迁移计划".repeat(10);
        let chunks = chunk_markdown(&text, small(8, 0));
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 32));
        assert_eq!(chunks.iter().map(|c| c.text.as_str()).collect::<String>(), text);
        assert!(chunk_markdown("\n\n   \n", ChunkSettings::default()).is_empty());
    }
}

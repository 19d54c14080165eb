//! BERT's uncased WordPiece tokenizer, read from a `tokenizer.json`
//! (`BertNormalizer`, `BertPreTokenizer`, `WordPiece`): control characters
//! dropped and whitespace made a space, spaces around CJK ideographs, accents
//! stripped (NFD, nonspacing marks dropped) and lowercase, split on
//! whitespace and around every punctuation character, then greedy
//! longest-match-first word pieces (`##` continuations, `[UNK]` for a word
//! that cannot be covered or is longer than `max_input_chars_per_word`),
//! wrapped in `[CLS]` … `[SEP]`.

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

/// A WordPiece tokenizer with BERT's normalisation.
#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    prefix: String,
    max_chars_per_word: usize,
    clean_text: bool,
    chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

impl WordPiece {
    /// Reads a `tokenizer.json` of a BERT WordPiece model; anything else is
    /// refused with the reason.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let model = &v["model"];
        if model["type"] != "WordPiece" {
            return Err(format!("model.type is {}, not \"WordPiece\"", model["type"]));
        }
        let vocab: HashMap<String, u32> = model["vocab"]
            .as_object()
            .ok_or("model.vocab is not an object")?
            .iter()
            .map(|(k, id)| {
                id.as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .map(|i| (k.clone(), i))
                    .ok_or_else(|| format!("vocab id of {k:?} is not a number"))
            })
            .collect::<Result<_, _>>()?;
        let id = |token: &str| {
            vocab.get(token).copied().ok_or_else(|| format!("{token} is not in the vocabulary"))
        };
        let unk = id(model["unk_token"].as_str().unwrap_or("[UNK]"))?;
        let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
        let norm = &v["normalizer"];
        if norm["type"] != "BertNormalizer" {
            return Err(format!("normalizer.type is {}, not \"BertNormalizer\"", norm["type"]));
        }
        if v["pre_tokenizer"]["type"] != "BertPreTokenizer" {
            return Err(format!(
                "pre_tokenizer.type is {}, not \"BertPreTokenizer\"",
                v["pre_tokenizer"]["type"]
            ));
        }
        let flag = |key: &str, default: bool| norm[key].as_bool().unwrap_or(default);
        let lowercase = flag("lowercase", true);
        Ok(WordPiece {
            unk,
            cls,
            sep,
            prefix: model["continuing_subword_prefix"].as_str().unwrap_or("##").to_owned(),
            max_chars_per_word: model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize,
            clean_text: flag("clean_text", true),
            chinese_chars: flag("handle_chinese_chars", true),
            // `strip_accents: null` follows `lowercase`, as in BERT's tokenizer.
            strip_accents: flag("strip_accents", lowercase),
            lowercase,
            vocab,
        })
    }

    /// Token ids of `text`: `[CLS]`, at most `max_len - 2` word pieces, `[SEP]`.
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let room = max_len.saturating_sub(2);
        let mut ids = vec![self.cls];
        'words: for word in self.words(text) {
            for id in self.word_pieces(&word) {
                if ids.len() > room {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    /// The normalised text split into words and punctuation.
    fn words(&self, text: &str) -> Vec<String> {
        let mut s = String::with_capacity(text.len());
        for c in text.chars() {
            if self.clean_text {
                if c == '\0' || c == '\u{fffd}' || is_control(c) {
                    continue;
                }
                if is_whitespace(c) {
                    s.push(' ');
                    continue;
                }
            }
            if self.chinese_chars && is_chinese_char(c) {
                s.push(' ');
                s.push(c);
                s.push(' ');
            } else {
                s.push(c);
            }
        }
        if self.strip_accents {
            s = s.nfd().filter(|c| !c.is_mark_nonspacing()).collect();
        }
        if self.lowercase {
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        let mut words = Vec::new();
        let mut cur = String::new();
        for c in s.chars() {
            if is_whitespace(c) {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            } else if c.is_ascii_punctuation() || c.is_punctuation() {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                words.push(c.to_string());
            } else {
                cur.push(c);
            }
        }
        if !cur.is_empty() {
            words.push(cur);
        }
        words
    }

    /// Greedy longest-match-first pieces of one word.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        if word.chars().count() > self.max_chars_per_word {
            return vec![self.unk];
        }
        let bounds: Vec<usize> =
            word.char_indices().map(|(i, _)| i).chain(std::iter::once(word.len())).collect();
        let mut pieces = Vec::new();
        let mut start = 0; // index into `bounds`
        let mut key = String::new();
        while start + 1 < bounds.len() {
            let mut found = None;
            for end in (start + 1..bounds.len()).rev() {
                key.clear();
                if start > 0 {
                    key.push_str(&self.prefix);
                }
                key.push_str(&word[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(&key) {
                    found = Some((id, end));
                    break;
                }
            }
            match found {
                Some((id, end)) => {
                    pieces.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        pieces
    }
}

/// Whitespace as BERT's tokenizer sees it (`\t`, `\n`, `\r` and Unicode White_Space).
fn is_whitespace(c: char) -> bool {
    c.is_whitespace()
}

/// Control and other non-printing characters (category C*), except `\t`, `\n`, `\r`.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// The CJK ideograph blocks BERT surrounds with spaces (not kana, not Hangul).
fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tokenizer over a vocabulary written here.
    fn tiny() -> WordPiece {
        let vocab =
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "cafe", ",", "!", "中", "e", "##x"];
        let vocab: serde_json::Map<String, serde_json::Value> =
            vocab.iter().enumerate().map(|(i, t)| ((*t).to_owned(), serde_json::json!(i))).collect();
        let json = serde_json::json!({
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 9, "vocab": vocab}
        });
        WordPiece::from_json(&json.to_string()).unwrap()
    }

    #[test]
    fn pieces_by_hand() {
        let t = tiny();
        // unaffable → un ##aff ##able; "Café," → cafe , (accent stripped, lowercased, comma split);
        // 中 isolated from its neighbours; "unz" has no cover → [UNK]; "ex" → e ##x.
        assert_eq!(t.encode("UNaffable Café,中ex unz", 64), vec![2, 4, 5, 6, 7, 8, 10, 11, 12, 1, 3]);
        // A word longer than max_input_chars_per_word (9) is one [UNK].
        assert_eq!(t.encode("unaffablex", 64), vec![2, 1, 3]);
        // Control characters vanish; truncation keeps room for [SEP].
        assert_eq!(t.encode("cafe\u{0}!\u{200b}!", 64), vec![2, 7, 9, 9, 3]);
        assert_eq!(t.encode("cafe ! ! !", 4), vec![2, 7, 9, 3]);
        assert_eq!(t.encode("", 8), vec![2, 3]);
    }

    #[test]
    fn refuses_other_tokenizers() {
        let err = WordPiece::from_json(r#"{"model":{"type":"BPE"}}"#).unwrap_err();
        assert!(err.contains("BPE"), "{err}");
    }
}

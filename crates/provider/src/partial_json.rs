//! Tool-call arguments from JSON text that may be cut short, as Pi reads
//! them while a call streams in (`parseStreamingJson`: `JSON.parse`, else
//! the `partial-json` package's parse with every kind of value allowed to be
//! partial, else `{}`).
//!
//! The rules reproduced (checked against the package over every prefix of
//! sample documents in `tests/partial_json.rs`): an unterminated string keeps
//! what it has (a cut escape sequence is dropped); an object or array cut
//! anywhere keeps its complete members, and a member whose value had not
//! started is left out; `tru`, `fals`, `nul` at the end read as the literal;
//! a number cut inside its exponent keeps the part before the `e`.

use serde_json::{Map, Value};

/// Pi's `parseStreamingJson`: the value of complete JSON, the best partial
/// value of JSON cut short, and `{}` for an empty text or one that cannot be
/// read either way.
pub fn parse_streaming(text: &str) -> Value {
    if sessionlog_events::json::js_trim(text).is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    match parse_partial(text) {
        Some(Value::Null) | None => Value::Object(Map::new()),
        Some(value) => value,
    }
}

/// The `partial-json` package's parse (every kind allowed partial), `None`
/// where it throws. JavaScript's `Infinity` and `NaN` read as `null`, which
/// is what `JSON.stringify` prints for them.
pub fn parse_partial(text: &str) -> Option<Value> {
    let trimmed = sessionlog_events::json::js_trim(text);
    if trimmed.is_empty() {
        return None;
    }
    Parser { s: trimmed.as_bytes(), text: trimmed, i: 0 }.any().ok()
}

/// Why a parse gave up (the package's two exception classes).
#[derive(Debug)]
enum Stop {
    Partial,
    Malformed,
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

/// JavaScript's `String.prototype.substring` over byte positions (the
/// positions used here are all ASCII boundaries): bounds clamp to the text,
/// and reversed bounds swap.
fn substring(text: &str, a: isize, b: isize) -> &str {
    let len = text.len() as isize;
    let (a, b) = (a.clamp(0, len) as usize, b.clamp(0, len) as usize);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    text.get(lo..hi).unwrap_or("")
}

fn last_index_of(text: &str, needle: u8) -> isize {
    text.bytes().rposition(|b| b == needle).map_or(-1, |p| p as isize)
}

fn json_parse(text: &str) -> Result<Value, Stop> {
    serde_json::from_str(text).map_err(|_| Stop::Malformed)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> Option<u8> {
        self.s.get(i).copied()
    }

    fn skip_blank(&mut self) {
        while matches!(self.at(self.i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.i += 1;
        }
    }

    /// `literal` at the cursor, or (at the end of the text) a prefix of it at
    /// least `min_rest` bytes long.
    fn literal(&mut self, literal: &str, min_rest: usize) -> bool {
        let rest = &self.s[self.i.min(self.s.len())..];
        let whole = rest.starts_with(literal.as_bytes());
        let cut = rest.len() < literal.len() && rest.len() > min_rest && literal.as_bytes().starts_with(rest);
        if whole || cut {
            self.i += literal.len();
        }
        whole || cut
    }

    fn any(&mut self) -> Result<Value, Stop> {
        self.skip_blank();
        match self.at(self.i) {
            None => return Err(Stop::Partial),
            Some(b'"') => return self.string().map(Value::String),
            Some(b'{') => return Ok(self.object()),
            Some(b'[') => return Ok(self.array()),
            _ => {}
        }
        if self.literal("null", 0) {
            return Ok(Value::Null);
        }
        if self.literal("true", 0) {
            return Ok(Value::Bool(true));
        }
        if self.literal("false", 0) {
            return Ok(Value::Bool(false));
        }
        if self.literal("Infinity", 0) || self.literal("-Infinity", 1) || self.literal("NaN", 0) {
            return Ok(Value::Null);
        }
        self.number()
    }

    fn string(&mut self) -> Result<String, Stop> {
        let start = self.i;
        let mut escape = false;
        self.i += 1;
        while let Some(c) = self.at(self.i) {
            if c == b'"' && !(escape && self.at(self.i - 1) == Some(b'\\')) {
                break;
            }
            escape = if c == b'\\' { !escape } else { false };
            self.i += 1;
        }
        let as_string = |v: Value| match v {
            Value::String(s) => Ok(s),
            _ => Err(Stop::Malformed),
        };
        if self.at(self.i) == Some(b'"') {
            self.i += 1;
            return as_string(json_parse(substring(
                self.text,
                start as isize,
                (self.i - escape as usize) as isize,
            ))?);
        }
        let head = substring(self.text, start as isize, (self.i - escape as usize) as isize);
        match json_parse(&format!("{head}\"")) {
            Ok(v) => as_string(v),
            Err(_) => {
                let head = substring(self.text, start as isize, last_index_of(self.text, b'\\'));
                as_string(json_parse(&format!("{head}\""))?)
            }
        }
    }

    fn object(&mut self) -> Value {
        self.i += 1;
        self.skip_blank();
        let mut map = Map::new();
        while self.at(self.i) != Some(b'}') {
            self.skip_blank();
            if self.i >= self.s.len() {
                return Value::Object(map);
            }
            let Ok(key) = self.string() else { return Value::Object(map) };
            self.skip_blank();
            self.i += 1;
            match self.any() {
                Ok(value) => {
                    map.insert(key, value);
                }
                Err(_) => return Value::Object(map),
            }
            self.skip_blank();
            if self.at(self.i) == Some(b',') {
                self.i += 1;
            }
        }
        self.i += 1;
        Value::Object(map)
    }

    fn array(&mut self) -> Value {
        self.i += 1;
        let mut items = Vec::new();
        while self.at(self.i) != Some(b']') {
            match self.any() {
                Ok(value) => items.push(value),
                Err(_) => return Value::Array(items),
            }
            self.skip_blank();
            if self.at(self.i) == Some(b',') {
                self.i += 1;
            }
        }
        self.i += 1;
        Value::Array(items)
    }

    fn number(&mut self) -> Result<Value, Stop> {
        if self.i == 0 {
            if self.text == "-" {
                return Err(Stop::Malformed);
            }
            return json_parse(self.text)
                .or_else(|_| json_parse(substring(self.text, 0, last_index_of(self.text, b'e'))));
        }
        let start = self.i;
        if self.at(self.i) == Some(b'-') {
            self.i += 1;
        }
        while matches!(self.at(self.i), Some(c) if !b",]}".contains(&c)) {
            self.i += 1;
        }
        let text = substring(self.text, start as isize, self.i as isize);
        json_parse(text).or_else(|_| {
            if text == "-" {
                return Err(Stop::Partial);
            }
            json_parse(substring(self.text, start as isize, last_index_of(self.text, b'e')))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streaming_parse_falls_back_to_an_empty_object() {
        assert_eq!(parse_streaming(""), json!({}));
        assert_eq!(parse_streaming("  "), json!({}));
        assert_eq!(parse_streaming(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse_streaming(r#"{"path":"src/ma"#), json!({"path": "src/ma"}));
    }
}

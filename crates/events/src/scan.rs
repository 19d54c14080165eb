//! A hand-written reader of entry lines: the typed view of [`crate::Entry`]
//! in one pass over the line, without serde's visitors.
//!
//! It takes on the lines it can read exactly as the serde reader does (the
//! reference it is tested against) and declines the rest, which then take
//! the serde path: a control character or whitespace other than a space
//! anywhere, a top level that is not one object, a key with escapes, a
//! repeated key the typed view reads (serde's derive refuses it), a `\u`
//! escape of a surrogate, a number that may be beyond `f64` (an exponent of
//! three digits or more, or integer digits and exponent adding up to 300 or
//! more), nesting deeper than [`DEPTH`], and invalid JSON.

use serde_json::value::RawValue;

use crate::entry::{
    Block, Content, Cost, Message, Name, NestedCall, NestedCalls, Replacement, Usage, Wire, APIS,
    BLOCK_TYPES, KNOWN_TYPES, PROVIDERS, ROLES, STOP_REASONS, TOOL_NAMES,
};
use crate::json::{find_quote_or_backslash, is_canonical_js, value_end};

/// How deeply nested values are followed before the line is declined
/// (below serde_json's limit of 128).
const DEPTH: usize = 96;

/// The powers of ten a short number's fraction divides by (all exact in an `f64`).
const POWERS_OF_TEN: [f64; 16] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// The typed fields of `text`, or `None` when the line is left to serde.
pub(crate) fn wire(text: &str) -> Option<Wire> {
    let s = text.as_bytes();
    // Control characters (refused in strings, tabs and CRs as whitespace):
    // one pass that vectorises.
    if s.iter().fold(false, |seen, &b| seen | (b < 0x20)) {
        return None;
    }
    let mut p = Parser { text, s, i: 0, depth: 0 };
    p.spaces();
    if p.peek()? != b'{' {
        return None;
    }
    let wire = p.wire()?;
    p.spaces();
    (p.i == s.len()).then_some(wire)
}

/// Top-level field `key` of a line known to be JSON (an entry's raw line,
/// which parsed), for [`crate::Entry::field_members`].
pub(crate) enum FieldSpan<'a> {
    /// The line has no such field.
    Absent,
    /// The field's value is not an object: its byte range.
    Value(std::ops::Range<usize>),
    /// The field's value is an object: its members named in `keep`, each
    /// with its value's byte range, in order, repeats included.
    Object(Vec<(&'a str, std::ops::Range<usize>)>),
}

/// Finds top-level field `key` of `text` in one walk. The keys and
/// separators of the line and of the field's object are read as [`wire`]
/// reads them, and `None` (the caller then takes the serde path) where it
/// would decline them (a key with escapes, whitespace other than a space)
/// or when `key` occurs twice (each occurrence must then parse, as serde
/// parses each). Values are passed over by their brackets and quotes
/// ([`value_end`], at most [`DEPTH`] deep: serde counts its limit from the
/// line's top, a value parsed alone from its own start), not validated: the
/// caller parses what it keeps.
pub(crate) fn field_span<'a>(text: &'a str, key: &str, keep: &[&str]) -> Option<FieldSpan<'a>> {
    let s = text.as_bytes();
    let mut p = Parser { text, s, i: 0, depth: 0 };
    p.spaces();
    if p.peek()? != b'{' {
        return None;
    }
    let mut found = FieldSpan::Absent;
    p.object(|p, k| {
        if k != key.as_bytes() {
            p.i = value_end(s, p.i, DEPTH)?;
            return Some(());
        }
        if !matches!(found, FieldSpan::Absent) {
            return None;
        }
        if p.peek()? != b'{' {
            let start = p.i;
            p.i = value_end(s, start, DEPTH)?;
            found = FieldSpan::Value(start..p.i);
            return Some(());
        }
        let mut kept = Vec::new();
        p.object(|p, k| {
            let start = p.i;
            p.i = value_end(s, start, DEPTH)?;
            let k = std::str::from_utf8(k).ok()?;
            if keep.contains(&k) {
                kept.push((k, start..p.i));
            }
            Some(())
        })?;
        found = FieldSpan::Object(kept);
        Some(())
    })?;
    p.spaces();
    (p.i == s.len()).then_some(found)
}

struct Parser<'a> {
    text: &'a str,
    s: &'a [u8],
    i: usize,
    depth: usize,
}

/// Marks field `bit` of an object as seen; `None` when it was already.
fn once(seen: &mut u64, bit: u32) -> Option<()> {
    let mask = 1u64 << bit;
    if *seen & mask != 0 {
        return None;
    }
    *seen |= mask;
    Some(())
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn spaces(&mut self) {
        while self.s.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    /// The object at `i` (its `{`): calls `field` with each key, positioned
    /// at the key's value, which `field` must read.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.depth += 1;
        if self.depth > DEPTH {
            return None;
        }
        self.i += 1;
        self.spaces();
        if self.peek()? == b'}' {
            self.i += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            if self.peek()? != b'"' {
                return None;
            }
            let start = self.i + 1;
            let end = start + find_quote_or_backslash(&self.s[start..])?;
            if self.s[end] != b'"' {
                return None;
            }
            let s: &'a [u8] = self.s;
            let key = &s[start..end];
            self.i = end + 1;
            self.spaces();
            if self.peek()? != b':' {
                return None;
            }
            self.i += 1;
            self.spaces();
            field(self, key)?;
            self.spaces();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.spaces();
                }
                b'}' => {
                    self.i += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The array at `i` (its `[`): calls `item` at each item, which `item` must read.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.depth += 1;
        if self.depth > DEPTH {
            return None;
        }
        self.i += 1;
        self.spaces();
        if self.peek()? == b']' {
            self.i += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            item(self)?;
            self.spaces();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.spaces();
                }
                b']' => {
                    self.i += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Validates and passes over the value at `i`.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|p, _| p.skip()),
            b'[' => self.array(Parser::skip),
            b'"' => self.skip_string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number_token().map(|_| ()),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.s[self.i..].starts_with(word).then(|| self.i += word.len())
    }

    /// The escape at `i` (its `\`): the character it stands for and its
    /// length; `None` for an invalid escape or a surrogate.
    fn escape(&self, i: usize) -> Option<(char, usize)> {
        let c = match *self.s.get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = self.s.get(i + 2..i + 6)?;
                let mut code = 0u32;
                for &h in hex {
                    code = code * 16 + char::from(h).to_digit(16)?;
                }
                // Surrogates (paired or lone) are left to serde.
                return char::from_u32(code).map(|c| (c, 6));
            }
            _ => return None,
        };
        Some((c, 2))
    }

    fn skip_string(&mut self) -> Option<()> {
        let mut i = self.i + 1;
        loop {
            i += find_quote_or_backslash(&self.s[i..])?;
            if self.s[i] == b'"' {
                self.i = i + 1;
                return Some(());
            }
            i += self.escape(i)?.1;
        }
    }

    /// The string token at `i`, unescaped.
    fn string_token(&mut self) -> Option<String> {
        let start = self.i + 1;
        let mut i = start + find_quote_or_backslash(&self.s[start..])?;
        if self.s[i] == b'"' {
            self.i = i + 1;
            return Some(self.text.get(start..i)?.to_owned());
        }
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(self.text.get(start..i)?);
        loop {
            // At a `\`.
            let (c, n) = self.escape(i)?;
            out.push(c);
            i += n;
            let run = find_quote_or_backslash(&self.s[i..])?;
            out.push_str(self.text.get(i..i + run)?);
            i += run;
            if self.s[i] == b'"' {
                self.i = i + 1;
                return Some(out);
            }
        }
    }

    /// The number token at `i` (JSON's grammar), as its text; `None` for
    /// one that may be beyond `f64`.
    fn number_token(&mut self) -> Option<&'a str> {
        let s = self.s;
        let start = self.i;
        let digits = |i: usize| s[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        let mut i = start;
        if s[i] == b'-' {
            i += 1;
        }
        let integer = match s.get(i)? {
            b'0' => 1,
            b'1'..=b'9' => digits(i),
            _ => return None,
        };
        i += integer;
        if s.get(i) == Some(&b'.') {
            let fraction = digits(i + 1);
            if fraction == 0 {
                return None;
            }
            i += 1 + fraction;
        }
        let mut exponent = 0usize;
        if matches!(s.get(i), Some(b'e' | b'E')) {
            i += 1;
            let negative = s.get(i) == Some(&b'-');
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let n = digits(i);
            if n == 0 || n >= 3 {
                return None;
            }
            if !negative {
                exponent = s[i..i + n].iter().fold(0, |e, d| e * 10 + usize::from(d - b'0'));
            }
            i += n;
        }
        if integer + exponent >= 300 {
            return None;
        }
        self.i = i;
        self.text.get(start..i)
    }

    /// A lenient string field: the string, or `None` for any other value.
    fn string(&mut self) -> Option<Option<String>> {
        if self.peek()? == b'"' {
            self.string_token().map(Some)
        } else {
            self.skip().map(|()| None)
        }
    }

    /// The string at `i` when it is one of `names` written without escapes,
    /// which it passes over; else `None`, leaving `i` where it was.
    fn known(&mut self, names: &[&'static str]) -> Option<&'static str> {
        let rest = self.s.get(self.i..)?.strip_prefix(b"\"")?;
        let name = names.iter().copied().find(|name| {
            rest.get(..name.len() + 1)
                .is_some_and(|r| r[..name.len()] == *name.as_bytes() && r[name.len()] == b'"')
        })?;
        self.i += name.len() + 2;
        Some(name)
    }

    /// A number of at most 15 digits without an exponent at `i`, which it
    /// passes over: its digits and its power of ten are exact in an `f64`,
    /// so one division rounds correctly, as serde_json's parse does. `None`
    /// for any other number, leaving `i` where it was.
    fn short_number(&mut self) -> Option<f64> {
        let s = self.s;
        let mut i = self.i;
        let negative = s.get(i) == Some(&b'-');
        i += usize::from(negative);
        let first = i;
        let mut n = 0u64;
        match s.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while let Some(&d @ b'0'..=b'9') = s.get(i) {
                    n = n * 10 + u64::from(d - b'0');
                    i += 1;
                    if i - first > 15 {
                        return None;
                    }
                }
            }
            _ => return None,
        }
        let mut scale = 0;
        if s.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while let Some(&d @ b'0'..=b'9') = s.get(i) {
                n = n * 10 + u64::from(d - b'0');
                i += 1;
                if i - first > 16 {
                    return None;
                }
            }
            scale = i - start;
            if scale == 0 {
                return None;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            return None;
        }
        self.i = i;
        let v = n as f64 / POWERS_OF_TEN[scale];
        Some(if negative { -v } else { v })
    }

    /// A lenient string field whose usual values are `names`: those are
    /// borrowed, any other string copied.
    fn name(&mut self, names: &[&'static str]) -> Option<Option<Name>> {
        match self.known(names) {
            Some(name) => Some(Some(Name::Borrowed(name))),
            None => self.string().map(|s| s.map(Name::Owned)),
        }
    }

    /// A lenient number field, as serde_json reads it into an `f64`.
    fn number(&mut self) -> Option<Option<f64>> {
        if !matches!(self.peek()?, b'-' | b'0'..=b'9') {
            return self.skip().map(|()| None);
        }
        if let Some(v) = self.short_number() {
            return Some(Some(v));
        }
        // Longer or with an exponent: the standard library's parse, which
        // rounds correctly too.
        let token = self.number_token()?;
        let value: f64 = token.parse().ok()?;
        // Out of range, or rounded to zero: left to serde.
        let mantissa = token.bytes().take_while(|b| !matches!(b, b'e' | b'E'));
        if !value.is_finite() || (value == 0.0 && { mantissa }.any(|b| matches!(b, b'1'..=b'9'))) {
            return None;
        }
        Some(Some(value))
    }

    /// A lenient boolean field.
    fn boolean(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| Some(true)),
            b'f' => self.literal(b"false").map(|()| Some(false)),
            _ => self.skip().map(|()| None),
        }
    }

    /// A lenient object field read by `read` (at the `{`).
    fn obj<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.peek()? == b'{' {
            read(self).map(Some)
        } else {
            self.skip().map(|()| None)
        }
    }

    /// The exact text of the value at `i` (`None` for `null`).
    fn raw(&mut self) -> Option<Option<Box<RawValue>>> {
        let start = self.i;
        self.skip()?;
        let text = self.text.get(start..self.i)?;
        if text == "null" {
            return Some(None);
        }
        RawValue::from_string(text.to_owned()).ok().map(Some)
    }

    /// The value at `i` as a JSON value (`None` for `null`).
    fn value(&mut self) -> Option<Option<serde_json::Value>> {
        let start = self.i;
        self.skip()?;
        let text = self.text.get(start..self.i)?;
        if text == "null" {
            return Some(None);
        }
        serde_json::from_str(text).ok().map(Some)
    }

    /// Message content: a string, or an array whose items read as blocks.
    fn content(&mut self) -> Option<Option<Content>> {
        match self.peek()? {
            b'"' => self.string_token().map(|t| Some(Content::Text(t))),
            b'[' => {
                let mut blocks = Vec::new();
                self.array(|p| {
                    let block = p.obj(Parser::block)?.unwrap_or_default();
                    blocks.push(block);
                    Some(())
                })?;
                Some(Some(Content::Blocks(blocks)))
            }
            _ => self.skip().map(|()| None),
        }
    }

    fn block(&mut self) -> Option<Block> {
        let mut b = Block::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"type" => (once(&mut seen, 0)?, b.kind = p.name(&BLOCK_TYPES)?),
                b"text" => (once(&mut seen, 1)?, b.text = p.string()?),
                b"thinking" => (once(&mut seen, 2)?, b.thinking = p.string()?),
                b"redacted" => (once(&mut seen, 3)?, b.redacted = p.boolean()?),
                b"id" => (once(&mut seen, 4)?, b.id = p.string()?),
                b"name" => (once(&mut seen, 5)?, b.name = p.name(&TOOL_NAMES)?),
                b"arguments" => (once(&mut seen, 6)?, b.arguments = p.raw()?),
                b"mimeType" => (once(&mut seen, 7)?, b.mime_type = p.string()?),
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        // Decided once here, where every count of the call would re-encode it.
        b.arguments_canonical = b.arguments.as_deref().is_some_and(|a| is_canonical_js(a.get()));
        Some(b)
    }

    fn cost(&mut self) -> Option<Cost> {
        let mut c = Cost::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"input" => (once(&mut seen, 0)?, c.input = p.number()?),
                b"output" => (once(&mut seen, 1)?, c.output = p.number()?),
                b"cacheRead" => (once(&mut seen, 2)?, c.cache_read = p.number()?),
                b"cacheWrite" => (once(&mut seen, 3)?, c.cache_write = p.number()?),
                b"total" => (once(&mut seen, 4)?, c.total = p.number()?),
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        Some(c)
    }

    fn usage(&mut self) -> Option<Usage> {
        let mut u = Usage::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"input" => (once(&mut seen, 0)?, u.input = p.number()?),
                b"output" => (once(&mut seen, 1)?, u.output = p.number()?),
                b"cacheRead" => (once(&mut seen, 2)?, u.cache_read = p.number()?),
                b"cacheWrite" => (once(&mut seen, 3)?, u.cache_write = p.number()?),
                b"totalTokens" => (once(&mut seen, 4)?, u.total_tokens = p.number()?),
                b"cost" => (once(&mut seen, 5)?, u.cost = p.obj(Parser::cost)?),
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        Some(u)
    }

    fn nested_call(&mut self) -> Option<NestedCall> {
        let mut c = NestedCall::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"name" => (once(&mut seen, 0)?, c.name = p.string()?),
                b"arguments" => (once(&mut seen, 1)?, c.arguments = p.raw()?),
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        Some(c)
    }

    fn nested_calls(&mut self) -> Option<NestedCalls> {
        let mut n = NestedCalls::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"calls" => {
                    once(&mut seen, 0)?;
                    n.calls = if p.peek()? == b'[' {
                        let mut calls = Vec::new();
                        p.array(|p| {
                            calls.push(p.obj(Parser::nested_call)?.unwrap_or_default());
                            Some(())
                        })?;
                        Some(calls)
                    } else {
                        p.skip()?;
                        None
                    };
                }
                _ => p.skip()?,
            }
            Some(())
        })?;
        Some(n)
    }

    /// A message, built in its box (a message is large, and was moved into
    /// the box after being read on the stack).
    fn message(&mut self) -> Option<Box<Message>> {
        let mut m = Box::<Message>::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"role" => (once(&mut seen, 0)?, m.role = p.name(&ROLES)?),
                b"content" => (once(&mut seen, 1)?, m.content = p.content()?),
                b"timestamp" => (once(&mut seen, 2)?, m.timestamp = p.number()?),
                b"api" => (once(&mut seen, 3)?, m.api = p.name(&APIS)?),
                b"provider" => (once(&mut seen, 4)?, m.provider = p.name(&PROVIDERS)?),
                b"model" => (once(&mut seen, 5)?, m.model = p.string()?),
                b"usage" => (once(&mut seen, 6)?, m.usage = p.obj(Parser::usage)?),
                b"stopReason" => (once(&mut seen, 7)?, m.stop_reason = p.name(&STOP_REASONS)?),
                b"errorMessage" => (once(&mut seen, 8)?, m.error_message = p.string()?),
                b"toolCallId" => (once(&mut seen, 9)?, m.tool_call_id = p.string()?),
                b"toolName" => (once(&mut seen, 10)?, m.tool_name = p.name(&TOOL_NAMES)?),
                b"isError" => (once(&mut seen, 11)?, m.is_error = p.boolean()?),
                b"command" => (once(&mut seen, 12)?, m.command = p.string()?),
                b"output" => (once(&mut seen, 13)?, m.output = p.string()?),
                b"exitCode" => (once(&mut seen, 14)?, m.exit_code = p.number()?),
                b"cancelled" => (once(&mut seen, 15)?, m.cancelled = p.boolean()?),
                b"truncated" => (once(&mut seen, 16)?, m.truncated = p.boolean()?),
                b"fullOutputPath" => (once(&mut seen, 17)?, m.full_output_path = p.string()?),
                b"excludeFromContext" => (once(&mut seen, 18)?, m.exclude_from_context = p.boolean()?),
                b"customType" => (once(&mut seen, 19)?, m.custom_type = p.string()?),
                b"display" => (once(&mut seen, 20)?, m.display = p.boolean()?),
                b"summary" => (once(&mut seen, 21)?, m.summary = p.string()?),
                b"fromId" => (once(&mut seen, 22)?, m.from_id = p.string()?),
                b"tokensBefore" => (once(&mut seen, 23)?, m.tokens_before = p.number()?),
                b"sections" => (once(&mut seen, 24)?, m.sections = p.raw()?),
                b"toolsAdded" => (once(&mut seen, 25)?, m.tools_added = p.raw()?),
                b"nestedCalls" => {
                    (once(&mut seen, 26)?, m.nested_calls = p.obj(Parser::nested_calls)?.map(Box::new))
                }
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        Some(m)
    }

    /// A context edit's `replacement`: `null`, an object with `content`, or anything else.
    fn replacement(&mut self) -> Option<Option<Replacement>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| Some(Replacement::Omit)),
            b'{' => {
                let mut content = None;
                let mut seen = 0;
                self.object(|p, key| {
                    match key {
                        b"content" => (once(&mut seen, 0)?, content = p.content()?),
                        _ => (p.skip()?, ()),
                    };
                    Some(())
                })?;
                Some(Some(Replacement::Content(content)))
            }
            _ => self.skip().map(|()| Some(Replacement::Invalid)),
        }
    }

    fn wire(&mut self) -> Option<Wire> {
        let mut w = Wire::default();
        let mut seen = 0;
        self.object(|p, key| {
            match key {
                b"type" => (
                    once(&mut seen, 0)?,
                    match p.known(&KNOWN_TYPES) {
                        Some(name) => w.known_kind = Some(name),
                        None => w.kind = p.string()?,
                    },
                ),
                b"id" => (once(&mut seen, 1)?, w.id = p.string()?),
                b"parentId" => (once(&mut seen, 2)?, w.parent_id = p.string()?),
                b"timestamp" => (once(&mut seen, 3)?, w.timestamp = p.string()?),
                b"version" => (once(&mut seen, 4)?, w.version = p.value()?),
                b"cwd" => (once(&mut seen, 5)?, w.cwd = p.string()?),
                b"parentSession" => (once(&mut seen, 6)?, w.parent_session = p.string()?),
                b"message" => (once(&mut seen, 7)?, w.message = p.obj(Parser::message)?),
                b"thinkingLevel" => (once(&mut seen, 8)?, w.thinking_level = p.string()?),
                b"provider" => (once(&mut seen, 9)?, w.provider = p.string()?),
                b"modelId" => (once(&mut seen, 10)?, w.model_id = p.string()?),
                b"summary" => (once(&mut seen, 11)?, w.summary = p.string()?),
                b"firstKeptEntryId" => (once(&mut seen, 12)?, w.first_kept_entry_id = p.string()?),
                b"firstKeptEntryIndex" => (once(&mut seen, 13)?, w.first_kept_entry_index = p.number()?),
                b"tokensBefore" => (once(&mut seen, 14)?, w.tokens_before = p.number()?),
                b"fromHook" => (once(&mut seen, 15)?, w.from_hook = p.boolean()?),
                b"fromId" => (once(&mut seen, 16)?, w.from_id = p.string()?),
                b"customType" => (once(&mut seen, 17)?, w.custom_type = p.string()?),
                b"content" => (once(&mut seen, 18)?, w.content = p.content()?),
                b"display" => (once(&mut seen, 19)?, w.display = p.boolean()?),
                b"targetId" => (once(&mut seen, 20)?, w.target_id = p.string()?),
                b"label" => (once(&mut seen, 21)?, w.label = p.string()?),
                b"name" => (once(&mut seen, 22)?, w.name = p.string()?),
                b"replacement" => (once(&mut seen, 23)?, w.replacement = p.replacement()?),
                b"kind" => (once(&mut seen, 24)?, w.usage_kind = p.string()?),
                b"model" => (once(&mut seen, 25)?, w.model = p.string()?),
                b"note" => (once(&mut seen, 26)?, w.note = p.string()?),
                b"usage" => (once(&mut seen, 27)?, w.usage = p.obj(Parser::usage)?),
                b"systemMessage" => (once(&mut seen, 28)?, w.system_message = p.obj(Parser::message)?),
                _ => (p.skip()?, ()),
            };
            Some(())
        })?;
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::gen::{generate, GenOptions};
    use crate::Entry;

    /// The scanner's law: when it takes a line on, the serde reader accepts
    /// the line and reads the same entry.
    fn check(line: &str) -> Result<bool, String> {
        let Some(wire) = super::wire(line) else { return Ok(false) };
        // What it takes on reads back as a value (`Entry::surely_reads_back`).
        if let Err(e) = serde_json::from_str::<serde_json::Value>(line) {
            return Err(format!("{line}\nscanned, but does not read back as a value: {e}"));
        }
        if !Entry::parse(line).is_ok_and(|e| e.surely_reads_back()) {
            return Err(format!("{line}\nscanned, but not marked so"));
        }
        let scanned = format!("{:?}", wire.into_entry(line.into()));
        match Entry::parse_serde(line.into()) {
            Ok(reference) if format!("{reference:?}") == scanned => Ok(true),
            other => Err(format!("{line}\nscanner: {scanned}\nserde:   {other:?}")),
        }
    }

    fn lines(seed: u64) -> Vec<String> {
        generate(GenOptions { seed, entries: 40, branches: 1, compactions: 1, tool_output_chars: 120 })
    }

    /// A line marked as surely reading back does: values a `serde_json::Value`
    /// refuses (beyond `f64`, surrogate escapes, deep nesting) in a
    /// message's unknown field, a tool call's arguments and a skipped field.
    #[test]
    fn a_line_marked_as_reading_back_reads_back_as_a_value() {
        let deep = "[".repeat(130) + &"]".repeat(130);
        let (long, short) = ("9".repeat(310), "9".repeat(299));
        let values = [
            "1E400",
            "-2e308",
            "1e308",
            "1.5e299",
            "0e999",
            "1e-400",
            &long,
            &short,
            r#""\ud800""#,
            r#""\uDC00x""#,
            r#""\ud83d\ude80""#,
            r#""\\ud800""#,
            &deep,
            "1e99",
            r#""a""#,
        ];
        let mut marked = 0;
        for v in values {
            let lines = [
                format!(
                    r#"{{"type":"message","id":"m","message":{{"role":"user","content":"hi","extra":{v}}}}}"#
                ),
                format!(
                    r#"{{"type":"message","id":"m","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c","name":"x","arguments":{{"a":{v}}}}}]}},"other":{v}}}"#
                ),
            ];
            for line in lines {
                let Ok(entry) = Entry::parse(&line) else { continue };
                if entry.surely_reads_back() {
                    marked += 1;
                    assert!(serde_json::from_str::<serde_json::Value>(&line).is_ok(), "{line}");
                }
            }
        }
        assert!(marked >= 6, "{marked} lines marked");
    }

    /// Variants of a known name: itself, then longer, escaped quote at the
    /// end, shorter, its first byte escaped (the same string), another case,
    /// a leading space.
    fn variants(name: &str) -> [String; 7] {
        let first = name.as_bytes()[0];
        [
            name.to_owned(),
            format!("{name}s"),
            format!("{name}\\\""),
            name[..name.len() - 1].to_owned(),
            format!("\\u{first:04x}{}", &name[1..]),
            name.to_uppercase(),
            format!(" {name}"),
        ]
    }

    /// The known types the scanner does not copy read as serde reads them,
    /// and so do the strings around them: longer, shorter, escaped, another case.
    #[test]
    fn known_types_read_as_serde_reads_them() {
        for name in crate::entry::KNOWN_TYPES {
            for (i, v) in variants(name).iter().enumerate() {
                for line in [
                    format!(r#"{{"type":"{v}","id":"a","message":{{"role":"user"}},"summary":"s"}}"#),
                    format!(r#"{{"id":"a","type" : "{v}" ,"label":"l"}}"#),
                ] {
                    assert_eq!(check(&line), Ok(true), "{line}");
                    let entry = Entry::parse(&line).unwrap();
                    assert_eq!(entry.type_name() == Some(name), i == 0 || i == 4, "{line}");
                }
            }
        }
        for line in [r#"{"type":"message","type":"message"}"#, r#"{"type":"message"#, r#"{"type":"message""#]
        {
            assert_eq!(check(line), Ok(false), "{line}");
        }
    }

    /// The names a message's fields borrow (role, block type, api, provider,
    /// stop reason, tool names) read as serde reads them, borrowed only when written
    /// without escapes, and the strings around them read as copies.
    #[test]
    fn known_names_read_as_serde_reads_them() {
        use crate::entry::{Name, APIS, BLOCK_TYPES, PROVIDERS, ROLES, STOP_REASONS, TOOL_NAMES};
        type Field = fn(&crate::Message) -> Option<&Name>;
        let fields: [(&[&str], &str, Field); 7] = [
            (&TOOL_NAMES, r#""toolName":"{v}""#, |m| m.tool_name.as_ref()),
            (&TOOL_NAMES, r#""content":[{"type":"toolCall","name":"{v}","id":"c"}]"#, |m| {
                m.blocks()[0].name.as_ref()
            }),
            (&ROLES, r#""role":"{v}""#, |m| m.role.as_ref()),
            (&BLOCK_TYPES, r#""content":[{"text":"t","type":"{v}"}]"#, |m| m.blocks()[0].kind.as_ref()),
            (&APIS, r#""api":"{v}""#, |m| m.api.as_ref()),
            (&PROVIDERS, r#""provider" :"{v}" "#, |m| m.provider.as_ref()),
            (&STOP_REASONS, r#""stopReason": "{v}""#, |m| m.stop_reason.as_ref()),
        ];
        for (names, template, field) in fields {
            for name in names {
                for (i, v) in variants(name).iter().enumerate() {
                    let line = format!(
                        r#"{{"type":"message","message":{{"timestamp":1,{},"model":"m"}}}}"#,
                        template.replace("{v}", v)
                    );
                    assert_eq!(check(&line), Ok(true), "{line}");
                    let entry = Entry::parse(&line).unwrap();
                    let got = field(entry.message().unwrap()).unwrap();
                    assert_eq!(got == name, i == 0 || i == 4, "{line}");
                    assert_eq!(matches!(got, Name::Borrowed(_)), i == 0, "{line}");
                }
            }
        }
    }

    #[test]
    fn the_scanner_takes_on_every_generated_line() {
        for seed in 0..6 {
            for line in lines(seed) {
                assert_eq!(check(&line), Ok(true), "declined {line}");
            }
        }
    }

    #[test]
    fn the_scanner_reads_every_fixture_line_as_serde_does() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
        let mut stack = vec![std::path::PathBuf::from(root)];
        let (mut taken, mut total) = (0, 0);
        while let Some(dir) = stack.pop() {
            for item in std::fs::read_dir(&dir).unwrap() {
                let path = item.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    let bytes = std::fs::read(&path).unwrap();
                    for line in String::from_utf8_lossy(&bytes).split('\n') {
                        total += 1;
                        taken += usize::from(check(line).unwrap());
                    }
                }
            }
        }
        assert!(total > 100 && taken * 2 > total, "{taken} of {total} lines taken on");
    }

    #[test]
    fn lenient_fields_numbers_and_escapes_read_as_serde_reads_them() {
        for (line, taken) in [
            (r#"{"type":"message","message":{"role":"user","timestamp":-0}}"#, true),
            (r#"{"type":"message","message":{"timestamp":18446744073709551616}}"#, true),
            (r#"{"type":"message","message":{"timestamp":-9223372036854775809}}"#, true),
            (r#"{"type":"message","message":{"timestamp":123456789012345678}}"#, true),
            (r#"{"type":"message","message":{"timestamp":0.1,"exitCode":1.5E-3}}"#, true),
            (r#"{"type":"message","message":{"timestamp":12e20,"exitCode":-0.0}}"#, true),
            (r#"{"type":"message","message":{"timestamp":1e-99,"exitCode":1e99}}"#, true),
            // Sixteen digits: the digits are no longer exact in an `f64`, and
            // one division would round these wrongly.
            (
                r#"{"type":"message","message":{"timestamp":97.99817706322331,"exitCode":-9459101.337764159}}"#,
                true,
            ),
            (
                r#"{"type":"message","message":{"timestamp":955430966832.5211,"exitCode":94483342.63716771}}"#,
                true,
            ),
            (
                r#"{"type":"message","message":{"timestamp":9007199254740993,"exitCode":-0.000000000000001}}"#,
                true,
            ),
            (r#"{"type":"message","message":{"timestamp":1e400}}"#, false),
            (r#"{"type":"message","message":{"timestamp":"1"},"id":5,"parentId":""}"#, true),
            (r#"{"type":"message","message":{"content":"a\n\"b\u00e9\/\\"}}"#, true),
            (r#"{"type":"message","message":{"content":"\ud83d\ude00"}}"#, false),
            (r#"{"type":"message","message":{"content":[1,null,{"type":"text","text":7}]}}"#, true),
            (r#"{"type":"message","message":{"content":{"type":"text"},"usage":[1]}}"#, true),
            (r#"{"type":"message","message":{"usage":{"cost":{"total":1,"x":[]},"input":"2"}}}"#, true),
            (
                r#"{"type":"message","message":{"content":[{"arguments":null},{"arguments": { "a" : 1 } }]}}"#,
                true,
            ),
            (r#"{"type":"message","message":{"sections":null,"toolsAdded":[1, 2]}}"#, true),
            (
                r#"{"type":"message","message":{"nestedCalls":{"calls":[{"name":"w","arguments":"x"},3]}}}"#,
                true,
            ),
            (r#"{"type":"message","message":{"nestedCalls":{"calls":{}}}}"#, true),
            (r#"{"type":"message","message":5}"#, true),
            (r#"{"type":"message","message":{"role":"a","role":"b"}}"#, false),
            (r#"{"type":"message","id":"a","id":"b"}"#, false),
            (r#"{"x":1,"x":2}"#, true),
            (r#"{"typ\u0065":"message"}"#, false),
            (r#"{"type":"session","version":"3","id":"s"}"#, true),
            (r#"{"type":"session","version":null,"id":"s"}"#, true),
            (r#"{"type":"session","version":[3],"id":"s"}"#, true),
            (r#"{"type":"context_edit","targetId":"x","replacement":null}"#, true),
            (r#"{"type":"context_edit","targetId":"x","replacement":{"content":[{"type":"text"}]}}"#, true),
            (r#"{"type":"context_edit","targetId":"x","replacement":"no"}"#, true),
            (r#"{"type":"compaction","usage":{"totalTokens":9},"systemMessage":{"role":"system"}}"#, true),
            (r#"  {"type":"label","fromHook":true,"display":"no"}  "#, true),
            ("{\"type\":\"label\"}\t", false),
            (r#"[1]"#, false),
            (r#"null"#, false),
            (r#"{"type":"message"} {}"#, false),
            (r#"{"a":01}"#, false),
        ] {
            assert_eq!(check(line), Ok(taken), "{line}");
        }
        let deep = format!(r#"{{"message":{}{}}}"#, "[".repeat(120), "]".repeat(120));
        assert_eq!(check(&deep), Ok(false));
    }

    /// Pieces an edit inserts: JSON's structure, escapes, number parts,
    /// whitespace, bytes JSON refuses, and keys the typed view reads.
    const PIECES: &[&str] = &[
        "\"",
        "\\",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        " ",
        "\t",
        "\u{1}",
        "e",
        "E",
        "-",
        "+",
        ".",
        "0",
        "9",
        "1e400",
        "1e99",
        "\\u",
        "\\ud800",
        "\\u00e9",
        "\\/",
        "\\n",
        "\\x",
        "null",
        "true",
        "fals",
        "\"type\":\"message\",",
        "\"id\":\"dup\",",
        "\"message\":{},",
        "\"message\":{\"role\":1,\"content\":\"x\"},",
        "\"content\":[1,{\"type\":\"text\",\"text\":2}],",
        "\"usage\":{\"input\":1.5,\"cost\":{\"total\":2}},",
        "\"timestamp\":7,",
        "\"replacement\":null,",
        "\"version\":\"3\",",
        "\"arguments\":{\"a\": [1]},",
        "\"nestedCalls\":{\"calls\":[{\"name\":\"x\"}]},",
        "é",
    ];

    proptest! {
        #[test]
        fn numbers_read_as_serde_reads_them(
            negative in any::<bool>(),
            integer in "(0|[1-9][0-9]{0,17})",
            fraction in proptest::option::of("[0-9]{1,20}"),
            exponent in proptest::option::of(-40i32..40),
        ) {
            let mut number = format!("{}{integer}", if negative { "-" } else { "" });
            if let Some(f) = fraction {
                number = format!("{number}.{f}");
            }
            if let Some(e) = exponent {
                number = format!("{number}e{e}");
            }
            let line = format!(r#"{{"type":"message","message":{{"timestamp":{number},"usage":{{"cost":{{"total":{number}}}}}}}}}"#);
            prop_assert_eq!(check(&line), Ok(true), "{}", line);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn what_the_scanner_takes_on_serde_reads_alike(
            seed in 0u64..50,
            pick in 0usize..1000,
            edits in proptest::collection::vec((0usize..3, 0usize..100_000, 0usize..PIECES.len()), 1..4),
        ) {
            let all = lines(seed);
            let mut line = all[pick % all.len()].clone();
            for (op, at, piece) in edits {
                let mut at = at % (line.len() + 1);
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                match op {
                    0 => line.insert_str(at, PIECES[piece]),
                    1 => {
                        if let Some(c) = line[at..].chars().next() {
                            line.replace_range(at..at + c.len_utf8(), "");
                        }
                    }
                    _ => {
                        if let Some(c) = line[at..].chars().next() {
                            line.replace_range(at..at + c.len_utf8(), PIECES[piece]);
                        }
                    }
                }
            }
            if let Err(e) = check(&line) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

//! JSON text exactly as JavaScript writes and reads it.
//!
//! Pi persists every entry with `JSON.stringify` (no spaces, insertion key
//! order) and reads lines after a JavaScript `trim()`. Two details differ from
//! serde_json's defaults and matter for byte-identical output:
//!
//! * numbers: JavaScript has only `f64` and prints the shortest round-trip
//!   form (`1e+21`, `1e-7`, `0.1`), and integers above 2^53 lose precision;
//! * whitespace: `trim()` strips Unicode spaces and the BOM, not only ASCII.
//!
//! String escaping is already identical (`"`, `\`, the short escapes
//! `\b \t \n \f \r`, other control characters as lowercase `\u00xx`, nothing
//! else escaped).

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// Largest integer JavaScript represents exactly (2^53).
const JS_MAX_SAFE: u64 = 1 << 53;

/// A serde_json formatter that prints numbers the way JavaScript does.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsFormatter;

fn write_js_f64<W: ?Sized + io::Write>(writer: &mut W, value: f64) -> io::Result<()> {
    if value.is_finite() {
        let mut buf = ryu_js::Buffer::new();
        writer.write_all(buf.format_finite(value).as_bytes())
    } else {
        // JSON.stringify prints NaN and ±Infinity as null.
        writer.write_all(b"null")
    }
}

impl Formatter for JsFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        write_js_f64(writer, value)
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        write_js_f64(writer, f64::from(value))
    }

    fn write_u64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: u64) -> io::Result<()> {
        if value <= JS_MAX_SAFE {
            writer.write_all(value.to_string().as_bytes())
        } else {
            write_js_f64(writer, value as f64)
        }
    }

    fn write_i64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        if value.unsigned_abs() <= JS_MAX_SAFE {
            writer.write_all(value.to_string().as_bytes())
        } else {
            write_js_f64(writer, value as f64)
        }
    }

    fn write_u128<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: u128) -> io::Result<()> {
        write_js_f64(writer, value as f64)
    }

    fn write_i128<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i128) -> io::Result<()> {
        write_js_f64(writer, value as f64)
    }
}

/// A formatter for `JSON.stringify(value, null, 2)`: 2-space indentation,
/// JavaScript numbers.
#[derive(Clone, Debug, Default)]
pub struct JsPrettyFormatter {
    pretty: serde_json::ser::PrettyFormatter<'static>,
}

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(fn $name<W: ?Sized + io::Write>(&mut self, writer: &mut W $(, $arg: $ty)*) -> io::Result<()> {
            self.pretty.$name(writer $(, $arg)*)
        })*
    };
}

impl Formatter for JsPrettyFormatter {
    delegate! {
        begin_array(); end_array(); begin_array_value(first: bool); end_array_value();
        begin_object(); end_object(); begin_object_key(first: bool); begin_object_value(); end_object_value();
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        JsFormatter.write_f64(writer, value)
    }

    fn write_u64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: u64) -> io::Result<()> {
        JsFormatter.write_u64(writer, value)
    }

    fn write_i64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        JsFormatter.write_i64(writer, value)
    }
}

/// True for keys JavaScript treats as array indices: canonical decimal
/// integers below 2^32 - 1. Objects list these first, in ascending order.
pub fn is_array_index(key: &str) -> bool {
    let canonical = key == "0" || (!key.starts_with('0') && !key.is_empty());
    canonical
        && key.len() <= 10
        && key.bytes().all(|b| b.is_ascii_digit())
        && key.parse::<u64>().is_ok_and(|n| n < 4_294_967_295)
}

/// An object's entries in JavaScript property order: array-index keys first,
/// ascending, then the other keys in insertion order.
pub fn js_entries(map: &serde_json::Map<String, serde_json::Value>) -> Vec<(&String, &serde_json::Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    if entries.iter().any(|(k, _)| is_array_index(k)) {
        // A stable sort keeps insertion order among the non-index keys.
        entries.sort_by_key(
            |(k, _)| if is_array_index(k) { (0, k.parse::<u64>().unwrap_or(0)) } else { (1, 0) },
        );
    }
    entries
}

/// A JSON value that serialises with JavaScript's property order.
struct Js<'a>(&'a serde_json::Value);

impl Serialize for Js<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            serde_json::Value::Object(map) => {
                let mut m = serializer.serialize_map(Some(map.len()))?;
                for (k, v) in js_entries(map) {
                    m.serialize_entry(k, &Js(v))?;
                }
                m.end()
            }
            serde_json::Value::Array(items) => {
                let mut s = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    s.serialize_element(&Js(item))?;
                }
                s.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Serialises `value` as `JSON.stringify(value, null, 2)` would, appending to `out`.
pub fn write_js_pretty(out: &mut Vec<u8>, value: &serde_json::Value) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::with_formatter(out, JsPrettyFormatter::default());
    Js(value).serialize(&mut ser)
}

/// Serialises any value with 2-space indentation and JavaScript numbers,
/// keeping the order its `Serialize` gives (for documents built in JS order).
pub fn write_js_pretty_ordered<W: io::Write, T: Serialize + ?Sized>(
    out: W,
    value: &T,
) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::with_formatter(out, JsPrettyFormatter::default());
    value.serialize(&mut ser)
}

/// Serialises `value` as `JSON.stringify(value)` would, appending to `out`.
pub fn write_js(out: &mut Vec<u8>, value: &serde_json::Value) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::with_formatter(out, JsFormatter);
    Js(value).serialize(&mut ser)
}

/// Returns `JSON.stringify(value)`.
pub fn to_js_string(value: &serde_json::Value) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    write_js(&mut out, value)?;
    // The serializer only ever writes valid UTF-8.
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// Re-encodes JSON text as `JSON.stringify(JSON.parse(text))` would print it,
/// appending to `out`.
///
/// Goes through a [`serde_json::Value`] so duplicate keys resolve as in
/// `JSON.parse`: the last value wins, in the position of the first.
pub fn canonicalize_js(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    write_js(out, &value)
}

/// True for the characters JavaScript's `String.prototype.trim` removes.
pub fn is_js_whitespace(c: char) -> bool {
    c == '\u{FEFF}' || (c.is_whitespace() && c != '\u{85}')
}

/// `text.trim()` as JavaScript defines it.
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_whitespace)
}

/// `text.trimStart()` as JavaScript defines it.
pub fn js_trim_start(text: &str) -> &str {
    text.trim_start_matches(is_js_whitespace)
}

/// `text.trimEnd()` as JavaScript defines it.
pub fn js_trim_end(text: &str) -> &str {
    text.trim_end_matches(is_js_whitespace)
}

/// JavaScript's `ToNumber` for the JSON values a header's `version` can hold.
///
/// `null` and a missing key both mean "absent" (Pi reads `version ?? 1`).
pub fn js_to_number(value: &serde_json::Value) -> f64 {
    use serde_json::Value;
    match value {
        Value::Null => f64::NAN,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => {
            let t = js_trim(s);
            match t {
                "" => 0.0,
                "Infinity" | "+Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ if t.chars().any(|c| c.is_alphabetic() && c != 'e' && c != 'E') => f64::NAN,
                _ => t.parse::<f64>().unwrap_or(f64::NAN),
            }
        }
        Value::Array(items) => match items.as_slice() {
            [] => 0.0,
            [one] if !one.is_array() && !one.is_object() => match one {
                Value::Null => 0.0,
                Value::Bool(_) => f64::NAN,
                other => js_to_number(other),
            },
            _ => f64::NAN,
        },
        Value::Object(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: &str) {
        let mut out = Vec::new();
        canonicalize_js(input, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), expect, "input: {input}");
    }

    #[test]
    fn numbers_print_like_javascript() {
        check("1.0", "1");
        check("1e21", "1e+21");
        check("1e-7", "1e-7");
        check("0.0000001", "1e-7");
        check("0.000001", "0.000001");
        check("123456789012345678901234567890", "1.2345678901234568e+29");
        check("12345678901234567890", "12345678901234567000");
        check("9007199254740993", "9007199254740992");
        check("-0", "0");
        check("0.015040000000000001", "0.015040000000000001");
        check("[1.5,-2,3e2]", "[1.5,-2,300]");
    }

    #[test]
    fn strings_escape_like_javascript() {
        check(r#""\u00e9\/\u001F\u2028""#, "\"é/\\u001f\u{2028}\"");
        check(r#""\b\f\n\r\t\"\\""#, r#""\b\f\n\r\t\"\\""#);
    }

    #[test]
    fn objects_keep_order_and_duplicates_resolve_like_json_parse() {
        check(r#"{ "b" : 1, "a" : 2, "b" : 3 }"#, r#"{"b":3,"a":2}"#);
    }

    #[test]
    fn integer_keys_come_first_as_in_javascript() {
        // node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1])))' '{"b":1,"10":2,"2":3,"01":4,"4294967295":5,"a":6,"0":7}'
        check(
            r#"{"b":1,"10":2,"2":3,"01":4,"4294967295":5,"a":6,"0":7}"#,
            r#"{"0":7,"2":3,"10":2,"b":1,"01":4,"4294967295":5,"a":6}"#,
        );
    }

    #[test]
    fn pretty_output_matches_two_space_stringify() {
        let value: serde_json::Value =
            serde_json::from_str(r#"{"a":[1.0,{}],"b":[],"c":{"d":1e-7}}"#).unwrap();
        let mut out = Vec::new();
        write_js_pretty(&mut out, &value).unwrap();
        let expect = "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": [],\n  \"c\": {\n    \"d\": 1e-7\n  }\n}";
        assert_eq!(String::from_utf8(out).unwrap(), expect);
    }

    #[test]
    fn trim_matches_javascript() {
        assert_eq!(js_trim("\u{FEFF} \u{A0}x\u{3000}\n"), "x");
        assert_eq!(js_trim("\u{85}x"), "\u{85}x");
    }

    #[test]
    fn to_number_follows_javascript() {
        use serde_json::json;
        assert_eq!(js_to_number(&json!(2)), 2.0);
        assert_eq!(js_to_number(&json!(" 3 ")), 3.0);
        assert_eq!(js_to_number(&json!("")), 0.0);
        assert_eq!(js_to_number(&json!(true)), 1.0);
        assert!(js_to_number(&json!("x")).is_nan());
        assert!(js_to_number(&json!({})).is_nan());
        assert_eq!(js_to_number(&json!([])), 0.0);
        assert_eq!(js_to_number(&json!(["2"])), 2.0);
    }
}

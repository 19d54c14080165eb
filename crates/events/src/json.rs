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

use std::cell::Cell;
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

/// `value`'s decimal digits, written from a stack buffer (no `String` per number).
fn write_digits<W: ?Sized + io::Write>(writer: &mut W, negative: bool, mut value: u64) -> io::Result<()> {
    let mut buf = [0u8; 21];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    writer.write_all(&buf[at..])
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
            write_digits(writer, false, value)
        } else {
            write_js_f64(writer, value as f64)
        }
    }

    fn write_i64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        if value.unsigned_abs() <= JS_MAX_SAFE {
            write_digits(writer, value < 0, value.unsigned_abs())
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

/// Serialises `value` exactly as serde_json's serializer with
/// [`JsPrettyFormatter`] does (`JSON.stringify(value, null, 2)` of a value
/// whose objects keep their keys in order), appending to `out`: indentation
/// written in one piece, and each string checked for characters to escape
/// in one pass that vectorises, then copied whole (serde_json's serializer
/// looks each byte up and writes in small pieces).
pub fn write_js_pretty_serialize<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    value.serialize(&mut PrettyJs {
        out,
        depth: 0,
        has_value: false,
        compact: false,
        numbers: JsPrettyFormatter::default(),
    })
}

/// Serialises `value` exactly as serde_json's serializer with
/// [`JsFormatter`] does (`JSON.stringify(value)` of a value whose objects
/// keep their keys in order), appending to `out`: the serializer of
/// [`write_js_pretty_serialize`] without whitespace.
pub fn write_js_serialize<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    value.serialize(&mut PrettyJs { out, depth: 0, has_value: false, compact: true, numbers: JsFormatter })
}

/// A map of one entry, `key: 0`: how a key that is not a string is
/// written by serde_json itself.
struct OneKey<'k, T: ?Sized>(&'k T);

impl<T: Serialize + ?Sized> Serialize for OneKey<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &0u8)?;
        map.end()
    }
}

/// The serializer of [`write_js_pretty_serialize`] and, without
/// whitespace, of [`write_js_serialize`]: serde_json's `Serializer` over a
/// `PrettyFormatter` with two-space indentation (or its compact formatter),
/// whose state it keeps (the nesting and whether the innermost container written
/// last had a value).
struct PrettyJs<'o, F> {
    out: &'o mut Vec<u8>,
    depth: usize,
    has_value: bool,
    /// No whitespace between tokens.
    compact: bool,
    /// Writes the numbers (its layout state is never used).
    numbers: F,
}

/// The name serde_json's `RawValue` serialises as (a struct of one field of this name).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Appends `text` as a JSON string token, escaped as serde_json (and
/// JavaScript) escape it: `"` and `\` with a backslash, the control
/// characters below U+0020 as `\b`, `\t`, `\n`, `\f`, `\r` or `\u00xx`
/// (lowercase hex), everything else as is. A string with nothing to escape
/// is told in one pass that vectorises and copied whole; otherwise the bytes
/// to escape are found eight at a time.
pub fn push_json_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if !bytes.iter().fold(false, |seen, &b| seen | needs_escape(b)) {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    while let Some(at) = next_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..at]);
        let b = bytes[at];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            }
        }
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether a byte needs escaping in a JSON string (`"`, `\`, below 0x20);
/// no short-circuit, so a pass over many bytes vectorises.
fn needs_escape(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

/// The index of the first byte from `from` on that needs escaping, read
/// eight bytes at a time.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let flags = escape_flags(u64::from_le_bytes(word));
        if flags != 0 {
            return Some(i + (flags.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes.get(i..)?.iter().position(|&b| needs_escape(b)).map(|p| i + p)
}

/// The high bit of each byte of `word` (read little-endian) flagged where
/// the byte is `"`, `\` or below 0x20 — exactly up to the first flagged
/// byte, the one that counts: the zero-byte test borrows only upwards from a
/// zero byte, so it flags no byte below the first zero one.
fn escape_flags(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    // A byte below 0x20 is one whose top three bits are zero.
    zero_bytes(word & (ONES * 0xe0))
        | zero_bytes(word ^ (ONES * u64::from(b'"')))
        | zero_bytes(word ^ (ONES * u64::from(b'\\')))
}

impl<F: Formatter> PrettyJs<'_, F> {
    /// A line break and the current indentation (two spaces a level).
    fn newline(&mut self, comma: bool) {
        const SPACES: &[u8; 64] = &[b' '; 64];
        if comma {
            self.out.push(b',');
        }
        if self.compact {
            return;
        }
        self.out.push(b'\n');
        let mut n = 2 * self.depth;
        while n > 0 {
            let run = n.min(SPACES.len());
            self.out.extend_from_slice(&SPACES[..run]);
            n -= run;
        }
    }

    fn open(&mut self, bracket: u8) {
        self.depth += 1;
        self.has_value = false;
        self.out.push(bracket);
    }

    fn close(&mut self, bracket: u8) {
        self.depth -= 1;
        if self.has_value && !self.compact {
            self.newline(false);
        }
        self.out.push(bracket);
    }

    /// `{"variant": ` of an enum variant written as an object of one key.
    fn open_variant(&mut self, variant: &str) {
        self.open(b'{');
        self.newline(false);
        push_json_str(self.out, variant);
        self.colon();
    }

    /// A key's `: ` (`:` when compact).
    fn colon(&mut self) {
        self.out.extend_from_slice(if self.compact { b":" } else { b": " });
    }

    /// The `}` after a variant's value.
    fn close_variant(&mut self) {
        self.has_value = true;
        self.close(b'}');
    }
}

/// A container being written: `first` until its first item, `empty` when
/// it was closed at once (a length of 0 announced).
struct PrettyCompound<'s, 'o, F> {
    ser: &'s mut PrettyJs<'o, F>,
    first: bool,
    empty: bool,
    /// Closes an enum variant's object after the container (tuple and struct variants).
    variant: bool,
    /// A `RawValue`: its one field is written as it is.
    raw: bool,
}

impl<'s, 'o, F: Formatter> PrettyCompound<'s, 'o, F> {
    fn new(ser: &'s mut PrettyJs<'o, F>, bracket: u8, len: Option<usize>) -> Self {
        ser.open(bracket);
        let empty = len == Some(0);
        if empty {
            ser.close(if bracket == b'[' { b']' } else { b'}' });
        }
        PrettyCompound { ser, first: true, empty, variant: false, raw: false }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.ser.newline(!self.first);
        self.first = false;
        value.serialize(&mut *self.ser)?;
        self.ser.has_value = true;
        Ok(())
    }

    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), serde_json::Error> {
        self.ser.newline(!self.first);
        self.first = false;
        // A key that is a string (the usual case: a struct's keys are
        // `&str`) is written here; any other key exactly as serde_json's
        // own key serializer writes it (numbers of each width and booleans
        // quoted, anything else an error), cut out of a one-entry map.
        match serde_json::to_value(key) {
            Ok(serde_json::Value::String(k)) => push_json_str(self.ser.out, &k),
            _ => {
                let mut one = Vec::new();
                let cut = if self.ser.compact {
                    OneKey(key)
                        .serialize(&mut serde_json::Serializer::with_formatter(&mut one, JsFormatter))?;
                    // `one` is `{KEY:0}`.
                    one.get(1..one.len().saturating_sub(3))
                } else {
                    let mut ser =
                        serde_json::Serializer::with_formatter(&mut one, JsPrettyFormatter::default());
                    OneKey(key).serialize(&mut ser)?;
                    // `one` is `{\n  KEY: 0\n}`.
                    one.get(4..one.len().saturating_sub(5))
                };
                self.ser.out.extend_from_slice(cut.unwrap_or_default());
            }
        }
        Ok(())
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.ser.colon();
        value.serialize(&mut *self.ser)?;
        self.ser.has_value = true;
        Ok(())
    }

    fn end(self, bracket: u8) -> Result<(), serde_json::Error> {
        if !self.empty {
            self.ser.close(bracket);
        }
        if self.variant {
            self.ser.close_variant();
        }
        Ok(())
    }
}

impl<'s, 'o, F: Formatter> serde::Serializer for &'s mut PrettyJs<'o, F> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = PrettyCompound<'s, 'o, F>;
    type SerializeTuple = PrettyCompound<'s, 'o, F>;
    type SerializeTupleStruct = PrettyCompound<'s, 'o, F>;
    type SerializeTupleVariant = PrettyCompound<'s, 'o, F>;
    type SerializeMap = PrettyCompound<'s, 'o, F>;
    type SerializeStruct = PrettyCompound<'s, 'o, F>;
    type SerializeStructVariant = PrettyCompound<'s, 'o, F>;

    fn serialize_bool(self, v: bool) -> Result<(), Self::Error> {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Self::Error> {
        self.numbers.write_i8(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Self::Error> {
        self.numbers.write_i16(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Self::Error> {
        self.numbers.write_i32(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Self::Error> {
        self.numbers.write_i64(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Self::Error> {
        self.numbers.write_i128(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Self::Error> {
        self.numbers.write_u8(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Self::Error> {
        self.numbers.write_u16(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Self::Error> {
        self.numbers.write_u32(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Self::Error> {
        self.numbers.write_u64(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Self::Error> {
        self.numbers.write_u128(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Self::Error> {
        // NaN and the infinities are `null`, as serde_json writes them.
        if !v.is_finite() {
            return self.serialize_unit();
        }
        self.numbers.write_f32(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Self::Error> {
        if !v.is_finite() {
            return self.serialize_unit();
        }
        self.numbers.write_f64(self.out, v).map_err(serde_json::Error::io)
    }
    fn serialize_char(self, v: char) -> Result<(), Self::Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Self::Error> {
        push_json_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Self::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        SerializeSeq::end(seq)
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Self::Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.open_variant(variant);
        value.serialize(&mut *self)?;
        self.close_variant();
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
        Ok(PrettyCompound::new(self, b'[', len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, Self::Error> {
        self.open_variant(variant);
        Ok(PrettyCompound { variant: true, ..PrettyCompound::new(self, b'[', Some(len)) })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
        Ok(PrettyCompound::new(self, b'{', len))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeStruct, Self::Error> {
        if name == RAW_VALUE_TOKEN {
            return Ok(PrettyCompound { ser: self, first: true, empty: true, variant: false, raw: true });
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, Self::Error> {
        self.open_variant(variant);
        Ok(PrettyCompound { variant: true, ..PrettyCompound::new(self, b'{', Some(len)) })
    }
}

impl<F: Formatter> serde::ser::SerializeSeq for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b']')
    }
}

impl<F: Formatter> serde::ser::SerializeTuple for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b']')
    }
}

impl<F: Formatter> serde::ser::SerializeTupleStruct for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b']')
    }
}

impl<F: Formatter> serde::ser::SerializeTupleVariant for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b']')
    }
}

impl<F: Formatter> serde::ser::SerializeMap for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.value(value)
    }
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Self::Error> {
        self.key(key)?;
        self.value(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b'}')
    }
}

impl<F: Formatter> serde::ser::SerializeStruct for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        if self.raw {
            // A `RawValue`'s one field is its JSON text, written as it is.
            return match serde_json::to_value(value)? {
                serde_json::Value::String(text) if key == RAW_VALUE_TOKEN => {
                    self.ser.out.extend_from_slice(text.as_bytes());
                    Ok(())
                }
                _ => Err(serde::ser::Error::custom("invalid raw value")),
            };
        }
        self.ser.newline(!self.first);
        self.first = false;
        push_json_str(self.ser.out, key);
        self.value(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        if self.raw {
            return Ok(());
        }
        PrettyCompound::end(self, b'}')
    }
}

impl<F: Formatter> serde::ser::SerializeStructVariant for PrettyCompound<'_, '_, F> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        serde::ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        PrettyCompound::end(self, b'}')
    }
}

/// Writes `value` as `JSON.stringify(value, null, 2)` would print it nested
/// `depth` levels deep: every line after the first is indented by `2 × depth`
/// more spaces (line breaks only ever separate tokens: strings escape theirs).
pub fn write_js_pretty_at(
    out: &mut Vec<u8>,
    value: &serde_json::Value,
    depth: usize,
) -> Result<(), serde_json::Error> {
    let mut text = Vec::new();
    write_js_pretty(&mut text, value)?;
    indent_lines(out, &text, depth);
    Ok(())
}

fn indent_lines(out: &mut Vec<u8>, text: &[u8], depth: usize) {
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
            out.extend(std::iter::repeat_n(b' ', 2 * depth));
        }
        out.extend_from_slice(line);
    }
}

/// The position of the first `"` or `\\` in `s`, the end of a JSON string's
/// plain run: eight bytes at a time over the first 32 (most strings are
/// short keys and words, where a vector search costs more to start than
/// it saves), then `memchr`'s vector search.
#[inline]
pub fn find_quote_or_backslash(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let mut at = 0;
    while at < 32 {
        let Some(word) = s[at..].first_chunk::<8>() else { break };
        let word = u64::from_le_bytes(*word);
        let (quote, backslash) = (word ^ (ONES * u64::from(b'"')), word ^ (ONES * u64::from(b'\\')));
        // The high bit of each zero byte, exact up to the first one (a borrow
        // can only mark bytes above a zero byte).
        let zero = (quote.wrapping_sub(ONES) & !quote | backslash.wrapping_sub(ONES) & !backslash) & HIGH;
        if zero != 0 {
            return Some(at + zero.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    memchr::memchr2(b'"', b'\\', &s[at..]).map(|i| at + i)
}

/// Just past the closing quote of the string whose opening quote is `s[at]`,
/// in text known to be JSON (its escapes are not checked); `None` when the
/// text runs out first.
pub fn string_end(s: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i += find_quote_or_backslash(s.get(i..)?)?;
        if s[i] == b'"' {
            return Some(i + 1);
        }
        // An escape: the byte after the backslash is never the closing quote.
        i += 2;
    }
}

/// Where the value at `s[at]` ends, in text known to be JSON: a string just
/// past its closing quote, an array or object just past its matching bracket
/// (the strings inside passed over whole by [`string_end`]), anything else
/// at the next `,`, `]`, `}` or whitespace. `None` when the text runs out,
/// or when arrays and objects nest deeper than `max_depth`.
pub fn value_end(s: &[u8], at: usize, max_depth: usize) -> Option<usize> {
    match *s.get(at)? {
        b'"' => string_end(s, at),
        b'[' | b'{' => {
            let (mut i, mut depth) = (at, 0usize);
            loop {
                match *s.get(i)? {
                    b'"' => {
                        i = string_end(s, i)?;
                        continue;
                    }
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > max_depth {
                            return None;
                        }
                    }
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let n =
                s[at..].iter().position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'));
            let end = n.map_or(s.len(), |n| at + n);
            (end > at).then_some(end)
        }
    }
}

/// Why the fast re-indenter hands a text to the exact slow path.
enum Reindent {
    /// An object repeats a key or has array-index keys (JavaScript reorders
    /// or merges them).
    Reorder,
    /// Not JSON.
    Invalid(serde_json::Error),
}

/// Writes JSON `text` as `JSON.stringify(JSON.parse(text), null, 2)` prints it
/// nested `depth` levels deep (see [`write_js_pretty_at`]), without building a
/// value when it can: strings without escapes and short integers are copied
/// as they are; other numbers go through JavaScript's printing, escaped
/// strings are decoded and encoded again. An object with a repeated key or
/// an array-index key takes the exact path through a value.
pub fn write_js_pretty_text(out: &mut Vec<u8>, text: &str, depth: usize) -> Result<(), serde_json::Error> {
    reindent(out, text, depth, false).map(|_| ())
}

/// What [`write_js_pretty_text_observed`] saw of the outermost object while
/// re-indenting it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed<'a> {
    /// The value of the outermost object's `role` key when it is a string
    /// written without escapes (`None` otherwise, or when absent).
    pub role: Option<&'a str>,
    /// True when the outermost object has a `content` key whose value is not `null`.
    pub content: bool,
    /// True when the text was re-indented by the fast scanner, so the two
    /// observations above are complete (false after the exact path through a value).
    pub complete: bool,
    /// True when a number is beyond `f64` (serde_json's typed read refuses it)
    /// or a `\u` escape had to be decoded (it may be a lone surrogate).
    pub unusual: bool,
}

/// [`write_js_pretty_text`] of text serde_json has already read as one JSON
/// value (so its strings are not checked for control characters again),
/// also returning what it saw of the outermost object.
pub fn write_js_pretty_text_observed<'t>(
    out: &mut Vec<u8>,
    text: &'t str,
    depth: usize,
) -> Result<Observed<'t>, serde_json::Error> {
    reindent(out, text, depth, true)
}

thread_local! {
    /// The memory of the re-indenter's key stack, kept per thread between texts.
    static KEYS: Cell<Vec<(usize, usize)>> = const { Cell::new(Vec::new()) };
}

fn reindent<'t>(
    out: &mut Vec<u8>,
    text: &'t str,
    depth: usize,
    validated: bool,
) -> Result<Observed<'t>, serde_json::Error> {
    let start = out.len();
    let (fast, seen) = rewrite(out, text, Layout::Pretty(depth), validated);
    match fast {
        Ok(()) => Ok(seen),
        Err(why) => {
            out.truncate(start);
            match why {
                Reindent::Invalid(e) => Err(e),
                Reindent::Reorder => {
                    let value: serde_json::Value = serde_json::from_str(text)?;
                    write_js_pretty_at(out, &value, depth)?;
                    Ok(Observed { unusual: seen.unusual, ..Observed::default() })
                }
            }
        }
    }
}

/// How the fast re-writer lays out what it copies.
#[derive(Clone, Copy)]
enum Layout {
    /// `JSON.stringify(value, null, 2)` nested this many levels deep.
    Pretty(usize),
    /// `JSON.stringify(value)`: no whitespace.
    Compact,
}

/// One pass of the fast re-writer over `text`, appending to `out` (which
/// holds a partial output after an error), and what it saw; `complete` is
/// set when the pass succeeded.
fn rewrite<'t>(
    out: &mut Vec<u8>,
    text: &'t str,
    layout: Layout,
    validated: bool,
) -> (Result<(), Reindent>, Observed<'t>) {
    let (depth, limit, compact) = match layout {
        Layout::Pretty(depth) => (depth, depth + MAX_NESTING, false),
        // Deeper than serde_json's own limit (128) goes to the value path,
        // which then decides as before.
        Layout::Compact => (0, COMPACT_NESTING, true),
    };
    let mut keys = KEYS.with(Cell::take);
    keys.clear();
    let mut r = Reindenter {
        text,
        src: text.as_bytes(),
        pos: 0,
        out: &mut *out,
        limit,
        base: depth,
        seen: Observed::default(),
        validated,
        compact,
        keys,
    };
    let fast = r.value(depth).and_then(|()| {
        r.skip_ws();
        if r.pos == r.src.len() {
            Ok(())
        } else {
            Err(Reindent::Invalid(serde::de::Error::custom("trailing characters")))
        }
    });
    let mut seen = std::mem::take(&mut r.seen);
    KEYS.with(|k| k.set(std::mem::take(&mut r.keys)));
    seen.complete = fast.is_ok();
    (fast, seen)
}

/// The nesting past which [`canonicalize_js`] hands a text to serde_json
/// (whose recursion limit is 128 levels).
const COMPACT_NESTING: usize = 100;

/// How deeply [`write_js_pretty_text`] follows nested arrays and objects
/// before it refuses the text: deeper nesting would exhaust the stack (Pi's
/// `JSON.stringify` fails there too, with a `RangeError`).
pub const MAX_NESTING: usize = 1000;

/// Whether the unsigned number token `digits` is already what JavaScript
/// prints for its value: a decimal fraction (`int.frac`, no exponent, no
/// leading zero in `int`, no trailing zero in `frac`) of at most 15
/// significant digits, at least `0.000001`. Two decimals of 15 significant
/// digits or fewer never round to the same `f64` (they differ by more than
/// 10⁻¹⁵ of their size, a double's spacing is 2.2 × 10⁻¹⁶ of it), so
/// these digits are the shortest that read back as the value, and
/// `Number.prototype.toString` writes them in this fixed notation.
fn plain_decimal(digits: &[u8]) -> bool {
    let Some(dot) = digits.iter().position(|&b| b == b'.') else { return false };
    let (int, frac) = (&digits[..dot], &digits[dot + 1..]);
    if int.is_empty()
        || frac.last().is_none_or(|&b| b == b'0')
        || (int.len() > 1 && int[0] == b'0')
        || !int.iter().chain(frac).all(u8::is_ascii_digit)
    {
        return false;
    }
    let significant = if int == b"0" {
        let zeros = frac.iter().take_while(|&&b| b == b'0').count();
        if zeros > 5 {
            return false;
        }
        frac.len() - zeros
    } else {
        int.len() + frac.len()
    };
    significant <= 15
}

/// Whether the number token `token` (sign included) is already what
/// JavaScript prints for its value: an integer of at most 15 digits without
/// a leading zero (not `-0`), or a [`plain_decimal`] fraction.
fn plain_number(token: &[u8]) -> bool {
    let digits = token.strip_prefix(b"-").unwrap_or(token);
    let plain_integer = !digits.is_empty()
        && digits.len() <= 15
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0')
        && token != b"-0";
    plain_integer || plain_decimal(digits)
}

/// Whether `token` is a number by JSON's grammar:
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_json_number(token: &[u8]) -> bool {
    let digits = |at: usize| token[at.min(token.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut at = usize::from(token.first() == Some(&b'-'));
    match digits(at) {
        0 => return false,
        n if n > 1 && token[at] == b'0' => return false,
        n => at += n,
    }
    if token.get(at) == Some(&b'.') {
        match digits(at + 1) {
            0 => return false,
            n => at += 1 + n,
        }
    }
    if matches!(token.get(at), Some(b'e' | b'E')) {
        at += 1;
        at += usize::from(matches!(token.get(at), Some(b'+' | b'-')));
        match digits(at) {
            0 => return false,
            n => at += n,
        }
    }
    at == token.len()
}

/// A line break and the indentation of the first 63 levels, written as
/// one slice.
const INDENT: [u8; 127] = {
    let mut indent = [b' '; 127];
    indent[0] = b'\n';
    indent
};

/// Writes the string whose JSON text (between the quotes, no raw control
/// characters) is `inner` as `JSON.stringify(JSON.parse(text))` prints it:
/// `"`, `\\` and the control characters escaped (`\b \t \n \f \r`, others
/// as lowercase `\u00xx`), a surrogate pair as its character, a lone
/// surrogate as its lowercase `\u` escape (ES2019's well-formed
/// `JSON.stringify`), everything else as its UTF-8. `None` for an invalid escape.
fn write_js_string(out: &mut Vec<u8>, inner: &[u8]) -> Option<()> {
    let hex4 = |at: usize| -> Option<u32> {
        let digits = inner.get(at..at + 4)?;
        digits.iter().try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
    };
    out.push(b'"');
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &inner[i..]) {
        out.extend_from_slice(&inner[i..i + k]);
        i += k;
        let unit = match *inner.get(i + 1)? {
            b'"' => u32::from(b'"'),
            b'\\' => u32::from(b'\\'),
            b'/' => u32::from(b'/'),
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => 0x0a,
            b'r' => 0x0d,
            b't' => 0x09,
            b'u' => hex4(i + 2)?,
            _ => return None,
        };
        i += if inner[i + 1] == b'u' { 6 } else { 2 };
        let low = (0xd800..0xdc00).contains(&unit).then(|| {
            let next = inner.get(i..i + 2).filter(|u| *u == b"\\u").and_then(|_| hex4(i + 2))?;
            (0xdc00..0xe000).contains(&next).then_some(next)
        });
        let c = match low.flatten() {
            Some(low) => {
                i += 6;
                char::from_u32(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00))?
            }
            None => match char::from_u32(unit) {
                Some(c) => c,
                None => {
                    // A lone surrogate.
                    out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                    continue;
                }
            },
        };
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if c < ' ' => out.extend_from_slice(format!("\\u{:04x}", u32::from(c)).as_bytes()),
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.extend_from_slice(&inner[i..]);
    out.push(b'"');
    Some(())
}

/// Appends `bytes[..len]`. A short piece is copied as one fixed-size block
/// and the excess cut off again: a few stores, where a copy of a length
/// known only at run time calls `memcpy` (most tokens and indents are short).
#[inline]
fn append(out: &mut Vec<u8>, bytes: &[u8], len: usize) {
    match bytes.first_chunk::<32>() {
        Some(block) if len <= 32 => {
            let end = out.len() + len;
            out.extend_from_slice(block);
            out.truncate(end);
        }
        _ => out.extend_from_slice(&bytes[..len]),
    }
}

struct Reindenter<'s, 'o> {
    /// The text, whose observed `role` is borrowed.
    text: &'s str,
    src: &'s [u8],
    pos: usize,
    out: &'o mut Vec<u8>,
    /// The depth past which nesting is refused.
    limit: usize,
    /// The depth of the outermost value (whose keys are observed).
    base: usize,
    seen: Observed<'s>,
    /// The text is known to be JSON: strings need no control-character check.
    validated: bool,
    /// No whitespace between tokens (`JSON.stringify(value)`).
    compact: bool,
    /// The keys of the objects being read, innermost last (one allocation
    /// for the whole text).
    keys: Vec<(usize, usize)>,
}

impl Reindenter<'_, '_> {
    fn invalid(&self, what: &str) -> Reindent {
        Reindent::Invalid(serde::de::Error::custom(format!("{what} at byte {}", self.pos)))
    }

    #[inline]
    fn skip_ws(&mut self) {
        // Compact text has no whitespace between tokens: one test.
        if self.src.get(self.pos).is_some_and(|&b| b <= b' ') {
            while self.pos < self.src.len() && matches!(self.src[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            }
        }
    }

    /// A line break and the indentation of `depth`, after `before` (`,` or nothing).
    #[inline(always)]
    fn newline(&mut self, before: &[u8], depth: usize) {
        self.out.extend_from_slice(before);
        if self.compact {
            return;
        }
        if 2 * depth < INDENT.len() {
            append(self.out, &INDENT, 1 + 2 * depth);
        } else {
            self.out.push(b'\n');
            self.out.extend(std::iter::repeat_n(b' ', 2 * depth));
        }
    }

    /// The raw string token at `pos` (quotes included), and whether its
    /// escapes differ from the ones `JSON.stringify` writes (then it must be
    /// decoded and encoded again rather than copied).
    fn string_token(&mut self) -> Result<(usize, usize, bool), Reindent> {
        let start = self.pos;
        self.pos += 1;
        let mut foreign = false;
        loop {
            let rest = &self.src[self.pos..];
            let Some(i) = find_quote_or_backslash(rest) else {
                return Err(self.invalid("unterminated string"));
            };
            if !self.validated && rest[..i].iter().any(|&b| b < 0x20) {
                return Err(self.invalid("control character in a string"));
            }
            self.pos += i;
            if self.src[self.pos] == b'"' {
                self.pos += 1;
                return Ok((start, self.pos, foreign));
            }
            match self.src.get(self.pos + 1) {
                Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => self.pos += 2,
                Some(b'u') => {
                    // JSON.stringify writes `\u00xx` (lowercase) for the control
                    // characters without a short escape, and nothing else.
                    let hex = self.src.get(self.pos + 2..self.pos + 6).unwrap_or_default();
                    let canonical = hex.len() == 4
                        && hex.starts_with(b"00")
                        && matches!(hex[2], b'0' | b'1')
                        && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                        && !matches!(&hex[2..], b"08" | b"09" | b"0a" | b"0c" | b"0d");
                    foreign |= !canonical;
                    self.pos += 2 + hex.len();
                }
                // A backslash ending the text: nothing follows to escape.
                None => return Err(self.invalid("unterminated string")),
                Some(_) => {
                    foreign = true;
                    self.pos += 2;
                }
            }
        }
    }

    /// A key's raw string token at `pos` (quotes included), and whether it
    /// has an escape.
    fn key_token(&mut self) -> Result<(usize, usize, bool), Reindent> {
        let start = self.pos;
        let rest = &self.src[start + 1..];
        match find_quote_or_backslash(rest) {
            Some(i) if rest[i] == b'"' && (self.validated || rest[..i].iter().all(|&b| b >= 0x20)) => {
                self.pos = start + 1 + i + 1;
                Ok((start, self.pos, false))
            }
            _ => self.string_token().map(|(a, b, _)| (a, b, true)),
        }
    }

    fn string(&mut self) -> Result<(), Reindent> {
        let (a, b, foreign) = self.string_token()?;
        let token = &self.src[a..b];
        if !foreign {
            // Escaped as JSON.stringify escapes, and nothing it would escape
            // can stand unescaped in valid JSON: the token is already its output.
            append(self.out, &self.src[a..], b - a);
            return Ok(());
        }
        self.seen.unusual |= token.windows(2).any(|w| w == b"\\u");
        write_js_string(self.out, &token[1..token.len() - 1]).ok_or_else(|| {
            Reindent::Invalid(serde::de::Error::custom(format!("invalid escape in the string at byte {a}")))
        })
    }

    fn number(&mut self) -> Result<(), Reindent> {
        let start = self.pos;
        while self.pos < self.src.len()
            && matches!(self.src[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        {
            self.pos += 1;
        }
        let token = &self.src[start..self.pos];
        if plain_number(token) {
            append(self.out, &self.src[start..], token.len());
            return Ok(());
        }
        if (self.compact || !self.validated) && !is_json_number(token) {
            // Rust reads forms JSON refuses (`01`, `1.`): serde_json decides.
            return Err(Reindent::Reorder);
        }
        let value: f64 = std::str::from_utf8(token)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| self.invalid("bad number"))?;
        self.seen.unusual |= !value.is_finite();
        write_js_f64(&mut *self.out, value).map_err(|e| Reindent::Invalid(serde::ser::Error::custom(e)))
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Reindent> {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            self.out.extend_from_slice(word);
            Ok(())
        } else {
            Err(self.invalid("unexpected character"))
        }
    }

    /// Notes the `role` and `content` of the outermost object, before its value is read.
    fn observe(&mut self, key: &[u8]) {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        match key {
            b"role" => {
                self.seen.role = rest.strip_prefix(b"\"").and_then(|r| {
                    let end = find_quote_or_backslash(r)?;
                    // Between two quotes of the text: char boundaries.
                    (r[end] == b'"').then(|| &self.text[self.pos + 1..self.pos + 1 + end])
                });
            }
            b"content" => self.seen.content = !rest.starts_with(b"null"),
            _ => {}
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), Reindent> {
        self.skip_ws();
        if depth >= self.limit && matches!(self.src.get(self.pos), Some(b'{' | b'[')) {
            if self.compact {
                return Err(Reindent::Reorder);
            }
            return Err(self.invalid(&format!("JSON nested deeper than {MAX_NESTING} levels")));
        }
        match self.src.get(self.pos) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.invalid("expected a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Reindent> {
        self.pos += 1;
        self.skip_ws();
        if self.src.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.out.extend_from_slice(b"{}");
            return Ok(());
        }
        self.out.push(b'{');
        let base = self.keys.len();
        loop {
            self.skip_ws();
            if self.src.get(self.pos) != Some(&b'"') {
                return Err(self.invalid("expected a key"));
            }
            let (a, b, escaped) = self.key_token()?;
            let src = self.src;
            let key = &src[a + 1..b - 1];
            // Escaped keys, repeated keys and array-index keys change in JSON.parse.
            let index_like = !key.is_empty() && key.iter().all(u8::is_ascii_digit);
            if escaped || index_like || self.keys[base..].iter().any(|&(x, y)| &src[x..y] == key) {
                return Err(Reindent::Reorder);
            }
            self.keys.push((a + 1, b - 1));
            self.newline(if self.keys.len() > base + 1 { b"," } else { b"" }, depth + 1);
            append(self.out, &self.src[a..], b - a);
            self.out.extend_from_slice(if self.compact { b":" } else { b": " });
            self.skip_ws();
            if self.src.get(self.pos) != Some(&b':') {
                return Err(self.invalid("expected ':'"));
            }
            self.pos += 1;
            if depth == self.base {
                self.observe(key);
            }
            self.value(depth + 1)?;
            self.skip_ws();
            match self.src.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.invalid("expected ',' or '}'")),
            }
        }
        self.keys.truncate(base);
        self.newline(b"", depth);
        self.out.push(b'}');
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<(), Reindent> {
        self.pos += 1;
        self.skip_ws();
        if self.src.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.out.extend_from_slice(b"[]");
            return Ok(());
        }
        self.out.push(b'[');
        let mut first = true;
        loop {
            self.newline(if first { b"" } else { b"," }, depth + 1);
            first = false;
            self.value(depth + 1)?;
            self.skip_ws();
            match self.src.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.invalid("expected ',' or ']'")),
            }
        }
        self.newline(b"", depth);
        self.out.push(b']');
        Ok(())
    }
}

/// A JavaScript number as a JSON value: integral values as integers (below
/// 2^53), others as floats, NaN and infinities as `null` (as `JSON.stringify`).
pub fn js_number(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// The value at `path` in the JSON text `text`, as
/// `JSON.parse(text)[path[0]][path[1]]…` gives it (the last of repeated keys
/// winning), parsing only the objects on the path and the value at its end:
/// a string elsewhere that a [`serde_json::Value`] cannot hold (a lone
/// surrogate, which `JSON.parse` takes) does not matter. `None` when a key
/// is missing, a step is not an object, or `text` is not JSON.
pub fn value_at(text: &str, path: &[&str]) -> Option<serde_json::Value> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let found = PathSeed(path).deserialize(&mut de).ok()?;
    de.end().ok()?;
    found
}

/// What [`value_at`] reads at one step: the rest of the path.
struct PathSeed<'p>(&'p [&'p str]);

impl<'de> serde::de::DeserializeSeed<'de> for PathSeed<'_> {
    type Value = Option<serde_json::Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.0.is_empty() {
            serde::Deserialize::deserialize(d).map(Some)
        } else {
            d.deserialize_any(self)
        }
    }
}

impl<'de> serde::de::Visitor<'de> for PathSeed<'_> {
    type Value = Option<serde_json::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some((key, rest)) = self.0.split_first() else { return Ok(None) };
        let mut found = None;
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == *key {
                found = map.next_value_seed(PathSeed(rest))?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
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
/// Copies the text's tokens without building a value where it can (the
/// re-indenter of [`write_js_pretty_text`], laying nothing out). A text the
/// copy cannot settle goes through a [`serde_json::Value`], as it always
/// did: duplicate keys (the last value wins, in the position of the first),
/// array-index or escaped keys, a decoded `\u` escape (a lone surrogate is an
/// error there), a number beyond `f64`, or nesting past 100 levels. So the
/// output, and which texts are errors, are the value path's.
pub fn canonicalize_js(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let start = out.len();
    let (fast, seen) = rewrite(out, text, Layout::Compact, false);
    match fast {
        Ok(()) if !seen.unusual => Ok(()),
        Err(Reindent::Invalid(e)) => {
            out.truncate(start);
            Err(e)
        }
        _ => {
            out.truncate(start);
            canonicalize_js_by_value(text, out)
        }
    }
}

/// Whether `text` is already exactly what [`canonicalize_js`] writes for it,
/// so that the text itself can stand for `JSON.stringify(JSON.parse(text))`.
///
/// Conservative: `true` only for compact text (no whitespace between
/// tokens) whose strings hold no control character and only the escapes
/// `JSON.stringify` writes (`\"`, `\\`, `\b \f \n \r \t`, and lowercase
/// `\u00xx` for the other control characters), whose numbers are integers of
/// at most 15 digits or plain decimal fractions as JavaScript prints them,
/// whose object keys have no escape, are not all digits and are not
/// repeated in their object, nested at most [`CANONICAL_DEPTH`] levels.
/// Those are the tokens [`canonicalize_js`]'s fast copy copies unchanged and
/// never hands to the value path; anything else is `false`.
pub fn is_canonical_js(text: &str) -> bool {
    // Control characters (never in a canonical text: escaped in strings,
    // and no whitespace between tokens): one pass that vectorises.
    if text.bytes().fold(false, |seen, b| seen | (b < 0x20)) {
        return false;
    }
    let mut check = Canonical { s: text.as_bytes(), i: 0, keys: Vec::new() };
    check.value(0).is_some() && check.i == text.len()
}

/// How deeply [`is_canonical_js`] follows nested arrays and objects before
/// it answers `false` (below [`canonicalize_js`]'s own limit of 100).
pub const CANONICAL_DEPTH: usize = 64;

/// The most keys an object may have for [`is_canonical_js`] to answer `true`.
pub const CANONICAL_KEYS: usize = 256;

/// The walk of [`is_canonical_js`]: each method passes over one canonical
/// token at `i`, or returns `None`.
struct Canonical<'s> {
    s: &'s [u8],
    i: usize,
    /// The keys of the objects being read, innermost last.
    keys: Vec<&'s [u8]>,
}

impl<'s> Canonical<'s> {
    fn value(&mut self, depth: usize) -> Option<()> {
        match *self.s.get(self.i)? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.s[self.i..].starts_with(word).then(|| self.i += word.len())
    }

    /// A string escaped as `JSON.stringify` escapes it; whether it has an escape.
    fn string(&mut self) -> Option<bool> {
        let mut i = self.i + 1;
        let mut escaped = false;
        loop {
            i += find_quote_or_backslash(&self.s[i..])?;
            if self.s[i] == b'"' {
                self.i = i + 1;
                return Some(escaped);
            }
            escaped = true;
            match *self.s.get(i + 1)? {
                b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    // Only the control characters without a short escape, lowercase.
                    let hex = self.s.get(i + 2..i + 6)?;
                    let canonical = hex.starts_with(b"00")
                        && matches!(hex[2], b'0' | b'1')
                        && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                        && !matches!(&hex[2..], b"08" | b"09" | b"0a" | b"0c" | b"0d");
                    if !canonical {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            }
        }
    }

    fn number(&mut self) -> Option<()> {
        let start = self.i;
        let len = self.s[start..]
            .iter()
            .take_while(|&&b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
            .count();
        plain_number(&self.s[start..start + len]).then(|| self.i += len)
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > CANONICAL_DEPTH {
            return None;
        }
        self.i += 1;
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Some(());
        }
        let base = self.keys.len();
        loop {
            if self.s.get(self.i) != Some(&b'"') {
                return None;
            }
            let start = self.i + 1;
            if self.string()? {
                return None;
            }
            let s = self.s;
            let key = &s[start..self.i - 1];
            // Array-index keys move to the front, a repeated key's last
            // value wins: JSON.parse changes both.
            let index_like = !key.is_empty() && key.iter().all(u8::is_ascii_digit);
            // The repeat check compares each key with the object's earlier
            // ones: an object of more keys is left to the re-encoder, so a
            // line's read stays linear in its length.
            let many = self.keys.len() - base >= CANONICAL_KEYS;
            if index_like || many || self.keys[base..].contains(&key) {
                return None;
            }
            self.keys.push(key);
            if self.s.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            self.value(depth)?;
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.keys.truncate(base);
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > CANONICAL_DEPTH {
            return None;
        }
        self.i += 1;
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(());
        }
        loop {
            self.value(depth)?;
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// [`canonicalize_js`] through a [`serde_json::Value`] (the reference the
/// fast copy is tested against).
pub fn canonicalize_js_by_value(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
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
    use proptest::prelude::*;

    use super::*;

    fn pretty_text(text: &str, depth: usize) -> String {
        let mut out = Vec::new();
        write_js_pretty_text(&mut out, text, depth).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn pretty_value(text: &str, depth: usize) -> String {
        let mut out = Vec::new();
        write_js_pretty_at(&mut out, &serde_json::from_str(text).unwrap(), depth).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn decimals_are_copied_only_when_javascript_prints_them_so() {
        // `JSON.stringify(JSON.parse(t))` in node, token by token.
        for (token, javascript) in [
            ("0.10", "0.1"),
            ("0.00087", "0.00087"),
            ("0.00031769999999999997", "0.00031769999999999997"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1e-7"),
            ("0.0000015", "0.0000015"),
            ("123456789012.345", "123456789012.345"),
            ("1234567890123.456", "1234567890123.456"),
            ("-2.50", "-2.5"),
            ("1.0", "1"),
            ("100.25", "100.25"),
            ("0.1000000000000000055511151231257827", "0.1"),
            ("999999999999999.9", "999999999999999.9"),
            ("99999999999999.99", "99999999999999.98"),
            ("0.123456789012345", "0.123456789012345"),
            ("0.1234567890123456", "0.1234567890123456"),
        ] {
            assert_eq!(pretty_text(token, 0), javascript, "{token}");
        }
        assert!(plain_decimal(b"0.123456789012345") && plain_decimal(b"0.0000015"));
        assert!(
            !plain_decimal(b"0.1234567890123456") && !plain_decimal(b"0.10") && !plain_decimal(b"0.0000001")
        );
    }

    #[test]
    fn reindented_text_is_what_javascript_prints() {
        // Hand-checked against `JSON.stringify(JSON.parse(t), null, 2)`.
        assert_eq!(
            pretty_text(r#"{"a":[1,{"b":null}],"c":{}}"#, 0),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": {}\n}"
        );
        assert_eq!(
            pretty_text(r#"[ 1.0, -0, 1e21, 0.1e1, 123456789012345678, "\u00e9\n" ]"#, 0),
            "[\n  1,\n  0,\n  1e+21,\n  1,\n  123456789012345680,\n  \"é\\n\"\n]"
        );
        // Nested two levels deep: every later line moves right by four spaces.
        assert_eq!(pretty_text(r#"{"k":[true]}"#, 2), "{\n      \"k\": [\n        true\n      ]\n    }");
        // JSON.parse keeps the last of repeated keys (in the first one's place)
        // and lists array-index keys first.
        assert_eq!(pretty_text(r#"{"x":1,"y":2,"x":3}"#, 0), "{\n  \"x\": 3,\n  \"y\": 2\n}");
        assert_eq!(pretty_text(r#"{"b":1,"2":2,"1":3}"#, 0), "{\n  \"1\": 3,\n  \"2\": 2,\n  \"b\": 1\n}");
        // Escapes JSON.stringify writes are kept; others are rewritten as it would.
        assert_eq!(pretty_text(r#""a\"b\\c\n\u001f\u0007""#, 0), r#""a\"b\\c\n\u001f\u0007""#);
        assert_eq!(pretty_text(r#""\/\u000A\u001F\u0041\ud83d\ude80""#, 0), "\"/\\n\\u001fA🚀\"");
        let mut out = Vec::new();
        assert!(write_js_pretty_text(&mut out, r#"{"a":}"#, 0).is_err());
        assert!(write_js_pretty_text(&mut out, "[1] x", 0).is_err());
    }

    #[test]
    fn lone_surrogates_print_as_javascript_escapes_them() {
        // Node 20.20.2: for (const t of [...]) console.log(t, JSON.stringify(JSON.parse(t)))
        for (text, javascript) in [
            (r#""a\ud800b""#, r#""a\ud800b""#),
            (r#""\udc00\ud800""#, r#""\udc00\ud800""#),
            (r#""\uD83D\uDE00x\uDBFF""#, "\"😀x\\udbff\""),
            (r#""\ud83d\u0041""#, r#""\ud83dA""#),
            (
                r#""\u0022\u005C\u007f\u2028\u0000\u0008\u000B""#,
                "\"\\\"\\\\\u{7f}\u{2028}\\u0000\\b\\u000b\"",
            ),
        ] {
            assert_eq!(pretty_text(text, 0), javascript, "{text}");
        }
        // Nested, as an image's `data` or a tool call's `arguments` is printed.
        assert_eq!(pretty_text(r#"{"p":["\uDC00"]}"#, 1), "{\n    \"p\": [\n      \"\\udc00\"\n    ]\n  }");
        for bad in [r#""\x""#, r#""\u12""#, r#""\u12g4""#, r#""\ud800\u""#] {
            assert!(write_js_pretty_text(&mut Vec::new(), bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn value_at_reads_only_the_path() {
        let line = r#"{"note":"\ud800","message":{"provider":"p","model":{"id":1},"args":["\udc00"]},"message":{"provider":null,"model":"m"}}"#;
        // The last `message` counts, as in JSON.parse; the lone surrogates are never decoded.
        assert_eq!(value_at(line, &["message", "provider"]), Some(serde_json::Value::Null));
        assert_eq!(value_at(line, &["message", "model"]), Some(serde_json::json!("m")));
        assert_eq!(value_at(line, &["message", "args"]), None);
        assert_eq!(value_at(line, &["note", "x"]), None);
        assert_eq!(value_at(r#"{"a":[1,{"b":2}],"c":{"b":3}}"#, &["c", "b"]), Some(serde_json::json!(3)));
        assert_eq!(value_at(r#"{"a":1} x"#, &["a"]), None);
    }

    /// Whether `JSON.stringify` of `value` (at nesting `depth`) is plainly
    /// its own canonical text: integers of at most 15 digits, any string,
    /// keys with no character to escape and not all digits, at most
    /// CANONICAL_KEYS keys an object, at most CANONICAL_DEPTH levels.
    fn plain(value: &serde_json::Value, depth: usize) -> bool {
        use serde_json::Value;
        match value {
            Value::Null | Value::Bool(_) | Value::String(_) => true,
            Value::Number(n) => n.as_i64().is_some_and(|i| i.unsigned_abs() < 1_000_000_000_000_000),
            Value::Array(items) => depth <= CANONICAL_DEPTH && items.iter().all(|v| plain(v, depth + 1)),
            Value::Object(map) => {
                depth <= CANONICAL_DEPTH
                    && map.len() <= CANONICAL_KEYS
                    && map.iter().all(|(k, v)| {
                        let digits = !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit());
                        let escaped = k.chars().any(|c| c == '"' || c == '\\' || c < ' ');
                        !digits && !escaped && plain(v, depth + 1)
                    })
            }
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::from),
            "[\\x00-\\x1f\"\\\\a-z]{0,6}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
                prop::collection::vec(("[a-z0-9]{0,4}", inner), 0..5)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// What serde_json's serializer with [`JsPrettyFormatter`] writes of
    /// `value`: the reference of [`write_js_pretty_serialize`].
    fn through_serde_json<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, JsPrettyFormatter::default());
        value.serialize(&mut ser).map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    fn directly<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
        let mut out = Vec::new();
        write_js_pretty_serialize(&mut out, value).map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    /// What serde_json's serializer with [`JsFormatter`] writes of `value`:
    /// the reference of [`write_js_serialize`].
    fn compact_through_serde_json<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
        let mut out = Vec::new();
        value
            .serialize(&mut serde_json::Serializer::with_formatter(&mut out, JsFormatter))
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    fn compact_directly<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
        let mut out = Vec::new();
        write_js_serialize(&mut out, value).map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    /// Every shape serde's derive writes, written directly as serde_json
    /// writes it: options, skipped and flattened fields, empty and nested
    /// containers, each kind of enum variant (with no fields too), maps
    /// with number and boolean keys, raw values, numbers of every width,
    /// NaN, strings to escape, and nesting past the indentation's 64 spaces.
    #[test]
    fn the_direct_serializer_writes_what_serde_json_writes() {
        use std::collections::BTreeMap;

        #[derive(Serialize)]
        struct Unit;
        #[derive(Serialize)]
        struct Newtype(String);
        #[derive(Serialize)]
        enum Variant {
            Unit,
            New(u16),
            Tuple(i32, String),
            TupleOfNone(),
            Struct { x: f64, y: Option<String> },
            StructOfNone {},
        }
        #[derive(Serialize)]
        enum Flat {
            Inside { n: u8, list: Vec<u8> },
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Inner {
            a_b: Option<u8>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            skipped: Vec<String>,
            empty: Vec<u8>,
            nested: Vec<Vec<u8>>,
            pair: (i8, f32),
            c: char,
        }
        #[derive(Serialize)]
        struct Outer {
            #[serde(flatten)]
            inner: Inner,
            #[serde(flatten)]
            flat: Flat,
            variants: Vec<Variant>,
            results: Vec<Result<String, String>>,
            numbered: BTreeMap<u32, bool>,
            flags: BTreeMap<bool, i128>,
            signed: BTreeMap<i64, ()>,
            raw: Box<serde_json::value::RawValue>,
            raws: Vec<Box<serde_json::value::RawValue>>,
            wide: (u128, i128, u64, i64, i16, u16, u8),
            floats: Vec<f64>,
            small: Vec<f32>,
            unit: (),
            unit_struct: Unit,
            newtype: Newtype,
            text: String,
            deep: serde_json::Value,
            empty_object: BTreeMap<String, u8>,
            float_keys: Pairs<f32, u8>,
            double_keys: Pairs<f64, u8>,
            wide_keys: BTreeMap<u128, u8>,
            wide_signed_keys: BTreeMap<i128, u8>,
            char_keys: BTreeMap<char, u8>,
            variant_keys: Pairs<Variant, u8>,
            bytes: (Bytes, Bytes),
        }
        /// Bytes as `serialize_bytes` hands them over.
        struct Bytes(&'static [u8]);
        impl Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        /// A map of any keys, in the order given.
        struct Pairs<K, V>(Vec<(K, V)>);
        impl<K: Serialize, V: Serialize> Serialize for Pairs<K, V> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in &self.0 {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
        let mut deep = serde_json::json!(["bottom", {}]);
        for _ in 0..40 {
            deep = serde_json::json!([deep, {"k": [1]}]);
        }
        let outer = Outer {
            inner: Inner {
                a_b: None,
                skipped: Vec::new(),
                empty: Vec::new(),
                nested: vec![vec![], vec![1, 2]],
                pair: (-3, 0.1),
                c: '"',
            },
            flat: Flat::Inside { n: 7, list: vec![] },
            variants: vec![
                Variant::Unit,
                Variant::New(9),
                Variant::Tuple(-1, "t".to_owned()),
                Variant::TupleOfNone(),
                Variant::Struct { x: 1e21, y: Some("\u{1}\u{1b}\u{7f}\u{2028}é\\".to_owned()) },
                Variant::StructOfNone {},
            ],
            results: vec![Ok("yes".to_owned()), Err("no\n".to_owned())],
            numbered: [(0, true), (4_294_967_295, false)].into_iter().collect(),
            flags: [(false, i128::MIN), (true, i128::MAX)].into_iter().collect(),
            signed: [(-5, ()), (1 << 60, ())].into_iter().collect(),
            raw: serde_json::value::RawValue::from_string(r#"{"a" : [1, 2]}"#.to_owned()).unwrap(),
            raws: vec![serde_json::value::RawValue::from_string("null".to_owned()).unwrap()],
            wide: (u128::MAX, i128::MIN, u64::MAX, i64::MIN, -7, 65_535, 255),
            floats: vec![f64::NAN, f64::INFINITY, -0.0, 1e-7, 123_456_789.125, 2f64.powi(60)],
            small: vec![f32::NAN, 0.1, 1e30, -2.5],
            unit: (),
            unit_struct: Unit,
            newtype: Newtype("\u{0}\u{8}\u{c}\t\r\"".to_owned()),
            text: "plain".to_owned(),
            deep,
            empty_object: BTreeMap::new(),
            float_keys: Pairs(vec![(0.1, 1), (-2.5e30, 2)]),
            double_keys: Pairs(vec![(0.1, 1), (2f64.powi(60), 2)]),
            wide_keys: [((1 << 60) + 1, 1), (u128::MAX, 2)].into_iter().collect(),
            wide_signed_keys: [(i128::MIN, 1), (-((1 << 60) + 1), 2)].into_iter().collect(),
            char_keys: [('"', 1), ('\u{7f}', 2)].into_iter().collect(),
            variant_keys: Pairs(vec![(Variant::Unit, 1)]),
            bytes: (Bytes(&[]), Bytes(&[1, 255])),
        };
        let want = through_serde_json(&outer).unwrap();
        // The keys as serde_json writes them, by hand: f32 and 128-bit keys
        // are not widened to f64, unit variants are their names.
        for key in [
            r#""0.1": 1"#,
            r#""-2.5e+30": 2"#,
            r#""1152921504606846977": 1"#,
            r#""340282366920938463463374607431768211455": 2"#,
            r#""-170141183460469231731687303715884105728": 1"#,
            r#""Unit": 1"#,
        ] {
            assert!(want.contains(key), "{key} in serde_json's output: {want}");
        }
        assert!(want.contains(&format!("\n{}[", " ".repeat(80))), "nested past 64 spaces");
        assert_eq!(directly(&outer).unwrap(), want);
        assert_eq!(compact_directly(&outer).unwrap(), compact_through_serde_json(&outer).unwrap());
        // Keys serde_json refuses are refused.
        let unit_keys: BTreeMap<(), u8> = [((), 1)].into_iter().collect();
        assert!(through_serde_json(&unit_keys).is_err());
        assert!(directly(&unit_keys).is_err());
        let nan_keys = Pairs(vec![(f64::NAN, 1u8)]);
        assert!(through_serde_json(&nan_keys).is_err());
        assert!(directly(&nan_keys).is_err());
        assert!(compact_directly(&unit_keys).is_err());
    }

    /// Escapes by hand: every short escape, a `\u00xx` one, and a string
    /// whose only escape comes after eight plain bytes.
    #[test]
    fn strings_are_escaped_by_hand() {
        let escaped = |text: &str| {
            let mut out = Vec::new();
            push_json_str(&mut out, text);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            escaped("a\"b\\c\u{8}\t\n\u{c}\r\u{1}\u{1f}\u{7f}é"),
            r#""a\"b\\c\b\t\n\f\r\u0001\u001f"#.to_owned() + "\u{7f}é\""
        );
        assert_eq!(escaped("abcdefghij\"k"), r#""abcdefghij\"k""#);
        assert_eq!(escaped(""), r#""""#);
    }

    proptest! {
        /// The eight-byte search finds the byte-by-byte one's first byte.
        #[test]
        fn the_first_byte_to_escape_is_found_eight_at_a_time(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff, Just(0x21u8), Just(0x5bu8), Just(0x5du8)],
                0..40,
            ),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            let by_byte = bytes[from..].iter().position(|&b| needs_escape(b)).map(|p| from + p);
            prop_assert_eq!(next_escape(&bytes, from), by_byte, "{:?}", bytes);
        }

        #[test]
        fn the_direct_serializer_writes_values_as_serde_json_does(value in json_value()) {
            prop_assert_eq!(directly(&value), through_serde_json(&value));
            prop_assert_eq!(compact_directly(&value), compact_through_serde_json(&value));
        }

        #[test]
        fn the_word_search_finds_the_first_quote_or_backslash(
            bytes in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(0u8), Just(0x80u8), Just(0xffu8), Just(b'!'), Just(b'a')], 0..80),
            plain in 0usize..48,
        ) {
            // Plain bytes first so that the answer falls in each word and past the words.
            let mut text = vec![b'a'; plain];
            text.extend(bytes);
            let expected = text.iter().position(|&b| b == b'"' || b == b'\\');
            prop_assert_eq!(find_quote_or_backslash(&text), expected);
        }

        #[test]
        fn the_fast_path_equals_the_value_path(value in json_value(), depth in 0usize..4, spaced in any::<bool>()) {
            let text = if spaced { serde_json::to_string_pretty(&value).unwrap() } else { serde_json::to_string(&value).unwrap() };
            prop_assert_eq!(pretty_text(&text, depth), pretty_value(&text, depth));
        }
    }

    /// JSON text token by token, in the forms a writer other than
    /// `JSON.stringify` may use: numbers in every notation (beyond `f64`,
    /// beyond 2^53, `-0`, exponents), every escape (lone and paired
    /// surrogates in either case), repeated, escaped and array-index keys,
    /// whitespace between tokens.
    fn json_text() -> impl Strategy<Value = String> {
        let ws = prop_oneof![4 => Just(String::new()), 1 => "[ \t\n\r]{1,2}"];
        let number = prop_oneof![
            "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
            any::<f64>().prop_map(|f| format!("{f:e}")),
            any::<f64>().prop_map(|f| format!("{f}")),
            any::<i64>().prop_map(|i| i.to_string()),
            Just("-0".to_owned()),
            Just("1e400".to_owned()),
            Just("-1e-400".to_owned()),
            Just("0.0000001".to_owned()),
        ];
        let piece = prop_oneof![
            4 => "[a-z ]{1,6}",
            2 => "\\PC{1,3}",
            1 => prop_oneof![Just("\\\""), Just("\\\\"), Just("\\/"), Just("\\b"), Just("\\f"), Just("\\n"), Just("\\r"), Just("\\t")].prop_map(str::to_owned),
            1 => (0u32..0x10000, any::<bool>()).prop_map(|(u, upper)| if upper { format!("\\u{u:04X}") } else { format!("\\u{u:04x}") }),
            1 => (0xd800u32..0xe000).prop_map(|u| format!("\\u{u:04x}")),
        ];
        let string = prop::collection::vec(piece, 0..4).prop_map(|p| format!("\"{}\"", p.concat()));
        let key = prop_oneof![
            Just("\"a\""),
            Just("\"b\""),
            Just("\"path\""),
            Just("\"0\""),
            Just("\"10\""),
            Just("\"01\""),
            Just("\"\\u0061\""),
            Just("\"\""),
        ];
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            number,
            string,
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            let ws = ws.clone();
            prop_oneof![
                (prop::collection::vec((ws.clone(), inner.clone(), ws.clone()), 0..5)).prop_map(
                    |items| format!(
                        "[{}]",
                        items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect::<Vec<_>>().join(",")
                    )
                ),
                (prop::collection::vec((ws.clone(), key.clone(), ws, inner), 0..5)).prop_map(
                    |items| format!(
                        "{{{}}}",
                        items
                            .into_iter()
                            .map(|(a, k, b, v)| format!("{a}{k}{b}:{v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                ),
            ]
        })
    }

    fn canonical_both(text: &str) -> ((bool, Vec<u8>), (bool, Vec<u8>)) {
        let (mut fast, mut slow) = (b"kept".to_vec(), b"kept".to_vec());
        let a = canonicalize_js(text, &mut fast).is_ok();
        let b = canonicalize_js_by_value(text, &mut slow).is_ok();
        if !b {
            slow.truncate(4);
        }
        ((a, fast), (b, slow))
    }

    proptest! {
        #[test]
        fn the_fast_canonical_text_is_the_value_path_s(text in json_text()) {
            let (fast, slow) = canonical_both(&text);
            prop_assert_eq!(fast, slow, "{}", text);
        }

        #[test]
        fn the_fast_canonical_text_is_the_value_path_s_for_values(value in json_value(), spaced in any::<bool>()) {
            let text = if spaced { serde_json::to_string_pretty(&value).unwrap() } else { serde_json::to_string(&value).unwrap() };
            let (fast, slow) = canonical_both(&text);
            prop_assert!(fast.0);
            prop_assert_eq!(fast, slow);
        }

        #[test]
        fn broken_text_is_an_error_on_both_paths(text in json_text(), at in any::<prop::sample::Index>(), cut in any::<bool>(), byte in prop::sample::select(b"{}[],:\"\\0-.eE+ x".to_vec())) {
            // One byte removed or inserted: both paths accept it or neither does.
            let mut bytes = text.into_bytes();
            let i = at.index(bytes.len() + 1);
            if cut && i < bytes.len() { bytes.remove(i); } else { bytes.insert(i, byte); }
            if let Ok(text) = String::from_utf8(bytes) {
                let (fast, slow) = canonical_both(&text);
                prop_assert_eq!(fast, slow, "{}", text);
            }
        }
    }

    #[test]
    fn every_prefix_of_a_text_is_canonical_or_an_error_as_by_value() {
        // A text cut anywhere, inside an escape too (`"\` once panicked the copy).
        for bad in [r#""\"#, r#"["a\"#, r#"{"k":"v\"#, r#"{"k\"#, r#"["\u00"#, "01", "[1.]", r#"{"a":-01.5}"#]
        {
            assert!(canonicalize_js(bad, &mut Vec::new()).is_err(), "{bad}");
            assert!(write_js_pretty_text(&mut Vec::new(), bad, 0).is_err(), "{bad}");
        }
        let texts = [
            r#"{"k\"ey":["a\\b","\u00e9\n",{"x":"\ud83d\ude80"}],"n":-1.5e3,"t":true,"z":null}"#,
            r#"["\/\b\f\r\t\u001f\u0041",{"":{}},[[]]]"#,
        ];
        for text in texts {
            for end in (0..=text.len()).filter(|&end| text.is_char_boundary(end)) {
                let prefix = &text[..end];
                let (fast, slow) = canonical_both(prefix);
                assert_eq!(fast, slow, "{prefix}");
                let parses = serde_json::from_str::<serde_json::Value>(prefix).is_ok();
                assert_eq!(write_js_pretty_text(&mut Vec::new(), prefix, 0).is_ok(), parses, "{prefix}");
            }
        }
    }

    #[test]
    fn deep_nesting_is_canonical_or_an_error_as_by_value() {
        for depth in [1, 99, 100, 101, 127, 128, 129, 200, 5000] {
            for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
                let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
                let (fast, slow) = canonical_both(&text);
                assert_eq!(fast, slow, "{open} x {depth}");
            }
        }
    }

    #[test]
    fn canonical_text_is_what_javascript_prints() {
        // node -e 'for (const t of process.argv.slice(1)) console.log(JSON.stringify(JSON.parse(t)))'
        check(
            r#"{ "path" : "a\/b", "n" : [1.50, -0, 1E2, 0.0000001] }"#,
            r#"{"path":"a/b","n":[1.5,0,100,1e-7]}"#,
        );
        check(r#"{"a":"\u00e9\ud83d\ude80","b":{"c":[]},"d":{}}"#, r#"{"a":"é🚀","b":{"c":[]},"d":{}}"#);
        check(r#"{"x":1,"y":2,"x":3}"#, r#"{"x":3,"y":2}"#);
        for bad in [r#"{"a":01}"#, "[1.]", r#""\ud800""#, "1e400", "[1,]", r#"{"a":1"#] {
            let mut out = Vec::new();
            // serde_json refuses these (a lone surrogate and a number beyond f64 too).
            assert!(canonicalize_js(bad, &mut out).is_err(), "{bad}");
        }
    }

    /// Compact JSON texts of canonical tokens with the forms `JSON.stringify`
    /// changes mixed in (numbers, escapes, keys), and now and then whitespace
    /// or a broken token.
    fn near_canonical_text() -> impl Strategy<Value = String> {
        let ws = prop_oneof![12 => Just(""), 1 => Just(" "), 1 => Just("\n")];
        // Canonical tokens five times as often as the forms JSON.stringify
        // changes, so that most texts hold one changed form or none.
        let number = prop_oneof![
            5 => prop::sample::select(vec!["0", "7", "-12", "100", "1.5", "-0.25", "0.1", "0.000001", "123456789012345"]),
            1 => prop::sample::select(vec![
                "-0", "1.0", "1.50", "1e21", "1E5", "1e-7", "0.0000001", "1234567890123456", "12345678901234567890",
                "9007199254740993", "0.1234567890123456", "01", "-01", "1.", "1e400", "-", "0e0",
            ]),
        ];
        let piece = prop_oneof![
            6 => "[a-z ]{1,6}",
            1 => "\\PC{1,2}",
            1 => Just("\u{2028}é🚀\u{7f}".to_owned()),
            3 => prop::sample::select(vec![
                r#"\""#, r#"\\"#, r#"\b"#, r#"\f"#, r#"\n"#, r#"\r"#, r#"\t"#, r#"\u0000"#, r#"\u001f"#, r#"\u000b"#,
            ])
            .prop_map(str::to_owned),
            1 => prop::sample::select(vec![
                r#"\/"#, r#"\u001F"#, r#"\u0008"#, r#"\u000a"#, r#"\u007f"#, r#"\u0020"#, r#"\u00e9"#,
                r#"\ud800"#, r#"\udc00"#, r#"\ud83d\ude80"#, r#"\u2028"#, r#"\x"#,
            ])
            .prop_map(str::to_owned),
        ];
        let string = prop::collection::vec(piece, 0..4).prop_map(|p| format!("\"{}\"", p.concat()));
        let key = prop_oneof![
            5 => prop::sample::select(vec![r#""a""#, r#""b""#, r#""path""#, r#""é""#, r#""""#, r#""-1""#]),
            1 => prop::sample::select(vec![r#""0""#, r#""10""#, r#""01""#, r#""\u0061""#, r#""a\"""#, r#""a\n""#]),
        ];
        let leaf = prop_oneof![
            1 => prop::sample::select(vec!["null", "true", "false"]).prop_map(str::to_owned),
            2 => number.prop_map(str::to_owned),
            3 => string,
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            prop_oneof![
                prop::collection::vec((ws.clone(), inner.clone()), 0..5).prop_map(|items| format!(
                    "[{}]",
                    items.into_iter().map(|(w, v)| format!("{w}{v}")).collect::<Vec<_>>().join(",")
                )),
                prop::collection::vec((key.clone(), ws.clone(), inner), 0..5).prop_map(|items| format!(
                    "{{{}}}",
                    items.into_iter().map(|(k, w, v)| format!("{k}:{w}{v}")).collect::<Vec<_>>().join(",")
                )),
            ]
        })
    }

    /// A text [`is_canonical_js`] takes is what both re-encoders write of it.
    fn assert_its_own_canonical_text(text: &str) -> Result<(), TestCaseError> {
        if is_canonical_js(text) {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            prop_assert!(canonicalize_js(text, &mut fast).is_ok(), "{}", text);
            prop_assert!(canonicalize_js_by_value(text, &mut slow).is_ok(), "{}", text);
            prop_assert_eq!(String::from_utf8_lossy(&fast), text);
            prop_assert_eq!(String::from_utf8_lossy(&slow), text);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn a_text_taken_as_canonical_is_its_own_canonical_text(text in near_canonical_text()) {
            assert_its_own_canonical_text(&text)?;
        }

        #[test]
        fn a_text_taken_as_canonical_is_its_own_canonical_text_for_any_text(text in json_text()) {
            assert_its_own_canonical_text(&text)?;
        }

        #[test]
        fn canonical_output_is_taken_as_canonical_when_plain(value in json_value()) {
            // serde_json's compact text, and JSON.stringify's of the same value.
            assert_its_own_canonical_text(&serde_json::to_string(&value).unwrap())?;
            let js = to_js_string(&value).unwrap();
            assert_its_own_canonical_text(&js)?;
            // Taken whenever the value is plainly canonical by the rules as
            // written (a predicate of the value, not of the checker).
            if plain(&value, 1) {
                prop_assert!(is_canonical_js(&js), "refused: {}", js);
            }
        }
    }

    #[test]
    fn value_and_string_ends_by_hand() {
        let text = br#"{"a":[1,{"b":"]}\"\\"}],"c":-2.5e3,"d":"x"}"#;
        assert_eq!(value_end(text, 0, 96), Some(text.len()));
        // The array after "a": (position 5) ends past its `]`, whatever the string holds.
        assert_eq!(value_end(text, 5, 96), Some(23));
        assert_eq!(text[23], b',');
        assert_eq!(value_end(text, 28, 96), Some(34), "a number ends at the `,`");
        assert_eq!(text[34], b',');
        assert_eq!(string_end(text, 13), Some(21), "past the escaped quote and backslash");
        assert_eq!(text[21], b'}');
        assert_eq!(value_end(b"true", 0, 96), Some(4));
        assert_eq!(value_end(b"[[1]]", 0, 1), None, "deeper than allowed");
        assert_eq!(value_end(b"[[1]]", 0, 2), Some(5));
        assert_eq!(value_end(b"[\"a", 0, 96), None, "runs out");
        assert_eq!(string_end(b"\"a\\", 0), None, "runs out inside an escape");
        assert_eq!(value_end(b",", 0, 96), None, "no value");
    }

    #[test]
    fn canonical_texts_by_hand() {
        for text in [
            r#"{"path":"src/retry.rs","oldText":"a\nb \"q\" \\ \u001f\u0000 é🚀 ","n":-1.5,"k":[1,true,null,{}],"e":{}}"#,
            r#"{"command":"cargo test -p x -- --nocapture","timeout":120,"ratio":0.000001,"big":123456789012345}"#,
            r#"{"":1,"a":{"a":2},"b":[{"a":1,"b":2},{"a":3}],"-1":0,"0a":0,"1a":0}"#,
            "[]",
            "{}",
            r#""x""#,
            "0",
            "-0.5",
            "null",
        ] {
            assert!(is_canonical_js(text), "{text}");
            assert_its_own_canonical_text(text).unwrap();
        }
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(is_canonical_js(&deep(CANONICAL_DEPTH)));
        // Up to CANONICAL_KEYS keys an object is checked; one more is left
        // to the re-encoder (its keys compared with each other would cost
        // their number squared).
        let object = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!(r#""k{i}":{i}"#)).collect();
            format!("{{{}}}", members.join(","))
        };
        assert!(is_canonical_js(&object(CANONICAL_KEYS)));
        assert!(!is_canonical_js(&object(CANONICAL_KEYS + 1)));
        // Refused only conservatively: the re-encoder writes it unchanged.
        let mut out = Vec::new();
        canonicalize_js(&object(CANONICAL_KEYS + 1), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), object(CANONICAL_KEYS + 1));
        for text in [
            r#"{"a": 1}"#,
            r#" {"a":1}"#,
            r#"{"a":1} "#,
            "[1,\n2]",
            r#""a\/b""#,
            r#""\u00e9""#,
            r#""\u001F""#,
            r#""\u0008""#,
            r#""\u000a""#,
            r#""\ud800""#,
            r#""\ud83d\ude80""#,
            r#""\u007f""#,
            r#""\x""#,
            "\"tab\tin\"",
            "1.0",
            "1.50",
            "1e21",
            "1E5",
            "1e-7",
            "-0",
            "01",
            "1.",
            "1234567890123456",
            "0.0000001",
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1},"b":2,"a":3}"#,
            r#"{"0":1}"#,
            r#"{"10":1,"b":2}"#,
            // Kept in place by JSON.parse, but all digits: taken as an index, conservatively.
            r#"{"01":1}"#,
            r#"{"\u0061":1}"#,
            r#"{"a\"":1}"#,
            "[1,]",
            r#"{"a":1"#,
            "[1]x",
            "",
            "nul",
            "True",
        ] {
            assert!(!is_canonical_js(text), "{text}");
        }
        assert!(!is_canonical_js(&deep(CANONICAL_DEPTH + 1)));
    }

    fn check(input: &str, expect: &str) {
        let mut out = Vec::new();
        canonicalize_js(input, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), expect, "input: {input}");
    }

    #[test]
    fn nesting_past_the_limit_is_an_error_not_a_stack_overflow() {
        let at_limit = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        let mut out = Vec::new();
        write_js_pretty_text(&mut out, &at_limit, 0).unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'[').count(), MAX_NESTING);
        for deep in [MAX_NESTING + 1, 100_000] {
            for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
                let text = format!("{}1{}", open.repeat(deep), close.repeat(deep));
                let mut out = b"kept".to_vec();
                let err = write_js_pretty_text(&mut out, &text, 2).unwrap_err();
                assert!(err.to_string().starts_with("JSON nested deeper than 1000 levels at byte "), "{err}");
                assert_eq!(out, b"kept", "nothing written");
            }
        }
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

    /// Integers written from the stack buffer are `to_string`'s text: by
    /// hand at the edges, and every safe integer a proptest draws.
    #[test]
    fn safe_integers_are_written_as_to_string_writes_them() {
        let u = |v: u64| {
            let mut out = Vec::new();
            JsFormatter.write_u64(&mut out, v).unwrap();
            String::from_utf8(out).unwrap()
        };
        let i = |v: i64| {
            let mut out = Vec::new();
            JsFormatter.write_i64(&mut out, v).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(u(0), "0");
        assert_eq!(u(7), "7");
        assert_eq!(u(10), "10");
        assert_eq!(u(9_007_199_254_740_992), "9007199254740992");
        assert_eq!(u(9_007_199_254_740_993), "9007199254740992");
        assert_eq!(i(0), "0");
        assert_eq!(i(-1), "-1");
        assert_eq!(i(-10), "-10");
        assert_eq!(i(-9_007_199_254_740_992), "-9007199254740992");
        proptest::proptest!(|(v in 0u64..=JS_MAX_SAFE, n in -(JS_MAX_SAFE as i64)..=JS_MAX_SAFE as i64)| {
            proptest::prop_assert_eq!(u(v), v.to_string());
            proptest::prop_assert_eq!(i(n), n.to_string());
        });
    }
}

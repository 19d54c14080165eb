//! Properties of the log: lossless round trips through JSONL and MessagePack,
//! no panic on any input, torn-tail repair never loses a byte.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use sessionlog_event_log::{
    AppendOptions, Appender, FsyncPolicy, Mode, PackReader, PackWriter, Reader, TailRepair,
};
use sessionlog_events::json::to_js_string;
use sessionlog_events::Entry;
use sessionlog_test_support::{generate, GenOptions};

fn pack_unpack(lines: &[&str]) -> Vec<String> {
    let mut writer = PackWriter::new(Vec::new()).unwrap();
    for line in lines {
        writer.push_json(line).unwrap();
    }
    let bytes = writer.finish().unwrap();
    PackReader::new(bytes.as_slice()).unwrap().map(Result::unwrap).collect()
}

/// JSON values equal as JavaScript sees them (every number an f64).
fn js_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| js_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| ka == kb && js_equal(va, vb))
        }
        _ => a == b,
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        "(?s).{0,24}".prop_map(Value::from),
        "[\\x00-\\x1f\"\\\\\u{2028}\u{85}\u{feff}é🚀]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z_]{1,8}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn generated_transcripts_round_trip_through_jsonl_and_msgpack(
        seed in any::<u64>(), entries in 5usize..160, branches in 0usize..3, compactions in 0usize..3,
    ) {
        let options = GenOptions { seed, entries, branches, compactions, tool_output_chars: 300 };
        let lines = generate(options);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let records: Vec<_> = Reader::new(text.as_bytes(), Path::new("gen"), Mode::Strict)
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(records.len(), lines.len());
        for (record, line) in records.iter().zip(&lines) {
            prop_assert_eq!(record.entry.raw(), line.as_str());
        }
        let raw: Vec<&str> = lines.iter().map(String::as_str).collect();
        prop_assert_eq!(pack_unpack(&raw), lines.clone());
        prop_assert_eq!(generate(options), lines, "same options, same bytes");
    }

    #[test]
    fn any_json_object_round_trips_by_value_and_by_stringify_bytes(fields in prop::collection::vec(("[a-z]{1,6}", json_value()), 0..8)) {
        let mut object = Map::new();
        object.insert("type".to_owned(), Value::from("custom"));
        object.extend(fields);
        let value = Value::Object(object);
        let line = to_js_string(&value).unwrap();
        let entry = Entry::parse(&line).unwrap();
        prop_assert_eq!(entry.raw(), line.as_str());
        prop_assert!(js_equal(&entry.to_value(), &value));
        let back = pack_unpack(&[&line]);
        prop_assert_eq!(&back[0], &line);
    }

    #[test]
    fn reading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        for mode in [Mode::Lenient, Mode::Strict] {
            for item in Reader::new(bytes.as_slice(), Path::new("fuzz"), mode) {
                let _ = item;
            }
        }
        let _ = Entry::parse(&String::from_utf8_lossy(&bytes));
        let _ = PackReader::new(bytes.as_slice()).map(|r| r.count());
    }

    #[test]
    fn reading_mangled_transcripts_never_panics(cut in 0usize..4000, noise in prop::collection::vec(any::<u8>(), 0..20), at in 0usize..4000) {
        let lines = generate(GenOptions { seed: 3, entries: 12, tool_output_chars: 100, ..GenOptions::default() });
        let mut bytes: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
        let at = at.min(bytes.len());
        bytes.splice(at..at, noise);
        bytes.truncate(cut.min(bytes.len()));
        let lenient: Vec<_> = Reader::new(bytes.as_slice(), Path::new("m"), Mode::Lenient).collect();
        let strict: Vec<_> = Reader::new(bytes.as_slice(), Path::new("m"), Mode::Strict).collect();
        // Strict never yields more entries than lenient.
        prop_assert!(strict.iter().filter(|r| r.is_ok()).count() <= lenient.iter().filter(|r| r.is_ok()).count());
    }

    #[test]
    fn torn_tail_repair_never_loses_a_byte(content in prop::collection::vec(prop_oneof![
        Just(b'\n'), Just(b'{'), Just(b'}'), Just(b'"'), Just(b':'), Just(b'a'), any::<u8>()], 0..120)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        fs::write(&path, &content).unwrap();
        let options = AppendOptions { fsync: FsyncPolicy::Never, ..AppendOptions::default() };
        let app = Appender::open(&path, options).unwrap();
        let after = fs::read(&path).unwrap();
        match app.tail_repair() {
            None => prop_assert_eq!(&after, &content),
            Some(TailRepair::Terminated { .. }) => {
                prop_assert_eq!(&after[..content.len()], &content[..]);
                prop_assert_eq!(&after[content.len()..], b"\n");
            }
            Some(TailRepair::MovedAside { offset, aside, .. }) => {
                let moved = fs::read(aside).unwrap();
                prop_assert_eq!(after.len() as u64, *offset);
                prop_assert_eq!([after.clone(), moved].concat(), content.clone());
                // Only the last line moves: nothing before it is touched.
                prop_assert!(after.is_empty() || after.ends_with(b"\n"));
            }
        }
        prop_assert!(after.is_empty() || after.ends_with(b"\n"), "ready for a fresh line");
    }
}

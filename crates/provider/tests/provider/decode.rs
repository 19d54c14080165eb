//! Streams split at every byte boundary decode to the same deltas.

use proptest::prelude::*;
use serde_json::json;
use sessionlog_provider::{Accumulator, Api, Delta, Model};
use sessionlog_test_support::fake_llm::{render, Step, Turn};

use crate::common::{decode, wire, APIS};

/// A turn with every kind of block and text that splits inside UTF-8
/// characters (é is 2 bytes, ✓ 3, 🚀 4).
fn rich_turn() -> Turn {
    Turn::new(vec![
        Step::Thinking { text: "Need the file; é✓🚀 first.".into(), signature: "sig-Zm9v".into() },
        Step::Text("Reading — é✓🚀 — now.".into()),
        Step::ToolCall {
            id: "call_1".into(),
            name: "read".into(),
            arguments: r#"{"path":"src/é.rs","limit":20}"#.into(),
        },
        Step::ToolCall {
            id: "call_2".into(),
            name: "bash".into(),
            arguments: r#"{"command":"ls \"a b\""}"#.into(),
        },
    ])
    .usage(1200, 80)
    .cache(3000, 7)
}

fn body(api: Api) -> Vec<u8> {
    render(&rich_turn(), wire(api), "fake-model").concat().into_bytes()
}

fn message_of(api: Api, deltas: &[Delta]) -> serde_json::Value {
    let mut acc = Accumulator::new(&Model::new(api, "fake", "fake-model", "http://x"), 1000);
    deltas.iter().for_each(|d| acc.push(d));
    acc.finish().to_json()
}

#[test]
fn the_whole_stream_decodes_to_the_blocks_scripted() {
    for api in APIS {
        let deltas = decode(api, &[&body(api)]);
        assert_eq!(
            deltas.last(),
            Some(&Delta::Stop { reason: sessionlog_provider::StopReason::ToolUse }),
            "{api:?}"
        );
        let message = message_of(api, &deltas);
        // OpenAI streams reasoning without a signature: Pi records the
        // field it came in as the signature.
        let signature = match api {
            Api::OpenAiCompletions => "reasoning_content",
            Api::AnthropicMessages => "sig-Zm9v",
        };
        assert_eq!(
            message["content"],
            json!([
                {"type": "thinking", "thinking": "Need the file; é✓🚀 first.", "thinkingSignature": signature},
                {"type": "text", "text": "Reading — é✓🚀 — now."},
                {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "src/é.rs", "limit": 20}},
                {"type": "toolCall", "id": "call_2", "name": "bash", "arguments": {"command": "ls \"a b\""}},
            ]),
            "{api:?}"
        );
    }
}

#[test]
fn every_two_way_split_decodes_the_same() {
    for api in APIS {
        let bytes = body(api);
        let whole = decode(api, &[&bytes]);
        for at in 0..=bytes.len() {
            let (a, b) = bytes.split_at(at);
            assert_eq!(decode(api, &[a, b]), whole, "{api:?} split at byte {at}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(api, &singles), whole, "{api:?} one byte at a time");
    }
}

#[test]
fn crlf_and_cr_line_endings_decode_the_same() {
    for api in APIS {
        let bytes = body(api);
        let whole = decode(api, &[&bytes]);
        for ending in ["\r\n", "\r"] {
            let text = String::from_utf8(bytes.clone()).unwrap().replace('\n', ending);
            let converted = text.as_bytes();
            assert_eq!(decode(api, &[converted]), whole, "{api:?} {ending:?}");
            // Split one byte at a time: every CR meets its LF across a boundary.
            let singles: Vec<&[u8]> = converted.chunks(1).collect();
            assert_eq!(decode(api, &singles), whole, "{api:?} {ending:?} one byte at a time");
        }
    }
}

proptest! {
    #[test]
    fn any_chunking_decodes_the_same(cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40), anthropic in any::<bool>()) {
        let api = if anthropic { Api::AnthropicMessages } else { Api::OpenAiCompletions };
        let bytes = body(api);
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&bytes[last..p]);
            last = p;
        }
        chunks.push(&bytes[last..]);
        prop_assert_eq!(decode(api, &chunks), decode(api, &[&bytes]));
    }
}

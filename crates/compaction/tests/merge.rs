//! Staged summarisation's merge request: OpenClaw's labelled partials.

use sessionlog_compaction::{compact, Policy, RequestKind, Summarizer, SummarizerError, SummaryRequest};
use sessionlog_context::cut::prepare;
use sessionlog_events::{Entry, Transcript};
use sessionlog_tokens::PiEstimator;

/// Answers a chunk with `partial <last entry id>` and remembers the merge request.
#[derive(Default)]
struct Partials {
    merge: Option<SummaryRequest>,
}

impl Summarizer for Partials {
    fn name(&self) -> &str {
        "partials"
    }
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        if request.kind == RequestKind::Merge {
            self.merge = Some(request.clone());
            return Ok("merged".to_owned());
        }
        let last = request.messages.last().and_then(|m| m.entry_id.clone()).unwrap_or_default();
        Ok(format!("partial {last}"))
    }
}

/// 2026-01-01T10:00:00Z in ms, plus `minutes`.
fn at(minutes: i64) -> i64 {
    1_767_261_600_000 + minutes * 60_000
}

fn message(id: &str, parent: Option<&str>, role: &str, text: &str, ms: i64) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    let content = if role == "user" {
        format!("\"{text}\"")
    } else {
        format!(r#"[{{"type":"text","text":"{text}"}}],"stopReason":"stop""#)
    };
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T10:00:00.000Z","message":{{"role":"{role}","content":{content},"timestamp":{ms}}}}}"#
    )
}

#[test]
fn the_merge_request_labels_each_partial_with_its_place_and_time_span() {
    // Four messages of equal size: split by token share into two parts of two.
    let text = "a".repeat(40);
    let lines = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T10:00:00.000Z","cwd":"/"}"#
            .to_owned(),
        message("u1", None, "user", &text, at(0)),
        message("a1", Some("u1"), "assistant", &text, at(1)),
        message("u2", Some("a1"), "user", &text, at(2)),
        message("a2", Some("u2"), "assistant", &text, at(3)),
        message("u3", Some("a2"), "user", "please continue with the work now", at(4)),
    ];
    let header = Entry::parse(&lines[0]).unwrap();
    let t = Transcript::from_objects(header, lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect())
        .unwrap();
    let path: Vec<&Entry> = t.entries.iter().collect();
    // Chunks of at most 1 token (10000 × 0.4 − 4096 < 1), so the history is staged;
    // keeping 5 tokens cuts at u3 (9 tokens).
    let policy = Policy {
        context_window: 10_000,
        reserve_tokens: 1_000,
        keep_recent_tokens: 5,
        chunk_ratio: Some(0.4),
        parts: 2,
        recent_turns_preserve: 0,
        tool_failures_section: false,
        ..Policy::pi()
    };
    let prep = prepare(&path, &policy.cut_settings(), &PiEstimator).unwrap();
    assert_eq!(prep.first_kept_entry_id, "u3");
    let mut s = Partials::default();
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert!(out.summary.starts_with("merged"));
    let merge = s.merge.expect("a merge request");
    assert_eq!(
        merge.conversation,
        "[User]: [Chunk 1 — oldest messages [2026-01-01 10:00 — 2026-01-01 10:01 UTC]]\npartial a1\n\n\
         [User]: [Chunk 2 — most recent messages [2026-01-01 10:02 — 2026-01-01 10:03 UTC]]\npartial a2"
    );
}

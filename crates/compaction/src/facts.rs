//! What the pipeline derives from each message's text, derived once.
//!
//! A replay summarises and scans the same transcript messages at every
//! compaction, and a sweep does so again for every policy. [`Facts`] holds, per
//! stored message of a transcript, its plain text, its identifiers and its
//! serialised form for a summary request (the last two derived on first use,
//! since only compacted messages need them). It borrows the messages for its
//! lifetime, so a remembered address always denotes the message the facts were
//! derived from; any other message (a synthesised summary, a custom message)
//! is derived on demand, with the same result.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use sessionlog_context::assemble::context_message;
use sessionlog_context::llm::{conversation_chars, convert_to_llm, serialize_conversation};
use sessionlog_context::AgentMessage;
use sessionlog_events::{Entry, EntryKind, Message};
use sessionlog_tokens::parts;

use crate::ids::{extract, extract_all, Identifier};

/// The text the pipeline reads of a message: its counted parts, one per line.
pub fn text_of(m: &AgentMessage<'_>) -> String {
    parts(&m.message).texts.join("\n")
}

/// A message's part of `serializeConversation`: empty when it contributes nothing.
pub fn serialized_of(m: &AgentMessage<'_>) -> String {
    serialize_conversation(&convert_to_llm(std::slice::from_ref(m)))
}

/// The characters of [`serialized_of`], counted without writing it.
pub fn serialized_chars_of(m: &AgentMessage<'_>) -> usize {
    conversation_chars(&convert_to_llm(std::slice::from_ref(m)))
}

/// `texts` joined by `\n`, in one shared string (a message of one part,
/// the usual case, is copied once).
fn joined(texts: &[Cow<'_, str>]) -> Arc<str> {
    match texts {
        [one] => Arc::from(&**one),
        _ => Arc::from(texts.join("\n")),
    }
}

/// The identifiers of a message's text, in (class, text) order: those of
/// its parts, each searched in place rather than joined into [`text_of`].
pub fn ids_of(m: &AgentMessage<'_>) -> Vec<Identifier> {
    extract_all(parts(&m.message).texts.iter().map(|t| &**t))
}

/// One message's facts: its identifiers and text up front (every replay reads
/// the identifiers, and both come from the same counted parts, so the text
/// costs a join where deriving it later cost the parts again), the serialised
/// form on first use (only compacted messages need it).
struct Fact {
    ids: Vec<Identifier>,
    /// Shared with every summary request that sends the message.
    text: OnceLock<Arc<str>>,
    serialized: OnceLock<String>,
    serialized_chars: OnceLock<usize>,
}

/// Per-message text, identifiers and serialised form of a transcript's stored
/// messages, derived once and shared by every compaction and policy.
#[derive(Default)]
pub struct Facts<'t> {
    /// By the message's address (foldhash: SipHash cost more than the
    /// lookup it serves, at every compaction and policy).
    facts: HashMap<usize, Fact, foldhash::fast::RandomState>,
    /// The identifiers of each line of the texts [`Facts::text_ids`] was asked about.
    lines: Mutex<HashMap<Box<str>, Box<[Identifier]>, foldhash::fast::RandomState>>,
    _messages: std::marker::PhantomData<&'t Message>,
}

impl std::fmt::Debug for Facts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Facts").field("messages", &self.facts.len()).finish()
    }
}

fn key(message: &Message) -> usize {
    std::ptr::from_ref(message) as usize
}

impl<'t> Facts<'t> {
    /// No remembered messages: everything is derived on demand.
    pub fn none() -> Facts<'static> {
        Facts::default()
    }

    /// Derives the facts of every `message` entry of `entries` (in parallel).
    pub fn new(entries: &[&'t Entry]) -> Facts<'t> {
        let facts = entries
            .par_iter()
            .filter_map(|entry| {
                let EntryKind::Message(message) = &entry.kind else { return None };
                let m = context_message(entry)?;
                // `ids_of` and `text_of` of the same parts (a tool call's
                // arguments are stringified once for both).
                let texts = parts(&m.message).texts;
                let fact = Fact {
                    ids: extract_all(texts.iter().map(|t| &**t)),
                    text: OnceLock::from(joined(&texts)),
                    serialized: OnceLock::new(),
                    serialized_chars: OnceLock::new(),
                };
                Some((key(message), fact))
            })
            .collect();
        Facts { facts, lines: Mutex::default(), _messages: std::marker::PhantomData }
    }

    fn get(&self, m: &AgentMessage<'_>) -> Option<&Fact> {
        match &m.message {
            Cow::Borrowed(message) => self.facts.get(&key(message)),
            Cow::Owned(_) => None,
        }
    }

    /// The message's text (`text_of`).
    pub fn text<'s>(&'s self, m: &AgentMessage<'_>) -> Cow<'s, str> {
        match self.get(m) {
            Some(f) => Cow::Borrowed(&**f.text.get_or_init(|| text_of(m).into())),
            None => Cow::Owned(text_of(m)),
        }
    }

    /// [`Facts::text`] as a shared string: a remembered message's text is
    /// not copied.
    pub fn text_shared(&self, m: &AgentMessage<'_>) -> Arc<str> {
        match self.get(m) {
            Some(f) => f.text.get_or_init(|| text_of(m).into()).clone(),
            None => text_of(m).into(),
        }
    }

    /// The message's identifiers (`ids_of`).
    pub fn ids<'s>(&'s self, m: &AgentMessage<'_>) -> Cow<'s, [Identifier]> {
        self.get(m).map_or_else(|| Cow::Owned(ids_of(m)), |f| Cow::Borrowed(f.ids.as_slice()))
    }

    /// The message's serialised form (`serialized_of`).
    pub fn serialized<'s>(&'s self, m: &AgentMessage<'_>) -> Cow<'s, str> {
        match self.get(m) {
            Some(f) => Cow::Borrowed(f.serialized.get_or_init(|| serialized_of(m)).as_str()),
            None => Cow::Owned(serialized_of(m)),
        }
    }

    /// The characters of the message's serialised form (`serialized_chars_of`).
    pub fn serialized_chars(&self, m: &AgentMessage<'_>) -> usize {
        match self.get(m) {
            Some(f) => *f.serialized_chars.get_or_init(|| serialized_chars_of(m)),
            None => serialized_chars_of(m),
        }
    }

    /// Derives, on all cores, the text and serialised form of each of
    /// `messages` these facts remember (what a summarisation is about to
    /// read): the same values, derived once each, as on first use.
    pub fn warm(&self, messages: &[AgentMessage<'_>]) {
        messages.par_iter().for_each(|m| {
            if let Some(f) = self.get(m) {
                f.text.get_or_init(|| text_of(m).into());
                f.serialized.get_or_init(|| serialized_of(m));
            }
        });
    }

    /// [`Facts::warm`] for a summariser that does not read the serialised
    /// form: the text and the serialised form's count of characters.
    pub fn warm_counted(&self, messages: &[AgentMessage<'_>]) {
        messages.par_iter().for_each(|m| {
            if let Some(f) = self.get(m) {
                f.text.get_or_init(|| text_of(m).into());
                f.serialized_chars.get_or_init(|| serialized_chars_of(m));
            }
        });
    }

    /// The identifiers of `text` ([`extract`]), each distinct line of the
    /// texts asked about extracted once: a summary repeats most of the
    /// previous summary's lines, and the pipeline reads both at every
    /// compaction. Line by line is the same set: `extract` searches each
    /// whitespace-separated chunk on its own, so a text's identifiers are the
    /// union of its lines'.
    pub fn text_ids(&self, text: &str) -> Vec<Identifier> {
        let lock = || self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        {
            let lines = lock();
            for line in text.split('\n') {
                match lines.get(line) {
                    Some(known) => out.extend_from_slice(known),
                    None => unknown.push(line),
                }
            }
        }
        // Extracted without the lock held: the policies of a sweep ask
        // about one transcript's texts side by side.
        unknown.sort_unstable();
        unknown.dedup();
        let made: Vec<(&str, Box<[Identifier]>)> =
            unknown.into_iter().map(|line| (line, extract(line).into())).collect();
        for (_, ids) in &made {
            out.extend_from_slice(ids);
        }
        let mut lines = lock();
        for (line, ids) in made {
            lines.entry(line.into()).or_insert(ids);
        }
        drop(lines);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `serializeConversation(convertToLlm(messages))`, from the per-message parts.
    pub fn conversation(&self, messages: &[AgentMessage<'_>]) -> String {
        let pieces: Vec<Cow<'_, str>> =
            messages.iter().map(|m| self.serialized(m)).filter(|s| !s.is_empty()).collect();
        pieces.join("\n\n")
    }

    /// The characters of [`Facts::conversation`], counted without writing it.
    pub fn conversation_chars(&self, messages: &[AgentMessage<'_>]) -> usize {
        let (pieces, chars) = messages
            .iter()
            .map(|m| self.serialized_chars(m))
            .filter(|&c| c > 0)
            .fold((0usize, 0usize), |(n, total), c| (n + 1, total + c));
        // Pieces are joined with a blank line.
        chars + 2 * pieces.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use sessionlog_events::Transcript;
    use sessionlog_test_support::{generate, GenOptions};

    use super::*;

    #[test]
    fn remembered_facts_equal_facts_derived_on_demand() {
        let options =
            GenOptions { seed: 7, entries: 300, branches: 2, compactions: 2, tool_output_chars: 400 };
        let lines = generate(options);
        let header = Entry::parse(&lines[0]).expect("generated header parses");
        let entries = lines[1..].iter().map(|l| Entry::parse(l).expect("generated line parses")).collect();
        let t = Transcript::from_objects(header, entries).expect("generated transcript");
        let entries: Vec<&Entry> = t.entries.iter().collect();
        let facts = Facts::new(&entries);
        let messages: Vec<AgentMessage<'_>> = t.entries.iter().filter_map(context_message).collect();
        let mut remembered = 0;
        let mut pieces = [0usize; 3];
        for m in &messages {
            remembered += usize::from(facts.get(m).is_some());
            assert_eq!(facts.text(m), text_of(m));
            // The shared text is the joined text, and a remembered message's
            // is one string handed out again, never a copy.
            assert_eq!(&*facts.text_shared(m), text_of(m));
            if facts.get(m).is_some() {
                assert!(Arc::ptr_eq(&facts.text_shared(m), &facts.text_shared(m)));
                pieces[parts(&m.message).texts.len().min(2)] += 1;
            }
            assert_eq!(facts.ids(m).into_owned(), ids_of(m));
            // The parts searched in place hold what their joined text holds.
            assert_eq!(ids_of(m), crate::ids::extract(&text_of(m)));
            assert_eq!(facts.serialized(m), serialized_of(m));
            assert_eq!(facts.serialized_chars(m), serialized_of(m).chars().count());
        }
        assert!(remembered > 200, "{remembered} of {} messages remembered", messages.len());
        // Messages of one part and of several were both joined.
        assert!(pieces[1] > 0 && pieces[2] > 0, "{pieces:?}");
        assert!(messages.iter().any(|m| !facts.ids(m).is_empty()));
        // The conversation joined from parts is the one serialised whole.
        let whole = serialize_conversation(&convert_to_llm(&messages));
        assert_eq!(facts.conversation(&messages), whole);
        assert_eq!(Facts::none().conversation(&messages), whole);
        for range in [&messages[..], &messages[..1], &messages[..0], &messages[10..60]] {
            let chars = facts.conversation(range).chars().count();
            assert_eq!(facts.conversation_chars(range), chars);
            assert_eq!(Facts::none().conversation_chars(range), chars);
        }
    }

    /// Lines naming identifiers of several classes (some across a `.`, a
    /// `:` or a `/`, so a split anywhere but at whitespace cuts them), lines
    /// without any, and the empty line.
    const LINES: &[&str] = &[
        "- see /src/main.rs and 10.0.0.1:8080",
        "uuid 123e4567-e89b-12d3-a456-426614174000 then https://example.com/a/b.html.",
        "AKIA0123456789ABCDEF in the env; ticket PROJ-1234",
        "commit deadbeefcafe1234 at host.internal:443",
        "plain words only",
        "",
        "  mail ops@example.org, path ./a/b/c.txt",
        "\t/src/main.rs again\r",
    ];

    proptest::proptest! {
        /// `text_ids` of texts asked one after another of one `Facts` (their
        /// lines repeated within and across texts, so later lines are found
        /// remembered) is each text's `extract`.
        #[test]
        fn text_ids_by_line_are_the_whole_texts_identifiers(
            texts in proptest::collection::vec(
                proptest::collection::vec((0..LINES.len(), r"[ -~\t\x0B\x0Cé]{0,12}"), 0..12),
                1..6,
            ),
        ) {
            let facts = Facts::none();
            for picks in &texts {
                let text = picks
                    .iter()
                    .map(|(i, tail)| format!("{}{tail}", LINES[*i]))
                    .collect::<Vec<_>>()
                    .join("\n");
                proptest::prop_assert_eq!(facts.text_ids(&text), crate::ids::extract(&text), "{:?}", text);
            }
        }
    }

    #[test]
    fn text_ids_by_hand() {
        let facts = Facts::none();
        let texts = |ids: Vec<Identifier>| ids.into_iter().map(|id| id.text).collect::<Vec<_>>();
        let first = "see /src/main.rs and 10.0.0.1:8080\nsee /src/main.rs";
        assert_eq!(texts(facts.text_ids(first)), ["10.0.0.1:8080", "/src/main.rs"]);
        // Both lines remembered; the new one adds its own.
        let second = "see /src/main.rs\nticket PROJ-1234\nsee /src/main.rs and 10.0.0.1:8080";
        let mut got = texts(facts.text_ids(second));
        got.sort();
        assert_eq!(got, ["/src/main.rs", "10.0.0.1:8080", "PROJ-1234"]);
        assert_eq!(facts.text_ids(""), []);
    }
}

//! A sans-IO parser for `text/event-stream` (Server-Sent Events) as the
//! WHATWG HTML standard defines it: bytes in, complete events out, no I/O.
//!
//! Lines end with LF, CRLF or CR (a CR at the end of one chunk and an LF at
//! the start of the next are one line ending); a byte-order mark at the very
//! start is skipped; `:` opens a comment; one space after a field's colon is
//! removed; `data` lines are joined with LF; a blank line dispatches the
//! event (an event without `data` is dropped, its `event` name forgotten);
//! an event still open when the stream ends is discarded. Lines are decoded
//! as UTF-8 once complete, so a chunk may split a character anywhere.
//!
//! ```text
//! let mut parser = SseParser::new();
//! let mut events = Vec::new();
//! parser.push(b"event: ping\ndata: {}\n", &mut events);
//! parser.push(b"\n", &mut events); // events == [SseEvent { event: "ping", data: "{}", .. }]
//! ```

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, or `"message"` when the event named none.
    pub event: String,
    /// The `data` lines, joined with LF.
    pub data: String,
    /// The last `id` seen in the stream so far, if any.
    pub id: Option<String>,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended with CR: an LF that starts the next one
    /// belongs to the same line ending.
    after_cr: bool,
    /// No line has been completed yet (the BOM check applies to the first).
    first_line: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry_ms: Option<u64>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser { first_line: true, ..SseParser::default() }
    }

    /// Feeds the next bytes of the stream, appending every event they
    /// complete to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.line.extend_from_slice(&bytes[..end]);
            let line = std::mem::take(&mut self.line);
            self.take_line(&line, out);
            self.line = line;
            self.line.clear();
            if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => bytes = &bytes[end + 2..],
                    Some(_) => bytes = &bytes[end + 1..],
                    None => {
                        self.after_cr = true;
                        return;
                    }
                }
            } else {
                bytes = &bytes[end + 1..];
            }
        }
        self.line.extend_from_slice(bytes);
    }

    /// True when the stream so far ends inside an event (a line not ended,
    /// or fields not yet dispatched by a blank line).
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || self.has_data || !self.event.is_empty()
    }

    /// The reconnection time the stream asked for with `retry`, if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn take_line(&mut self, raw: &[u8], out: &mut Vec<SseEvent>) {
        let decoded = String::from_utf8_lossy(raw);
        let mut line: &str = &decoded;
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix('\u{FEFF}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event: if event.is_empty() { "message".to_owned() } else { event },
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out);
        }
        out
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.to_owned(), data: data.to_owned(), id: None }
    }

    #[test]
    fn the_standards_examples() {
        // The WHATWG examples: multi-line data, comments, ids, a field
        // without a colon, and the unterminated tail that is discarded.
        let text =
            ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n";
        let got = parse_chunks(&[text.as_bytes()]);
        assert_eq!(
            got,
            vec![
                SseEvent { event: "message".into(), data: "first event".into(), id: Some("1".into()) },
                SseEvent { event: "message".into(), data: "second event".into(), id: Some(String::new()) },
            ]
        );
        let got = parse_chunks(&[b"data\n\ndata\ndata\n\ndata:\n"]);
        assert_eq!(got, vec![ev("message", ""), ev("message", "\n")]);
        let got = parse_chunks(&[b"data:test\n\ndata: test\n\n"]);
        assert_eq!(got, vec![ev("message", "test"), ev("message", "test")]);
    }

    #[test]
    fn every_line_ending_and_a_bom() {
        let got = parse_chunks(&[b"\xEF\xBB\xBFevent: a\r\ndata: 1\r\rdata: 2\n\r\ndata: 3\r", b"\n\r"]);
        assert_eq!(got, vec![ev("a", "1"), ev("message", "2"), ev("message", "3")]);
    }

    #[test]
    fn an_event_without_data_is_dropped_with_its_name() {
        let got = parse_chunks(&[b"event: ping\n\ndata: x\n\n"]);
        assert_eq!(got, vec![ev("message", "x")]);
    }

    proptest::proptest! {
        /// Any document of fields, comments and blank lines, with any line
        /// endings, gives the same events however its bytes are split.
        #[test]
        fn any_split_gives_the_same_events(
            lines in proptest::collection::vec(
                (0..6usize, "[a-zé🚀 :]{0,6}", 0..3usize), 1..30),
            cuts in proptest::collection::vec(0..400usize, 0..8),
        ) {
            let mut text = String::new();
            for (kind, value, ending) in &lines {
                let line = match kind {
                    0 => format!("data: {value}"),
                    1 => format!("data:{value}"),
                    2 => format!("event: {value}"),
                    3 => format!(": {value}"),
                    4 => format!("id: {value}"),
                    _ => String::new(),
                };
                text.push_str(&line);
                text.push_str(["\n", "\r\n", "\r"][*ending]);
            }
            let bytes = text.as_bytes();
            let whole = parse_chunks(&[bytes]);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            proptest::prop_assert_eq!(parse_chunks(&chunks), whole);
        }
    }

    #[test]
    fn retry_takes_digits_only() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.push(b"retry: 15x\nretry: 3000\nretry:\n", &mut out);
        assert_eq!(parser.retry_ms(), Some(3000));
        assert!(out.is_empty());
    }
}

//! Transcripts with identifiers planted where the test knows them.
//!
//! [`planted`] writes a linear Pi v3 transcript of tool-using turns and
//! returns, beside its lines, every identifier it planted: its class, its
//! exact text and the entry that holds it. A test of the identifier ledger
//! checks against this list — never against the extractor the ledger is built
//! with, so an identifier the extractor misses is a failure, not a blind spot.
//!
//! Each turn is four entries: a user message (`u<n>`), an assistant message
//! calling a tool (`a<n>`), the tool's result (`r<n>`) and the assistant's
//! answer (`b<n>`). Identifiers stand between spaces in ordinary lower-case
//! words, one of each class in turn; the text around them is padded to vary
//! the sizes. Deterministic: the same options give the same lines.

/// One identifier planted in the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planted {
    /// Its class, by the grammar's name: `uuid`, `url`, `email`, `ipv4`,
    /// `host_port`, `path`, `hex`, `ticket`, `token` or `secret`.
    pub class: &'static str,
    /// The exact text.
    pub text: String,
    /// The id of the entry holding it.
    pub entry_id: String,
}

/// What to plant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlantOptions {
    /// Seeds the sizes and the identifiers' digits.
    pub seed: u64,
    /// Turns of four entries each.
    pub turns: usize,
    /// Identifiers per message that holds any (user, tool result, answer).
    pub per_message: usize,
    /// Largest padding of a tool result, in characters.
    pub max_padding: usize,
    /// A credential-shaped secret in the user message of every `n`-th turn
    /// (the first turn included); 0 plants none.
    pub secret_every: usize,
}

/// The identifier classes planted in turn (secrets aside).
pub const CLASSES: [&str; 9] =
    ["uuid", "url", "email", "ipv4", "host_port", "path", "hex", "ticket", "token"];

struct Rng(u64);

impl Rng {
    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The text of the `n`-th planted identifier of `class` (unique per `n`).
fn identifier(class: &str, n: u64, rng: &mut Rng) -> String {
    let r = rng.next();
    match class {
        "uuid" => format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            n as u32,
            r & 0xffff,
            (r >> 16) & 0xfff,
            (r >> 28) & 0xfff,
            r >> 16
        ),
        "url" => format!("https://svc{n}.example.com/api/v{}/items/{}", r % 9 + 1, r % 100_000),
        "email" => format!("user{n}@corp{}.example.org", r % 50),
        "ipv4" => format!("10.{}.{}.{}", n / 250 % 250, n % 250, r % 250 + 1),
        "host_port" => format!("db{n}.internal:{}", 1_000 + r % 60_000),
        "path" => format!("/srv/app{n}/conf{}.yaml", r % 1_000),
        // A letter and a digit in every one, as the hex class requires.
        "hex" => format!("a{:08x}{:x}1", r as u32, n),
        "ticket" => format!("OPS-{}", 10_000 + n),
        "token" => format!("tk99{r:020x}{n}"),
        "secret" => format!("sk-proj-{:016x}{:08x}Q{n}", r, n as u32),
        other => panic!("unknown class {other}"),
    }
}

fn words(rng: &mut Rng, chars: usize) -> String {
    const WORDS: [&str; 8] = ["lorem", "ipsum", "dolor", "amet", "build", "check", "notes", "again"];
    let mut out = String::new();
    while out.len() < chars {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out
}

fn line(id: &str, parent: Option<&str>, message: serde_json::Value) -> String {
    serde_json::json!({
        "type": "message",
        "id": id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": message,
    })
    .to_string()
}

/// A transcript (header first) and the identifiers planted in it, in order.
pub fn planted(options: PlantOptions) -> (Vec<String>, Vec<Planted>) {
    use serde_json::json;
    let mut rng = Rng(options.seed);
    let mut lines = vec![json!({
        "type": "session", "version": 3, "id": "planted", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"
    })
    .to_string()];
    let mut planted = Vec::new();
    let mut counter = 0u64;
    let mut plant = |entry: &str, rng: &mut Rng, planted: &mut Vec<Planted>| -> String {
        let mut parts = Vec::new();
        for _ in 0..options.per_message {
            let class = CLASSES[(counter % CLASSES.len() as u64) as usize];
            let text = identifier(class, counter, rng);
            counter += 1;
            parts.push(text.clone());
            planted.push(Planted { class, text, entry_id: entry.to_owned() });
        }
        parts.join(" and ")
    };
    let mut parent: Option<String> = None;
    for turn in 0..options.turns {
        let (u, a, r, b) = (format!("u{turn}"), format!("a{turn}"), format!("r{turn}"), format!("b{turn}"));
        let mut ask = format!("step {turn} please check {} ", plant(&u, &mut rng, &mut planted));
        if options.secret_every > 0 && turn % options.secret_every == 0 {
            let secret = identifier("secret", turn as u64, &mut rng);
            ask.push_str(&format!("with key {secret} "));
            planted.push(Planted { class: "secret", text: secret, entry_id: u.clone() });
        }
        let pad = rng.below(200) as usize;
        ask.push_str(&words(&mut rng, pad));
        lines.push(line(&u, parent.as_deref(), json!({"role": "user", "content": ask, "timestamp": turn})));
        let call = format!("call{turn}");
        lines.push(line(
            &a,
            Some(&u),
            json!({
                "role": "assistant",
                "content": [
                    {"type": "text", "text": format!("running the check for step {turn}")},
                    {"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": "check"}}
                ],
                "stopReason": "toolUse", "timestamp": turn
            }),
        ));
        let pad = rng.below(options.max_padding as u64 + 1) as usize;
        let output = format!("result {} {}", plant(&r, &mut rng, &mut planted), words(&mut rng, pad));
        lines.push(line(
            &r,
            Some(&a),
            json!({
                "role": "toolResult", "toolCallId": call, "toolName": "bash",
                "content": [{"type": "text", "text": output}], "isError": turn % 5 == 4, "timestamp": turn
            }),
        ));
        let answer = format!("done with {} {}", plant(&b, &mut rng, &mut planted), words(&mut rng, 40));
        lines.push(line(
            &b,
            Some(&r),
            json!({
                "role": "assistant", "content": [{"type": "text", "text": answer}],
                "stopReason": "stop", "timestamp": turn
            }),
        ));
        parent = Some(b);
    }
    (lines, planted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planted_identifier_is_in_its_entry_and_unique() {
        let options = PlantOptions { seed: 3, turns: 12, per_message: 2, max_padding: 300, secret_every: 4 };
        let (lines, planted) = planted(options);
        assert_eq!(lines.len(), 1 + 12 * 4);
        // 3 messages × 2 identifiers per turn, plus secrets in turns 0, 4 and 8.
        assert_eq!(planted.len(), 12 * 6 + 3);
        let mut texts: Vec<&str> = planted.iter().map(|p| p.text.as_str()).collect();
        texts.sort_unstable();
        texts.dedup();
        assert_eq!(texts.len(), planted.len(), "planted identifiers are unique");
        for p in &planted {
            let holder = lines.iter().find(|l| l.contains(&format!("\"id\":\"{}\"", p.entry_id))).unwrap();
            assert!(holder.contains(&p.text), "{p:?}");
        }
        for class in CLASSES.iter().chain(&["secret"]) {
            assert!(planted.iter().any(|p| p.class == *class), "{class} planted");
        }
        assert_eq!(super::planted(options), (lines, planted), "deterministic");
    }
}

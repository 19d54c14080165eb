//! Opaque identifiers: what a summary must never lose.
//!
//! The grammar (each a regular expression over the message text; matches are
//! trimmed of trailing `.,;:!?)]}'"` and kept when at least 4 characters long):
//!
//! | class | pattern (informally) |
//! |---|---|
//! | `uuid` | 8-4-4-4-12 hex digits |
//! | `url` | `http://` or `https://` up to whitespace or a quote/bracket |
//! | `email` | `local@domain.tld` |
//! | `ipv4` | four dotted decimal octets, optional `:port` |
//! | `ipv6` | hex groups with at least two `:` separators and a `::` or 7 colons |
//! | `host_port` | a dotted host name or `localhost`, `:`, 2–5 digits |
//! | `path` | `/a/b`, `~/a`, `./a/b`, `../a` (two segments or more), or `a/b.ext` |
//! | `hex` | 7 or more hex digits with at least one digit and one letter (git SHAs, hashes) |
//! | `ticket` | `ABC-123`: 2–10 capitals/digits starting with a capital, `-`, digits |
//! | `token` | 24 or more `[A-Za-z0-9_-]` with letters and digits mixed |
//! | `secret` | API-key shapes: `sk-…`, `gh[pousr]_…`/`github_pat_…`, `AKIA…`, `xox[abpr]-…`, `AIza…` |
//!
//! Secrets are a class of their own: a [`SecretPolicy`] decides whether the
//! ledger keeps them verbatim or only a reference to the entry holding them.

use std::sync::LazyLock;

use regex::Regex;

/// What kind of identifier a match is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdClass {
    /// A UUID.
    Uuid,
    /// An http(s) URL.
    Url,
    /// An e-mail-like id.
    Email,
    /// An IPv4 address (with optional port).
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// `host:port`.
    HostPort,
    /// A file path.
    Path,
    /// A hex hash (7+ digits), e.g. a git SHA.
    Hex,
    /// A ticket id such as `ABC-123`.
    Ticket,
    /// A long opaque token.
    Token,
    /// An API-key-shaped secret.
    Secret,
}

struct Pattern {
    class: IdClass,
    re: Regex,
}

fn compile(class: IdClass, re: &str) -> Pattern {
    // The patterns are constants of this module; a typo is a bug caught by its tests.
    Pattern { class, re: Regex::new(re).unwrap_or_else(|e| panic!("identifier pattern {class:?}: {e}")) }
}

// ASCII classes and ASCII word boundaries throughout: identifiers are ASCII,
// and Unicode `\b` would force the slow backtracking engines.
static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        compile(
            IdClass::Secret,
            r"(?-u:\b)(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})",
        ),
        compile(
            IdClass::Uuid,
            r"(?-u:\b)[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?-u:\b)",
        ),
        compile(IdClass::Url, r#"https?://[^\t\n\x0B\x0C\r <>"'`\\]+"#),
        compile(
            IdClass::Email,
            r"(?-u:\b)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?-u:\b)",
        ),
        compile(IdClass::Ipv4, r"(?-u:\b)(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5})?(?-u:\b)"),
        compile(
            IdClass::Ipv6,
            r"(?-u:\b)(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}(?-u:\b)|(?-u:\b)(?:[0-9a-fA-F]{1,4}:)+:(?:[0-9a-fA-F]{1,4}:?)*[0-9a-fA-F]{1,4}(?-u:\b)",
        ),
        compile(
            IdClass::HostPort,
            r"(?-u:\b)(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}):[0-9]{2,5}(?-u:\b)",
        ),
        compile(
            IdClass::Path,
            r"(?:~|\.{1,2})?/[A-Za-z0-9._@+-]+(?:/[A-Za-z0-9._@+-]+)+/?|(?:~|\.{1,2})/[A-Za-z0-9._@+-]+|(?-u:\b)[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*(?:/[A-Za-z0-9._@+-]+)+\.[A-Za-z0-9]{1,8}(?-u:\b)",
        ),
        compile(IdClass::Hex, r"(?-u:\b)[0-9a-fA-F]{7,}(?-u:\b)"),
        compile(IdClass::Ticket, r"(?-u:\b)[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}(?-u:\b)"),
        compile(IdClass::Token, r"(?-u:\b)[A-Za-z0-9_-]{24,}(?-u:\b)"),
    ]
});

/// [`chunk_from`] of a whole text (a chunk).
#[cfg(test)]
fn possible(text: &str) -> [bool; 11] {
    chunk_from(text.as_bytes(), 0).0
}

/// Which classes the chunk of `bytes` that starts at `start` (the text's
/// start or a byte after whitespace) may hold, and where it ends (the next
/// whitespace, else the text's end), by one pass over its bytes: for each
/// class a shape that every match of its pattern contains (a `/` for a path,
/// `://` for a URL, a run of 7 hex digits for a hash, …). A class whose shape
/// is absent cannot match, so it is not searched; one whose shape is present
/// is searched, and the search alone decides. So the result is the one of
/// running every pattern; [`extract`] asks it of each chunk with a trigger.
/// No shape reads the whitespace around a chunk as one of its bytes.
fn chunk_from(bytes: &[u8], start: usize) -> ([bool; 11], usize) {
    // Where the runs of hex digits and of `[A-Za-z0-9_-]` that reach byte
    // `i` begin (the run before `i` is `from..i`); a run's length is taken
    // when a byte ends it, not at each byte.
    let (mut hex_from, mut token_from) = (start, start);
    let (mut hex_max, mut token_max) = (0usize, 0usize);
    let (mut uuid, mut url, mut email, mut ipv4, mut ipv6, mut host_port, mut path, mut ticket) =
        (false, false, false, false, false, false, false, false);
    let mut secret = false;
    let mut end = bytes.len();
    for (j, &b) in bytes[start..].iter().enumerate() {
        let i = start + j;
        let class = BYTE_CLASS[usize::from(b)];
        if class & (MARK | SPACE) != 0 {
            if class & SPACE != 0 {
                end = i;
                break;
            }
            let next = bytes.get(i + 1).copied().unwrap_or(0);
            let prev = if i > start { bytes[i - 1] } else { 0 };
            match b {
                b'-' => {
                    // 8 hex digits then `-` (a UUID's first group); `[A-Z0-9]-[0-9]`
                    // after a capital (a ticket); `sk-` or `xox[abpr]-` (secrets).
                    uuid |= i - hex_from >= 8;
                    ticket = ticket
                        || (matches!(prev, b'A'..=b'Z' | b'0'..=b'9')
                            && next.is_ascii_digit()
                            && capital_before(&bytes[start..], i - start));
                    secret |= secret_dash(&bytes[start..i]);
                }
                // `gh?_`, `github_pat_`; `AKIA`, `AIza` (secrets).
                b'_' => secret |= secret_underscore(&bytes[start..i]),
                b'A' => secret |= matches!(next, b'K' | b'I'),
                b':' => {
                    // `://` (a URL), a hex digit then `:` (IPv6), a letter, `:` and two digits (host:port).
                    url |= next == b'/' && bytes.get(i + 2) == Some(&b'/');
                    ipv6 |= i > hex_from;
                    // A host:port's host ends in a letter (`[A-Za-z]{2,}`, `localhost`).
                    host_port |= prev.is_ascii_alphabetic()
                        && next.is_ascii_digit()
                        && bytes.get(i + 2).is_some_and(u8::is_ascii_digit);
                }
                b'.' => ipv4 |= prev.is_ascii_digit() && next.is_ascii_digit(),
                b'@' => email = true,
                _ => path = true,
            }
        }
        if class & HEX == 0 {
            hex_max = hex_max.max(i - hex_from);
            hex_from = i + 1;
        }
        if class & TOKEN == 0 {
            token_max = token_max.max(i - token_from);
            token_from = i + 1;
        }
    }
    hex_max = hex_max.max(end - hex_from);
    token_max = token_max.max(end - token_from);
    // In PATTERNS order. Every secret shape is 15 or more of `[A-Za-z0-9_-]`
    // (`xox?-` and 10 more is the shortest).
    let may = [
        secret && token_max >= 15,
        uuid,
        url,
        email,
        ipv4,
        ipv6,
        host_port,
        path,
        hex_max >= 7,
        ticket,
        token_max >= 24,
    ];
    (may, end)
}

/// [`chunk_from`] eight bytes at a time, for a chunk shorter than 64 bytes
/// (`None` for a longer one): each class's bytes as one bit per byte
/// ([`lanes`]), the runs of hex digits and of `[A-Za-z0-9_-]` found by
/// shifting those bits, and only the marks read one by one.
fn chunk_by_words(bytes: &[u8], start: usize) -> Option<([bool; 11], usize)> {
    // Bit `i` of each: the byte at `start + i`.
    let (mut hex, mut token, mut marks) = (0u64, 0u64, 0u64);
    let mut len = None;
    for shift in (0..64).step_by(8) {
        let lanes = lanes(word(bytes, start + shift));
        hex |= lane_bits(lanes.hex) << shift;
        token |= lane_bits(lanes.token) << shift;
        marks |= lane_bits(lanes.mark) << shift;
        let space = lane_bits(lanes.space);
        if space != 0 {
            len = Some(shift + space.trailing_zeros() as usize);
            break;
        }
    }
    // At most 63: the bytes from the whitespace on are not the chunk's.
    let len = len?;
    let keep = (1u64 << len) - 1;
    let (hex, token) = (hex & keep, token & keep);
    marks &= keep;
    let (mut uuid, mut url, mut email, mut ipv4, mut ipv6, mut host_port, mut path, mut ticket) =
        (false, false, false, false, false, false, false, false);
    let mut secret = false;
    while marks != 0 {
        let j = marks.trailing_zeros() as usize;
        marks &= marks - 1;
        let i = start + j;
        let next = bytes.get(i + 1).copied().unwrap_or(0);
        let prev = if j > 0 { bytes[i - 1] } else { 0 };
        match bytes[i] {
            b'-' => {
                // The 8 bytes before it hex digits (a UUID's first group).
                uuid |= j >= 8 && (hex >> (j - 8)) & 0xFF == 0xFF;
                ticket = ticket
                    || (matches!(prev, b'A'..=b'Z' | b'0'..=b'9')
                        && next.is_ascii_digit()
                        && capital_before(&bytes[start..], j));
                secret |= secret_dash(&bytes[start..i]);
            }
            b'_' => secret |= secret_underscore(&bytes[start..i]),
            b'A' => secret |= matches!(next, b'K' | b'I'),
            b':' => {
                url |= next == b'/' && bytes.get(i + 2) == Some(&b'/');
                // The byte before it a hex digit.
                ipv6 |= j > 0 && (hex >> (j - 1)) & 1 != 0;
                host_port |= prev.is_ascii_alphabetic()
                    && next.is_ascii_digit()
                    && bytes.get(i + 2).is_some_and(u8::is_ascii_digit);
            }
            b'.' => ipv4 |= prev.is_ascii_digit() && next.is_ascii_digit(),
            b'@' => email = true,
            _ => path = true,
        }
    }
    let may = [
        secret && has_run(token, 15),
        uuid,
        url,
        email,
        ipv4,
        ipv6,
        host_port,
        path,
        has_run(hex, 7),
        ticket,
        has_run(token, 24),
    ];
    Some((may, start + len))
}

/// Whether `bits` holds `n` (1 or more) set bits in a row: after each step,
/// bit `i` of `run` is set when bits `i..i + have` all are.
fn has_run(bits: u64, n: u32) -> bool {
    let (mut run, mut have) = (bits, 1);
    while have < n {
        let step = have.min(n - have);
        run &= run >> step;
        have += step;
    }
    run != 0
}

/// Whether a `-` after `before` (the chunk's bytes before it) can end a
/// secret's head: `sk-` (`sk-proj-` and `sk-ant-` hold it too) or `xox[abpr]-`.
fn secret_dash(before: &[u8]) -> bool {
    before.ends_with(b"sk")
        || before.len() >= 4
            && before[before.len() - 4..before.len() - 1] == *b"xox"
            && matches!(before[before.len() - 1], b'a' | b'b' | b'p' | b'r')
}

/// Whether a `_` after `before` can end a secret's head: `gh[pousr]_`, or
/// `github_` (the start of `github_pat_`).
fn secret_underscore(before: &[u8]) -> bool {
    before.ends_with(b"github")
        || before.len() >= 3
            && before[before.len() - 3..before.len() - 1] == *b"gh"
            && matches!(before[before.len() - 1], b'p' | b'o' | b'u' | b's' | b'r')
}

/// Whether a ticket's capital can precede the `-` at `i`: `[A-Z][A-Z0-9]{1,9}-`
/// puts it 2 to 10 bytes before, so only those 10 bytes are read (a rescan
/// from the chunk's start at every `-` would be quadratic in a long chunk).
fn capital_before(bytes: &[u8], i: usize) -> bool {
    bytes[i.saturating_sub(10)..i].iter().any(u8::is_ascii_uppercase)
}

/// [`BYTE_CLASS`] bits: a hex digit, a `[A-Za-z0-9_-]` byte, one of
/// `-:.@/_A`, whitespace ([`is_space`]), a word byte (`[A-Za-z0-9_]`), a
/// path segment's byte (`[A-Za-z0-9._@+-]`).
const HEX: u8 = 1;
const TOKEN: u8 = 2;
const MARK: u8 = 4;
const SPACE: u8 = 8;
const WORD: u8 = 16;
const SEGMENT: u8 = 32;

/// Each byte's [`HEX`], [`TOKEN`], [`MARK`], [`SPACE`], [`WORD`] and [`SEGMENT`] bits.
static BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut class = 0;
        if c.is_ascii_hexdigit() {
            class |= HEX;
        }
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' {
            class |= TOKEN;
        }
        if matches!(c, b'-' | b':' | b'.' | b'@' | b'/' | b'_' | b'A') {
            class |= MARK;
        }
        if is_space(c) {
            class |= SPACE;
        }
        if c.is_ascii_alphanumeric() || c == b'_' {
            class |= WORD;
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'@' | b'+' | b'-') {
            class |= SEGMENT;
        }
        table[b] = class;
        b += 1;
    }
    table
};

// Eight bytes of a text read as one little-endian word, byte `k` in lane
// `k` (bits `8k..8k + 8`), so that one test of the word tests every byte
// (SWAR): a lane's answer is its high bit, and no sum carries across lanes.

/// The low bit of every lane.
const LANES_LO: u64 = 0x0101_0101_0101_0101;
/// The high bit of every lane.
const LANES_HI: u64 = LANES_LO << 7;

/// The eight bytes of `bytes` from `at` as a word, the lanes past the text's
/// end read as spaces (whitespace, which ends a chunk as the end does).
fn word(bytes: &[u8], at: usize) -> u64 {
    let rest = bytes.get(at..).unwrap_or_default();
    match rest.first_chunk::<8>() {
        Some(lanes) => u64::from_le_bytes(*lanes),
        None => {
            let mut lanes = [b' '; 8];
            lanes[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(lanes)
        }
    }
}

/// A word's ASCII lanes (its high bits cleared), and which lanes are ASCII.
/// [`at_least`] of the first with a byte `c` sets the high bit of each lane
/// whose byte is `c` or more: a lane is at most 0x7F, and adding 0x80 − `c`
/// to it gives at most 0xFF, so nothing carries.
fn ascii_lanes(word: u64) -> (u64, u64) {
    (word & !LANES_HI, !word & LANES_HI)
}

/// See [`ascii_lanes`]: the lanes of `low` (each at most 0x7F) that are `c` or more, by their high bit.
fn at_least(low: u64, c: u8) -> u64 {
    debug_assert!(c <= 0x80, "an ASCII bound");
    low.wrapping_add(LANES_LO * u64::from(0x80 - c))
}

/// The lanes of `low` from `first` to `last` (both ASCII), by their high bit.
fn between(low: u64, first: u8, last: u8) -> u64 {
    debug_assert!(first <= last && last < 0x80, "ASCII bounds");
    at_least(low, first) & !at_least(low, last + 1)
}

/// [`trigger`] of each lane of `word`, by its high bit.
fn trigger_lanes(word: u64) -> u64 {
    let (low, ascii) = ascii_lanes(word);
    (between(low, b'/', b':')
        | between(low, b'@', b'A')
        | between(low, b'-', b'-')
        | between(low, b'_', b'_'))
        & ascii
}

/// [`is_space`] of each lane of `word`, by its high bit.
fn space_lanes(word: u64) -> u64 {
    let (low, ascii) = ascii_lanes(word);
    (between(low, b'\t', b'\r') | between(low, b' ', b' ')) & ascii
}

/// [`BYTE_CLASS`] of each lane of a word, one class a field, by the lanes' high bits.
struct Lanes {
    /// [`HEX`] lanes.
    hex: u64,
    /// [`TOKEN`] lanes.
    token: u64,
    /// [`MARK`] lanes.
    mark: u64,
    /// [`SPACE`] lanes.
    space: u64,
}

/// The [`Lanes`] of `word`.
fn lanes(word: u64) -> Lanes {
    let (low, ascii) = ascii_lanes(word);
    // Letters folded to lower case: `| 0x20` moves no other byte into `a..=z`.
    let folded = low | (LANES_LO * 0x20);
    let digit = between(low, b'0', b'9');
    let underscore = between(low, b'_', b'_');
    let from_a = at_least(folded, b'a');
    let hex = digit | (from_a & !at_least(folded, b'g'));
    let token = digit | (from_a & !at_least(folded, b'{')) | underscore | between(low, b'-', b'-');
    let mark = between(low, b'-', b'/') | between(low, b':', b':') | between(low, b'@', b'A') | underscore;
    let space = between(low, b'\t', b'\r') | between(low, b' ', b' ');
    Lanes { hex: hex & ascii, token: token & ascii, mark: mark & ascii, space: space & ascii }
}

/// The high bits of a word's lanes as 8 bits, lane `k` at bit `k`: the
/// multiplication moves lane `k`'s bit to bit 56 + `k` (every other product
/// lands below bit 56 without carrying, or past bit 63).
fn lane_bits(lanes: u64) -> u64 {
    (lanes >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Punctuation that ends a sentence rather than an identifier; `…` is where
/// a clipped text (the extractive summariser's) stops, so an identifier it
/// follows stays the identifier.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"', '…'];

/// Whether a match of `class` is kept: a hash with a digit and a letter, a
/// token with two digits and a letter, an IPv4 address with octets to 255.
/// The other classes are kept as found (their texts are not read).
fn accept(class: IdClass, text: &str) -> bool {
    let has_alpha = || text.bytes().any(|b| b.is_ascii_alphabetic());
    let digits = || text.bytes().filter(u8::is_ascii_digit).count();
    match class {
        IdClass::Hex => text.bytes().any(|b| b.is_ascii_digit()) && has_alpha(),
        IdClass::Token => digits() >= 2 && has_alpha(),
        IdClass::Ipv4 => text.split([':', '.']).take(4).all(|o| o.parse::<u16>().is_ok_and(|n| n <= 255)),
        _ => true,
    }
}

/// One identifier found in a text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identifier {
    /// The class it matched.
    pub class: IdClass,
    /// The exact text.
    pub text: String,
}

/// Classes whose matches contain others (a URL holds a path and a host:port):
/// a later class's match inside one of their spans is not reported again.
fn is_container(class: IdClass) -> bool {
    matches!(class, IdClass::Secret | IdClass::Uuid | IdClass::Url | IdClass::Email)
}

/// Every identifier in `text`, deduplicated, in (class, text) order.
///
/// The same result as running every pattern over the whole text, for less:
/// no pattern matches ASCII whitespace (`\t \n \x0B \x0C \r` and space; the
/// URL's negated class names each), and at a chunk's edge `(?-u:\b)` sees a
/// non-word neighbour as it does at whitespace, so each whitespace-separated
/// chunk is searched on its own. A container's span (the rule of
/// [`is_container`]) lies within its chunk, so the rule holds per chunk. And
/// every identifier that is kept holds a [`trigger`] byte (see there), so a
/// chunk without one (a plain word, most of a text) is not searched at all;
/// one with a trigger is searched for the classes [`chunk_from`] picks for it,
/// by a [`scan`] where the class has one, else by its pattern.
pub fn extract(text: &str) -> Vec<Identifier> {
    extract_all([text])
}

/// Every identifier in the texts joined by `\n`, deduplicated, in (class,
/// text) order, without joining them: `\n` is whitespace, which no
/// identifier holds, so each text is searched on its own.
pub fn extract_all<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Identifier> {
    let mut out = Vec::new();
    let mut containers = Containers::default();
    for text in texts {
        extract_chunks(text, &mut out, &mut containers);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The identifiers of `text`'s chunks with a trigger, into `out` (unsorted).
/// `containers` is scratch space, cleared for each chunk (its vectors are
/// reused rather than allocated per chunk with a container).
fn extract_chunks(text: &str, out: &mut Vec<Identifier>, containers: &mut Containers) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(t) = next_trigger(bytes, at) {
        // The chunk around the trigger: no trigger in `at..t`, and `at` is
        // the text's start or the whitespace ending the previous chunk.
        let start = chunk_start(bytes, at, t);
        let (may, end) = chunk_by_words(bytes, start).unwrap_or_else(|| chunk_from(bytes, start));
        let chunk = &text[start..end];
        // The classes to search as bits, walked by their lowest set bit.
        let mut classes = may.iter().rev().fold(0u16, |bits, &may| bits << 1 | u16::from(may));
        if classes == 0 {
            at = end;
            continue;
        }
        let patterns = PATTERNS.as_slice();
        let patterns = std::iter::from_fn(|| {
            let k = classes.trailing_zeros() as usize;
            classes &= classes.wrapping_sub(1);
            patterns.get(k)
        });
        extract_into(chunk, patterns, out, containers);
        at = end;
    }
}

/// ASCII whitespace as the patterns' classes know it: `\t \n \x0B \x0C \r`
/// and space (not `u8::is_ascii_whitespace`, which leaves out `\x0B`).
const fn is_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// Bytes of which every kept identifier holds one: a digit, `-`, `/`, `:`,
/// `@`, `_` or `A`. Class by class: a UUID and a ticket hold `-`; a URL, an
/// IPv6 address and a host:port hold `:`; an e-mail `@`; a path `/`; an IPv4
/// address digits; a hash and a token are kept only with digits ([`accept`]);
/// a secret holds `-` (`sk-`, `xox?-`), `_` (`gh?_`, `github_pat_`) or starts
/// with `A` (`AKIA`, `AIza`).
///
/// 1 for a trigger, else 0: `/` to `:` (0x2F–0x3A, the digits between), `@`
/// and `A` (0x40–0x41), `-`, `_`. Written with `|` and no branch so that the
/// compiler vectorises a block's test (a `matches!` becomes a bit test per byte).
fn trigger(b: u8) -> u8 {
    u8::from(b.wrapping_sub(b'/') < 12)
        | u8::from(b.wrapping_sub(b'@') < 2)
        | u8::from(b == b'-')
        | u8::from(b == b'_')
}

/// The first [`trigger`] byte of `bytes` at or after `from`; whole blocks
/// without one are passed by a vectorised test, and the block holding one
/// is read eight bytes at a time ([`trigger_lanes`]).
fn next_trigger(bytes: &[u8], from: usize) -> Option<usize> {
    const BLOCK: usize = 32;
    let mut i = from;
    while let Some(block) = bytes.get(i..i + BLOCK) {
        if block.iter().fold(0, |any, &b| any | trigger(b)) != 0 {
            break;
        }
        i += BLOCK;
    }
    // Eight bytes at a time from there (the lanes past the end are spaces).
    while i < bytes.len() {
        let found = trigger_lanes(word(bytes, i));
        if found != 0 {
            return Some(i + found.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    None
}

/// The start of the chunk holding byte `t`: after the last whitespace in
/// `at..t`, else `at`; eight bytes at a time back from `t`.
fn chunk_start(bytes: &[u8], at: usize, t: usize) -> usize {
    let mut end = t;
    while end >= at + 8 {
        let space = space_lanes(word(bytes, end - 8));
        if space != 0 {
            return end - 8 + (63 - space.leading_zeros() as usize) / 8 + 1;
        }
        end -= 8;
    }
    bytes[at..end].iter().rposition(|&b| is_space(b)).map_or(at, |p| at + p + 1)
}

/// How [`extract_into`] finds a pattern's matches: by its regex alone, or by
/// a [`scan`] where one is written (the same spans) and the regex elsewhere.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Search {
    /// Every pattern by its regex (the reference the tests compare with).
    #[cfg(test)]
    Regex,
    /// The hand-written scans where there are some.
    Scan,
}

/// The spans of `p`'s matches in `text`, in order, as its regex's `find_iter` gives them.
fn each_match(p: &Pattern, text: &str, search: Search, found: &mut impl FnMut(usize, usize)) {
    if search == Search::Scan {
        if let Some(scan) = scan(p.class) {
            return scan(text.as_bytes(), found);
        }
    }
    for m in p.re.find_iter(text) {
        found(m.start(), m.end());
    }
}

/// The identifiers `patterns` (in `PATTERNS` order) find in the chunk
/// `text`, into `out`: each pattern's matches (by [`each_match`] with
/// [`Search::Scan`]), trimmed, kept when 4 characters or more, [`accept`]ed
/// and not within an earlier container's span ([`Containers`]).
fn extract_into<'p>(
    text: &str,
    patterns: impl Iterator<Item = &'p Pattern>,
    out: &mut Vec<Identifier>,
    containers: &mut Containers,
) {
    containers.clear();
    for p in patterns {
        if containers.cover(text) {
            // Every later match lies within the chunk, so within the container.
            break;
        }
        let mut within = containers.reader();
        each_match(p, text, Search::Scan, &mut |start, end| {
            let found = trim_trailing(&text[start..end]);
            let span = (start, start + found.len());
            if within.holds(span) {
                return;
            }
            // At least 4 characters: a 4th one exists (no count of them all).
            if found.chars().nth(3).is_some() && accept(p.class, found) {
                if is_container(p.class) {
                    within.added.push(span);
                }
                out.push(Identifier { class: p.class, text: found.to_owned() });
            }
        });
        containers.add();
    }
}

/// The spans of the containers kept so far in a chunk, by start, so that
/// whether one holds a match costs a step of a walk rather than a look at
/// each (a chunk of many URLs or UUIDs, joined without whitespace, would
/// otherwise cost their number squared).
///
/// A match is only asked about the containers of earlier classes: one of
/// its own class cannot hold it, since a pattern's matches do not overlap
/// (a later match starts at or after an earlier one's end, so lies within
/// it only if empty, and an empty match is too short to keep either way).
#[derive(Default)]
struct Containers {
    /// Spans of earlier classes, sorted by start.
    spans: Vec<(usize, usize)>,
    /// The class being searched's containers, in order ([`Within::added`]).
    added: Vec<(usize, usize)>,
}

impl Containers {
    /// Whether a container's span covers the whole of `chunk` but trailing
    /// punctuation ([`TRAILING`]). A later class's match then lies within the
    /// container once trimmed (the chunk holds it), or is nothing but trailing
    /// punctuation (trimmed to nothing, too short to keep): none is kept, so the
    /// later classes need not be searched (a URL's path, a UUID's hex runs).
    fn cover(&self, chunk: &str) -> bool {
        let mut from_start = self.spans.iter().take_while(|&&(s, _)| s == 0);
        from_start.any(|&(_, e)| chunk[e..].trim_end_matches(TRAILING).is_empty())
    }

    /// No spans: a new chunk's start (the vectors keep their room).
    fn clear(&mut self) {
        self.spans.clear();
        self.added.clear();
    }

    /// A walk over the spans for one class's matches, which come in order of start.
    fn reader(&mut self) -> Within<'_> {
        self.added.clear();
        Within { spans: &self.spans, next: 0, reach: 0, last_start: 0, added: &mut self.added }
    }

    /// Adds the containers of the class [`Containers::reader`] walked for.
    fn add(&mut self) {
        if !self.added.is_empty() {
            self.spans.extend_from_slice(&self.added);
            self.spans.sort_unstable();
            self.added.clear();
        }
    }
}

/// [`Containers::reader`]: the spans starting at or before the last match
/// asked about have been passed, `reach` the furthest end among them; the
/// class's own new containers are gathered in `added`.
struct Within<'c> {
    /// The earlier classes' spans, by start.
    spans: &'c [(usize, usize)],
    /// How many of `spans` start at or before `last_start`.
    next: usize,
    /// The furthest end of those.
    reach: usize,
    /// The start of the last match asked about.
    last_start: usize,
    /// This class's containers, in order.
    added: &'c mut Vec<(usize, usize)>,
}

impl Within<'_> {
    /// Whether an earlier class's container holds `span`: one starting at or
    /// before it reaches its end.
    fn holds(&mut self, (start, end): (usize, usize)) -> bool {
        if start < self.last_start {
            // Matches come in order; should one not, the walk starts over.
            (self.next, self.reach) = (0, 0);
        }
        self.last_start = start;
        while let Some(&(_, e)) = self.spans.get(self.next).filter(|&&(s, _)| s <= start) {
            self.reach = self.reach.max(e);
            self.next += 1;
        }
        self.next > 0 && self.reach >= end
    }
}

/// `text` without trailing [`TRAILING`] punctuation; most matches end in a
/// letter or digit, which is tested first.
fn trim_trailing(text: &str) -> &str {
    match text.as_bytes().last() {
        Some(b) if b.is_ascii_alphanumeric() => text,
        _ => text.trim_end_matches(TRAILING),
    }
}

/// The hand-written scan of a class whose pattern is a fixed shape between
/// word boundaries (a UUID, a URL, an IPv4 address, a hash, a ticket, a
/// token) or a path: the spans its regex's `find_iter` gives, without a regex search
/// (≈1,450 instructions on a short chunk). Each follows its pattern's
/// leftmost-first reading, argued at the scan; the proptests compare the
/// spans with the regex's on dense texts.
type Scan = fn(&[u8], &mut dyn FnMut(usize, usize));

fn scan(class: IdClass) -> Option<Scan> {
    match class {
        IdClass::Uuid => Some(scan_uuid),
        IdClass::Url => Some(scan_url),
        IdClass::Ipv4 => Some(scan_ipv4),
        IdClass::Hex => Some(scan_hex),
        IdClass::Ticket => Some(scan_ticket),
        IdClass::Token => Some(scan_token),
        IdClass::Path => Some(scan_path),
        _ => None,
    }
}

/// `(?-u:\w)`: an ASCII letter, digit or `_` (every other byte, UTF-8 ones
/// included, is a non-word byte to `(?-u:\b)`); by [`BYTE_CLASS`].
fn is_word(b: u8) -> bool {
    BYTE_CLASS[usize::from(b)] & WORD != 0
}

/// Whether the byte at `i` is a word byte (`false` past either end).
fn word_at(bytes: &[u8], i: usize) -> bool {
    bytes.get(i).copied().is_some_and(is_word)
}

/// How many bytes from `from` on satisfy `class`.
fn run(bytes: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    bytes.get(from..).map_or(0, |rest| rest.iter().position(|&b| !class(b)).unwrap_or(rest.len()))
}

/// Calls `at` at each start of a word run (a word byte after a non-word
/// one or the text's start) from which a match may begin: every pattern
/// scanned this way opens with `(?-u:\b)` and a word byte, so no match starts
/// elsewhere. `at` returns the match's end, after which the search goes on
/// (as `find_iter` does), or `None`, and the search goes on at the next run.
fn each_word_start(bytes: &[u8], found: &mut dyn FnMut(usize, usize), at: impl Fn(usize) -> Option<usize>) {
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        match at(i) {
            Some(end) => {
                found(i, end);
                i = end;
            }
            None => i += run(bytes, i, is_word),
        }
    }
}

/// `\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`:
/// fixed counts, so a match is the shape at a word start with a non-word
/// byte (or the end) after it.
fn scan_uuid(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    each_word_start(bytes, found, |i| {
        let mut at = i;
        for (n, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
            if n > 0 {
                if bytes.get(at) != Some(&b'-') {
                    return None;
                }
                at += 1;
            }
            if bytes.get(at..at + len)?.iter().all(u8::is_ascii_hexdigit) {
                at += len;
            } else {
                return None;
            }
        }
        (!word_at(bytes, at)).then_some(at)
    });
}

/// `https?://[^\t\n\x0B\x0C\r <>"'`\\]+`: the first `http://` or `https://`
/// followed by an allowed byte, up to the first byte not allowed. The `s` is
/// optional but only `:` may follow `http` without it, so the two never compete.
fn scan_url(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    let allowed = |b: u8| {
        !matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | b'<' | b'>' | b'"' | b'\'' | b'`' | b'\\')
    };
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'h', &bytes[i..]).map(|p| i + p) {
        let rest = bytes[p..].strip_prefix(b"http").unwrap_or_default();
        let scheme = if rest.starts_with(b"s://") {
            8
        } else if rest.starts_with(b"://") {
            7
        } else {
            0
        };
        let len = if scheme > 0 { run(bytes, p + scheme, allowed) } else { 0 };
        if len > 0 {
            found(p, p + scheme + len);
            i = p + scheme + len;
        } else {
            i = p + 1;
        }
    }
}

/// `\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5})?\b`: each octet is a
/// whole run of digits (a `.` follows the first three; the last is followed
/// by `\b`, which a further digit would fail), three at most; the port is
/// taken when its run of 1 to 5 digits ends at a non-word byte, and without
/// it the `:` is the `\b` after the last octet.
fn scan_ipv4(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    each_word_start(bytes, found, |i| {
        let mut at = i;
        for n in 0..4 {
            if n > 0 {
                if bytes.get(at) != Some(&b'.') {
                    return None;
                }
                at += 1;
            }
            let digits = run(bytes, at, |b| b.is_ascii_digit());
            if !(1..=3).contains(&digits) {
                return None;
            }
            at += digits;
        }
        if bytes.get(at) == Some(&b':') {
            let digits = run(bytes, at + 1, |b| b.is_ascii_digit());
            if (1..=5).contains(&digits) && !word_at(bytes, at + 1 + digits) {
                return Some(at + 1 + digits);
            }
        }
        (!word_at(bytes, at)).then_some(at)
    });
}

/// `\b[0-9a-fA-F]{7,}\b`: hex digits are word bytes, so a match is a whole
/// word run, of 7 or more bytes, all hex digits. Each run is read once, for
/// its end and whether every byte is a hex digit (as [`each_word_start`]
/// walks it: a run that is no match is passed whole).
fn scan_hex(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    let mut i = 0;
    while i < bytes.len() {
        // The classes every byte of the run has, and its end.
        let (mut common, mut end) = (HEX, i);
        while let Some(&b) = bytes.get(end) {
            let class = BYTE_CLASS[usize::from(b)];
            if class & WORD == 0 {
                break;
            }
            common &= class;
            end += 1;
        }
        if end == i {
            i += 1;
            continue;
        }
        if end - i >= 7 && common & HEX != 0 {
            found(i, end);
        }
        i = end;
    }
}

/// `\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b`: the head is the whole run of
/// `[A-Z0-9]` from a capital (a `-` must follow it), 2 to 10 bytes; the
/// number the whole run of digits after the `-`, 1 to 7, then a non-word byte.
fn scan_ticket(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    each_word_start(bytes, found, |i| {
        if !bytes[i].is_ascii_uppercase() {
            return None;
        }
        let head = run(bytes, i, |b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if !(2..=10).contains(&head) || bytes.get(i + head) != Some(&b'-') {
            return None;
        }
        let digits = run(bytes, i + head + 1, |b| b.is_ascii_digit());
        let end = i + head + 1 + digits;
        ((1..=7).contains(&digits) && !word_at(bytes, end)).then_some(end)
    });
}

/// `\b[A-Za-z0-9_-]{24,}\b`: `-` is not a word byte, so `\b` falls inside a
/// run of `[A-Za-z0-9_-]` too. In each whole run the match starts at its
/// first boundary and ends at its last boundary (greedy), when they are 24
/// bytes apart or more; a later start would have less room for the same
/// ends, and after the last boundary the run holds no further one.
fn scan_token(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    let token = |b: u8| BYTE_CLASS[usize::from(b)] & TOKEN != 0;
    let boundary = |i: usize| (i > 0 && word_at(bytes, i - 1)) != word_at(bytes, i);
    let mut i = 0;
    while i < bytes.len() {
        let len = run(bytes, i, token);
        if len == 0 {
            i += 1;
            continue;
        }
        let end = i + len;
        if len >= 24 {
            if let Some(start) = (i..end).find(|&p| boundary(p)) {
                if let Some(last) = (start + 24..=end).rev().find(|&e| boundary(e)) {
                    found(start, last);
                }
            }
        }
        i = end;
    }
}

/// A path segment's byte: `[A-Za-z0-9._@+-]` (by [`BYTE_CLASS`]).
fn is_segment(b: u8) -> bool {
    BYTE_CLASS[usize::from(b)] & SEGMENT != 0
}

/// The end of the segments from `at`: each `/` followed by one or more
/// segment bytes (`(?:/[A-Za-z0-9._@+-]+)*`, greedy), and how many there are.
fn segments(bytes: &[u8], mut at: usize) -> (usize, usize) {
    let mut count = 0;
    while bytes.get(at) == Some(&b'/') {
        let len = run(bytes, at + 1, is_segment);
        if len == 0 {
            break;
        }
        at += 1 + len;
        count += 1;
    }
    (at, count)
}

/// The end of the rightmost `\.[A-Za-z0-9]{1,8}\b` in the segments
/// `from..to` (which start with `/`) with a segment byte before its `.`: the
/// letters and digits after the `.` are their whole run (a shorter one would
/// be followed by a word byte, no `\b`), 1 to 8, and a non-word byte follows.
fn last_extension(bytes: &[u8], from: usize, to: usize) -> Option<usize> {
    (from + 2..to).rev().find_map(|dot| {
        if bytes[dot] != b'.' || bytes[dot - 1] == b'/' {
            return None;
        }
        let len = run(bytes, dot + 1, |b| b.is_ascii_alphanumeric());
        ((1..=8).contains(&len) && !word_at(bytes, dot + 1 + len)).then_some(dot + 1 + len)
    })
}

/// The path pattern's three alternatives, tried in order at each start, the
/// leftmost start first (its `find_iter`):
///
/// 1. `(?:~|\.{1,2})?/S+(?:/S+)+/?` (`S` a segment byte, never `/`): the
///    prefix `~`, `..`, `.` or none (in that order, each then needing a `/`),
///    then every segment (two or more), then a `/` if one follows;
/// 2. `(?:~|\.{1,2})/S+`: a prefix, a `/` and one whole segment;
/// 3. `\b[A-Za-z0-9_@+-]S*(?:/S+)+\.[A-Za-z0-9]{1,8}\b`: from a word
///    boundary, the whole run of segment bytes (only a `/` may follow it),
///    then segments, up to the rightmost extension in them (the
///    backtracking tries the last segment first, each from its end). The
///    run, its segments and so that end are the same from every start inside
///    one run, so they are found once per run (a long run of many word
///    boundaries stays linear).
fn scan_path(bytes: &[u8], found: &mut dyn FnMut(usize, usize)) {
    // The run of segment bytes the last third alternative read, and its end.
    let mut known: Option<(usize, Option<usize>)> = None;
    let mut p = 0;
    while p < bytes.len() {
        let b = bytes[p];
        let prefixes: &[usize] = match b {
            b'~' => &[1],
            b'.' if bytes.get(p + 1) == Some(&b'.') => &[2, 1],
            b'.' => &[1],
            b'/' => &[0],
            _ => &[],
        };
        let mut end = None;
        // First alternative: the first prefix followed by a `/` and two segments.
        for &prefix in prefixes {
            let (to, count) = segments(bytes, p + prefix);
            if bytes.get(p + prefix) == Some(&b'/') && count >= 2 {
                end = Some(if bytes.get(to) == Some(&b'/') { to + 1 } else { to });
                break;
            }
        }
        // Second alternative: a prefix (not none), a `/` and a segment.
        if end.is_none() {
            end = prefixes.iter().filter(|&&prefix| prefix > 0).find_map(|&prefix| {
                let len = run(bytes, p + prefix + 1, is_segment);
                (bytes.get(p + prefix) == Some(&b'/') && len > 0).then_some(p + prefix + 1 + len)
            });
        }
        // Third alternative.
        if end.is_none() && is_segment(b) && b != b'.' && (p > 0 && word_at(bytes, p - 1)) != is_word(b) {
            let run_end = p + run(bytes, p, is_segment);
            let ext = match known {
                Some((known_end, ext)) if known_end == run_end => ext,
                _ => {
                    let (to, _) = segments(bytes, run_end);
                    let ext = last_extension(bytes, run_end, to);
                    known = Some((run_end, ext));
                    ext
                }
            };
            end = ext;
        }
        match end {
            Some(e) => {
                found(p, e);
                p = e;
            }
            // Past a run whose third alternative failed: every start inside
            // it fails the third too, and the first two start at a `~` (never
            // in a run) or at a `.` right before a `/` (the run's last two bytes).
            None => match known {
                Some((run_end, None)) if run_end > p + 2 && is_segment(b) => p = run_end - 2,
                _ => p += 1,
            },
        }
    }
}

/// What the ledger keeps for a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretPolicy {
    /// Keep the secret verbatim (it was in the transcript anyway).
    Keep,
    /// Keep only a reference: `secret:<class> in entry <id>`.
    #[default]
    Reference,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn check(text: &str, expect: &[(IdClass, &str)]) {
        let got: Vec<(IdClass, String)> = extract(text).into_iter().map(|i| (i.class, i.text)).collect();
        let want: Vec<(IdClass, String)> = expect.iter().map(|(c, t)| (*c, (*t).to_owned())).collect();
        assert_eq!(got, want, "in {text:?}");
    }

    #[test]
    fn each_class_is_recognised() {
        check(
            "id 3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f.",
            &[(IdClass::Uuid, "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f")],
        );
        check(
            "see https://git.example.com/acme/app/pull/42).",
            &[(IdClass::Url, "https://git.example.com/acme/app/pull/42")],
        );
        check(
            "- fetch https://svc10.example.com/api/v8/items/27167…",
            &[(IdClass::Url, "https://svc10.example.com/api/v8/items/27167")],
        );
        check("ping 10.0.3.17:5432 now", &[(IdClass::Ipv4, "10.0.3.17:5432")]);
        check("connect db.internal:6379", &[(IdClass::HostPort, "db.internal:6379")]);
        check(
            "edit src/config.ts and ~/notes",
            &[(IdClass::Path, "src/config.ts"), (IdClass::Path, "~/notes")],
        );
        check("commit 1a2b3c4 and deadbeef", &[(IdClass::Hex, "1a2b3c4")]);
        check("fixes OPS-1234", &[(IdClass::Ticket, "OPS-1234")]);
        check("mail dev@example.com", &[(IdClass::Email, "dev@example.com")]);
        check("key sk-abcdefghijklmnopqrstuvwx1234", &[(IdClass::Secret, "sk-abcdefghijklmnopqrstuvwx1234")]);
        check("ordinary words only, nothing opaque here", &[]);
    }

    #[test]
    fn whitespace_of_every_kind_ends_an_identifier_and_nothing_else_does() {
        // `\x0B` and `\x0C` end a URL; U+00A0 is not whitespace to the patterns.
        check("x\x0Bhttps://h.example/p\x0Cq", &[(IdClass::Url, "https://h.example/p")]);
        check("see https://a.example/x\u{A0}y.", &[(IdClass::Url, "https://a.example/x\u{A0}y")]);
        check("\rOPS-12\x0B", &[(IdClass::Ticket, "OPS-12")]);
    }

    #[test]
    fn identifiers_without_digits_are_found_by_their_trigger() {
        check("via abcd::ef\x0C", &[(IdClass::Ipv6, "abcd::ef")]);
        check("mail dev@example.com", &[(IdClass::Email, "dev@example.com")]);
        check("edit ~/notes", &[(IdClass::Path, "~/notes")]);
        check(
            "id abcdefab-abcd-abcd-abcd-abcdefabcdef",
            &[(IdClass::Uuid, "abcdefab-abcd-abcd-abcd-abcdefabcdef")],
        );
        check("AKIAABCDEFGHIJKLMNOP", &[(IdClass::Secret, "AKIAABCDEFGHIJKLMNOP")]);
        check("(ghp_abcdefghijklmnopqrst)", &[(IdClass::Secret, "ghp_abcdefghijklmnopqrst")]);
        check("xoxr-abcdefghij", &[(IdClass::Secret, "xoxr-abcdefghij")]);
    }

    #[test]
    fn a_tickets_capital_is_looked_for_in_the_10_bytes_before_its_dash_only() {
        // The longest ticket head: its capital is 10 bytes before the `-`.
        check("ABCDEFGHIJ-1", &[(IdClass::Ticket, "ABCDEFGHIJ-1")]);
        assert!(capital_before(b"A123456789-1", 10));
        // 11 bytes before cannot start a ticket, and is not read: the pass
        // costs the same at every `-` of a long chunk.
        assert!(!capital_before(b"A1234567890-1", 11));
        assert!(!possible("A1234567890-1")[9]);
    }

    #[test]
    fn paths_by_hand() {
        // A prefix, segments and a trailing `/`; one segment after a prefix.
        check("cd ../a/b/ now", &[(IdClass::Path, "../a/b/")]);
        check("cd ./ab", &[(IdClass::Path, "./ab")]);
        // The rightmost extension that a non-word byte follows.
        check("x/y.tar.gz", &[(IdClass::Path, "x/y.tar.gz")]);
        check("a/b.rs/c", &[(IdClass::Path, "a/b.rs")]);
        // `_` after an extension is a word byte: no boundary, no path; a
        // single segment after `/` is no path either.
        check("a/b.c_d", &[]);
        // Not from inside a word: the segments from the `/` on.
        check("foo.bar/baz/qux", &[(IdClass::Path, "/baz/qux")]);
        check("ab/cd.toolongext", &[]);
        // A long chunk with a path start at every word boundary.
        let text = "a-b.c/".repeat(2_000);
        assert_eq!(extract(&text), extract_with(&text, PATTERNS.iter()));
    }

    #[test]
    fn a_chunk_of_many_containers_keeps_nothing_within_them() {
        // 3,000 UUIDs and URLs in one chunk, each holding hashes, a token or
        // a path that must not be kept: as the reference's list of every
        // container decides, and by hand (the two containers, nothing else).
        let unit = "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f,<https://h.example/a/b/c1d2e3f4a5>,";
        let text = unit.repeat(1_500);
        let want = [
            (IdClass::Uuid, "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f"),
            (IdClass::Url, "https://h.example/a/b/c1d2e3f4a5"),
        ];
        check(&text, &want);
        assert_eq!(extract(&text), extract_with(&text, PATTERNS.iter()));
        // Containers of several classes, overlapping and in any order of start.
        let text = "dev@ab-3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f.io,sk-abcdefghijklmnopqrstuvwx1234@x.example"
            .repeat(200);
        assert_eq!(extract(&text), extract_with(&text, PATTERNS.iter()));
    }

    /// The reference's [`accept`], as the grammar states it.
    fn accepted(class: IdClass, text: &str) -> bool {
        let has_digit = text.bytes().any(|b| b.is_ascii_digit());
        let has_alpha = text.bytes().any(|b| b.is_ascii_alphabetic());
        match class {
            IdClass::Hex => has_digit && has_alpha,
            IdClass::Token => has_digit && has_alpha && text.bytes().filter(u8::is_ascii_digit).count() >= 2,
            IdClass::Ipv4 => text.split([':', '.']).take(4).all(|o| o.parse::<u16>().is_ok_and(|n| n <= 255)),
            _ => true,
        }
    }

    /// The reference: the identifiers `patterns` find in the whole text.
    /// Every pattern by its regex, each match looked up in a list of every
    /// container kept before it, and a set to sort and deduplicate.
    fn extract_with<'p>(text: &str, patterns: impl Iterator<Item = &'p Pattern>) -> Vec<Identifier> {
        let mut out = BTreeSet::new();
        let mut containers: Vec<(usize, usize)> = Vec::new();
        for p in patterns {
            for m in p.re.find_iter(text) {
                let found = m.as_str().trim_end_matches(TRAILING);
                let span = (m.start(), m.start() + found.len());
                if containers.iter().any(|&(s, e)| s <= span.0 && span.1 <= e) {
                    continue;
                }
                if found.chars().count() >= 4 && accepted(p.class, found) {
                    if is_container(p.class) {
                        containers.push(span);
                    }
                    out.insert(Identifier { class: p.class, text: found.to_owned() });
                }
            }
        }
        out.into_iter().collect()
    }

    /// The extraction as it was before the byte-pass prefilter: one pass of
    /// all patterns as a set picks the classes to search.
    fn extract_by_set(text: &str) -> Vec<Identifier> {
        static SET: LazyLock<regex::RegexSet> = LazyLock::new(|| {
            regex::RegexSet::new(PATTERNS.iter().map(|p| p.re.as_str())).expect("pattern set")
        });
        extract_with(text, SET.matches(text).into_iter().map(|i| &PATTERNS[i]))
    }

    /// Pieces that make (and nearly make) every class's shape.
    const PIECES: &[&str] = &[
        "sk-",
        "sk-proj-",
        "ghp_",
        "gho_",
        "github_pat_",
        "AKIA",
        "xoxb-",
        "AIza",
        "http://",
        "https://",
        "://",
        ":/",
        "@",
        ".",
        "..",
        ":",
        "::",
        "/",
        "~/",
        "./",
        "-",
        "_",
        "0",
        "7",
        "9",
        "12",
        "255",
        "256",
        "a",
        "f",
        "F",
        "g",
        "Z",
        "OPS",
        "deadbeef",
        "1a2b3c4",
        "3f2c9a1e",
        "0a1b",
        "localhost",
        "example",
        ".com",
        ".rs",
        " ",
        "\n",
        "\t",
        "…",
        "é",
        ")",
        "\"",
        "'",
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJ",
        "0123456789",
        // Appended (the regression seeds index this list).
        "\r",
        "\x0B",
        "\x0C",
        "\u{A0}",
        "A",
        "10.0.3.17",
        "ABCDEFGHIJKLMNOP",
        "xoxa-",
        "xoxp-",
        "xoxr-",
        "ghu_",
        "ghs_",
        "ghr_",
        "gh",
        "github",
        "xox",
        "sk",
        "k-",
        "_pat_",
    ];

    /// One piece of a dense text.
    fn dense_piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            4 => "[a-fA-F]{1,8}",
            1 => "[0-9]{1,3}",
            1 => "[g-zG-Z]{1,3}|AKIA|AIza",
            4 => "[-:./@_~]|::|://|https?://",
            3 => r"[ \t\n\r\x0B\x0C]|\x{A0}|é|…|[)'\x22]",
        ]
    }

    /// One piece of a text of identifier alphabets with long runs: digits,
    /// hex with and without digits, capitals and digits, dashes, word bytes.
    fn run_piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            3 => "[0-9]{1,9}",
            3 => "[0-9a-f]{1,14}|[0-9A-F]{6,10}",
            2 => "[A-Z][A-Z0-9]{0,11}",
            1 => "[A-Za-z0-9_]{10,30}",
            3 => "-{1,2}|[.:_/@]|::|https?://|http|s://",
            1 => "[g-zG-Z]{1,2}|é|…|\\x{A0}|[<>`'\\\\]",
            2 => "[ \n\x0B]",
        ]
    }

    /// One piece of a text of path shapes: segments, `/`, prefixes,
    /// extensions of every length, and the bytes around them.
    fn path_piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            3 => "[a-zA-Z0-9]{1,4}",
            3 => "/|//|~|[.]|[.][.]|~/|[.]/|[.][.]/",
            2 => "[.][a-z0-9]{1,10}",
            1 => "[_@+-]|[.][_]",
            1 => "[ \n:,;()'\x22]|é|…",
        ]
    }

    /// Each scan's spans against its pattern's on the whole text.
    fn scans_match_their_patterns(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        for p in PATTERNS.iter().filter(|p| scan(p.class).is_some()) {
            let (mut scanned, mut searched) = (Vec::new(), Vec::new());
            each_match(p, text, Search::Scan, &mut |s, e| scanned.push((s, e)));
            each_match(p, text, Search::Regex, &mut |s, e| searched.push((s, e)));
            proptest::prop_assert_eq!(scanned, searched, "{:?} in {:?}", p.class, text);
        }
        Ok(())
    }

    /// `extract` against every pattern run on the whole text, and against
    /// the pattern set picking them.
    fn same_as_every_pattern(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let got = extract(text);
        proptest::prop_assert_eq!(&got, &extract_with(text, PATTERNS.iter()), "{:?}", text);
        proptest::prop_assert_eq!(&got, &extract_by_set(text), "{:?}", text);
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Neither the chunks nor the prefilters change a result, on texts
        /// of pieces of every class's shape.
        #[test]
        fn the_prefilter_finds_what_every_pattern_finds(
            picks in proptest::collection::vec(0..PIECES.len(), 0..40),
            noise in r"[ -~\t\n\r\x0B\x0C\x{A0}é…]{0,30}",
        ) {
            let half = picks.len() / 2;
            let piece = |&i: &usize| PIECES[i];
            let text: String =
                picks[..half].iter().map(piece).chain([noise.as_str()]).chain(picks[half..].iter().map(piece)).collect();
            same_as_every_pattern(&text)?;
        }

        /// The same on texts made of identifier alphabets only: hex runs
        /// without digits, digits, separators, capitals, whitespace of every
        /// kind, so that chunks with a single trigger are frequent.
        #[test]
        fn chunks_find_what_every_pattern_finds_in_dense_texts(
            pieces in proptest::collection::vec(dense_piece(), 0..30),
        ) {
            same_as_every_pattern(&pieces.concat())?;
            scans_match_their_patterns(&pieces.concat())?;
        }

        /// The same, and each scan's spans, on texts of long runs (digits,
        /// hex, capitals, dashes): the shapes the scans read by their runs.
        #[test]
        fn scans_find_what_their_patterns_find_in_texts_of_runs(
            pieces in proptest::collection::vec(run_piece(), 0..40),
        ) {
            let text = pieces.concat();
            scans_match_their_patterns(&text)?;
            same_as_every_pattern(&text)?;
        }

        /// Each scan's spans, and `extract`, on texts of path shapes.
        #[test]
        fn scans_find_what_their_patterns_find_in_paths(
            pieces in proptest::collection::vec(path_piece(), 0..30),
        ) {
            let text = pieces.concat();
            scans_match_their_patterns(&text)?;
            same_as_every_pattern(&text)?;
        }

        /// Each scan's spans on texts of pieces of every class's shape.
        #[test]
        fn scans_find_what_their_patterns_find(
            picks in proptest::collection::vec(0..PIECES.len(), 0..40),
            noise in r"[ -~\t\n\r\x0B\x0C\x{A0}é…]{0,30}",
        ) {
            let half = picks.len() / 2;
            let piece = |&i: &usize| PIECES[i];
            let text: String =
                picks[..half].iter().map(piece).chain([noise.as_str()]).chain(picks[half..].iter().map(piece)).collect();
            scans_match_their_patterns(&text)?;
        }

        /// Texts searched one by one find what their join by `\n` holds.
        #[test]
        fn texts_searched_apart_find_what_their_join_holds(
            texts in proptest::collection::vec(proptest::collection::vec(run_piece(), 0..8), 0..5),
        ) {
            let texts: Vec<String> = texts.iter().map(|t| t.concat()).collect();
            let joined = texts.join("\n");
            proptest::prop_assert_eq!(extract_all(texts.iter().map(String::as_str)), extract_with(&joined, PATTERNS.iter()));
        }

        /// The chunk pass by words against the byte pass at every chunk's
        /// start, on texts of every kind of piece and of any bytes.
        #[test]
        fn chunks_by_words_are_chunks_by_bytes(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![dense_piece(), run_piece(), path_piece(), proptest::strategy::Strategy::prop_map(proptest::sample::select(PIECES), str::to_owned)],
                0..40,
            ),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
        ) {
            let text = pieces.concat();
            for bytes in [text.as_bytes(), raw.as_slice()] {
                chunk_pass_by_words_and_bytes_agree(bytes)?;
            }
        }

        /// The trigger and a chunk's start found eight bytes at a time
        /// against a byte-by-byte search from every position.
        #[test]
        fn triggers_and_chunk_starts_by_words(
            pieces in proptest::collection::vec(run_piece(), 0..30),
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
        ) {
            let text = pieces.concat();
            for bytes in [text.as_bytes(), raw.as_slice()] {
                for from in 0..=bytes.len() {
                    let want = bytes[from..].iter().position(|&b| trigger(b) != 0).map(|p| from + p);
                    proptest::prop_assert_eq!(next_trigger(bytes, from), want, "from {} in {:?}", from, bytes);
                    for t in from..=bytes.len() {
                        let want = bytes[from..t].iter().rposition(|&b| is_space(b)).map_or(from, |p| from + p + 1);
                        proptest::prop_assert_eq!(chunk_start(bytes, from, t), want, "{}..{} in {:?}", from, t, bytes);
                    }
                }
            }
        }

        /// Runs of set bits found by shifting, against a count bit by bit.
        #[test]
        fn runs_of_bits_by_shifting(bits in proptest::prelude::any::<u64>(), sparse in proptest::prelude::any::<u64>(), n in 1u32..30) {
            for bits in [bits, bits | sparse, bits & sparse, !(bits & sparse)] {
                let (mut longest, mut run) = (0, 0);
                for k in 0..64 {
                    run = if bits >> k & 1 == 1 { run + 1 } else { 0 };
                    longest = longest.max(run);
                }
                proptest::prop_assert_eq!(has_run(bits, n), longest >= n, "{:064b} {}", bits, n);
            }
        }
    }

    /// [`chunk_by_words`] against [`chunk_from`] at each chunk start of
    /// `bytes` (its start and every byte after whitespace): the same classes
    /// and end for a chunk shorter than 64 bytes, `None` for a longer one.
    fn chunk_pass_by_words_and_bytes_agree(bytes: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
        for start in (0..=bytes.len()).filter(|&s| s == 0 || is_space(bytes[s - 1])) {
            let by_bytes = chunk_from(bytes, start);
            match chunk_by_words(bytes, start) {
                Some(by_words) => {
                    proptest::prop_assert_eq!(by_words, by_bytes, "at {} of {:?}", start, bytes)
                }
                None => proptest::prop_assert!(by_bytes.1 - start >= 64, "at {} of {:?}", start, bytes),
            }
        }
        Ok(())
    }

    #[test]
    fn every_byte_in_every_lane() {
        // Each byte at each lane, among neighbours of every class (and the
        // UTF-8 and 0xFF bytes whose high bit the lanes clear first).
        for neighbour in [0u8, b' ', b'a', b'Z', b'9', b'-', b':', 0x7F, 0x80, 0xFF] {
            for b in 0..=255u8 {
                for k in 0..8 {
                    let mut bytes = [neighbour; 8];
                    bytes[k] = b;
                    let word = u64::from_le_bytes(bytes);
                    let class = BYTE_CLASS[usize::from(b)];
                    let lanes = lanes(word);
                    let bit = |lanes: u64| lane_bits(lanes) >> k & 1 == 1;
                    let at = format!("{b:#04x} at lane {k} among {neighbour:#04x}");
                    assert_eq!(bit(lanes.hex), class & HEX != 0, "hex: {at}");
                    assert_eq!(bit(lanes.token), class & TOKEN != 0, "token: {at}");
                    assert_eq!(bit(lanes.mark), class & MARK != 0, "mark: {at}");
                    assert_eq!(bit(lanes.space), class & SPACE != 0, "space: {at}");
                    assert_eq!(bit(trigger_lanes(word)), trigger(b) != 0, "trigger: {at}");
                    assert_eq!(bit(space_lanes(word)), is_space(b), "space: {at}");
                }
            }
        }
        // The word bytes of `(?-u:\w)`, and a path segment's.
        for b in 0..=255u8 {
            assert_eq!(is_word(b), b.is_ascii_alphanumeric() || b == b'_', "{b:#04x}");
            let segment = b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'+' | b'-');
            assert_eq!(is_segment(b), segment, "{b:#04x}");
        }
        // The lanes' bits gathered in order.
        assert_eq!(lane_bits(LANES_HI), 0xFF);
        assert_eq!(lane_bits(0x0080_0000_0000_8000), 0b0100_0010);
        // Past the text's end, spaces.
        assert_eq!(word(b"ab", 0), u64::from_le_bytes(*b"ab      "));
        assert_eq!(word(b"ab", 5), u64::from_le_bytes(*b"        "));
    }

    #[test]
    fn chunks_by_words_by_hand() {
        let may = |bytes: &[u8]| chunk_by_words(bytes, 0).map(|(may, end)| (may.map(u8::from), end));
        // A UUID's first group and a hash; 63 bytes is the longest chunk.
        assert_eq!(may(b"3f2c9a1e-6b7d x"), Some(([0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0], 13)));
        assert_eq!(may(b"2c9a1e-6b7d"), Some(([0; 11], 11)));
        let long = "g".repeat(62) + ":";
        assert_eq!(may(long.as_bytes()), Some(([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 63)));
        assert_eq!(may(format!("{long}1").as_bytes()), None);
        // A secret's heads, and shapes that only look like one.
        assert_eq!(may(b"sk-abcdefghijklmnopq").map(|m| m.0[0]), Some(1));
        assert_eq!(may(b"xoxp-abcdefghijklmnopq").map(|m| m.0[0]), Some(1));
        assert_eq!(may(b"ghs_abcdefghijklmnopq").map(|m| m.0[0]), Some(1));
        assert_eq!(may(b"github_pat_abcdefghij").map(|m| m.0[0]), Some(1));
        assert_eq!(may(b"ska-abcdefghijklmnopq").map(|m| m.0[0]), Some(0));
        assert_eq!(may(b"gha_abcdefghijklmnopq").map(|m| m.0[0]), Some(0));
        assert_eq!(may(b"old_string_abcdefghij").map(|m| m.0[0]), Some(0));
    }
}

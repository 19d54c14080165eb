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
//! | `secret` | API-key shapes: `sk-…`, `ghp_…`/`gho_…`/`github_pat_…`, `AKIA…`, `xox[abpr]-…`, `AIza…` |
//!
//! Secrets are a class of their own: a [`SecretPolicy`] decides whether the
//! ledger keeps them verbatim or only a reference to the entry holding them.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};

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

/// All patterns at once: one pass tells which classes occur at all, so a text
/// is searched again only for those (most texts hold few identifiers or none).
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(PATTERNS.iter().map(|p| p.re.as_str()))
        .unwrap_or_else(|e| panic!("identifier pattern set: {e}"))
});

/// Punctuation that ends a sentence rather than an identifier; `…` is where
/// a clipped text (the extractive summariser's) stops, so an identifier it
/// follows stays the identifier.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"', '…'];

fn accept(class: IdClass, text: &str) -> bool {
    let has_digit = text.bytes().any(|b| b.is_ascii_digit());
    let has_alpha = text.bytes().any(|b| b.is_ascii_alphabetic());
    match class {
        IdClass::Hex => has_digit && has_alpha,
        IdClass::Token => has_digit && has_alpha && text.bytes().filter(u8::is_ascii_digit).count() >= 2,
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
pub fn extract(text: &str) -> BTreeSet<Identifier> {
    let mut out = BTreeSet::new();
    let mut containers: Vec<(usize, usize)> = Vec::new();
    let present = ANY.matches(text);
    for p in present.iter().map(|i| &PATTERNS[i]) {
        for m in p.re.find_iter(text) {
            let found = m.as_str().trim_end_matches(TRAILING);
            let span = (m.start(), m.start() + found.len());
            if containers.iter().any(|&(s, e)| s <= span.0 && span.1 <= e) {
                continue;
            }
            if found.chars().count() >= 4 && accept(p.class, found) {
                if is_container(p.class) {
                    containers.push(span);
                }
                out.insert(Identifier { class: p.class, text: found.to_owned() });
            }
        }
    }
    out
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
}

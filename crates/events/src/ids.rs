//! The identifiers sessionlog mints: 8-hex entry ids in Pi's shape, checked
//! for collisions within a transcript, and UUID-shaped session ids.
//!
//! Pi draws its ids at random; ours are derived from a seed the writer
//! composes (session, parent, time, content), so the same write on the same
//! log always mints the same id and a replay reproduces it byte for byte.
//! Randomness never enters: the caller's seed is the only input.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use crate::Transcript;

pub use crate::migrate::seq_id;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An 8-lowercase-hex entry id for `seed` that `taken` does not hold: the
/// first 4 bytes of `sha256("{seed}\n{n}")` for the first free `n`.
pub fn entry_id(seed: &str, taken: impl Fn(&str) -> bool) -> String {
    (0u32..)
        .map(|n| hex(&Sha256::digest(format!("{seed}\n{n}").as_bytes())[..4]))
        .find(|id| !taken(id))
        .unwrap_or_default()
}

/// An entry id for `seed` that no entry of `transcript` has.
pub fn fresh_entry_id(transcript: &Transcript, seed: &str) -> String {
    let taken: HashSet<&str> = transcript.entries.iter().filter_map(|e| e.id.as_deref()).collect();
    entry_id(seed, |id| taken.contains(id))
}

/// True for an id in Pi's shape: 8 lowercase hexadecimal digits.
pub fn is_entry_id(id: &str) -> bool {
    id.len() == 8 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A session id derived from `seed`: UUID-shaped with the version-4 layout
/// (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`), from `sha256(seed)`.
pub fn session_id(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_skip_taken_ones_and_repeat_for_the_same_seed() {
        let first = entry_id("s\nparent", |_| false);
        assert!(is_entry_id(&first), "{first}");
        assert_eq!(entry_id("s\nparent", |_| false), first);
        let second = entry_id("s\nparent", |id| id == first);
        assert!(is_entry_id(&second) && second != first);
        assert!(!is_entry_id("ABCDEF12") && !is_entry_id("abc"));
    }

    #[test]
    fn session_ids_have_the_uuid_v4_layout() {
        let id = session_id("agent:main:main\n1\n0");
        // Independent check of the layout: 8-4-4-4-12, version nibble 4, variant 8..b.
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_eq!(session_id("agent:main:main\n1\n0"), id);
        assert_ne!(session_id("agent:main:main\n1\n1"), id);
    }
}

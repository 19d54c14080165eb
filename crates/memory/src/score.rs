//! Scoring as OpenClaw's builtin memory search does it (spec §3): BM25 rank
//! mapping, weighted fusion, the candidate pool, MMR re-ranking and temporal
//! decay. Pure functions over numbers and snippets.

use std::collections::{BTreeSet, HashMap};

/// Every search constant, with OpenClaw's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSettings {
    /// Results returned (default 6).
    pub max_results: usize,
    /// Score floor (default 0.35).
    pub min_score: f64,
    /// Vector weight before normalisation (default 0.7).
    pub vector_weight: f64,
    /// Text weight before normalisation (default 0.3).
    pub text_weight: f64,
    /// Candidate multiplier (default 4, clamped 1..=20).
    pub candidate_multiplier: usize,
    /// MMR re-ranking (default off).
    pub mmr: bool,
    /// MMR λ (default 0.7).
    pub mmr_lambda: f64,
    /// Temporal decay (default off).
    pub decay: bool,
    /// Decay half-life in days (default 30, at least 1).
    pub half_life_days: f64,
    /// Snippet length in characters (default 700).
    pub snippet_chars: usize,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            max_results: 6,
            min_score: 0.35,
            vector_weight: 0.7,
            text_weight: 0.3,
            candidate_multiplier: 4,
            mmr: false,
            mmr_lambda: 0.7,
            decay: false,
            half_life_days: 30.0,
            snippet_chars: 700,
        }
    }
}

impl SearchSettings {
    /// The weights clamped to 0..=1 and renormalised to sum 1 (0.7/0.3 when both are 0).
    pub fn weights(&self) -> (f64, f64) {
        let v = clamp01(self.vector_weight);
        let t = clamp01(self.text_weight);
        if v + t <= 0.0 {
            return (0.7, 0.3);
        }
        (v / (v + t), t / (v + t))
    }

    /// The candidate pool: `min(200, max(1, floor(maxResults × multiplier)))`.
    pub fn candidates(&self) -> usize {
        let m = self.candidate_multiplier.clamp(1, 20);
        (self.max_results * m).clamp(1, 200)
    }

    /// The pool each leg actually fetches: the candidate pool, at least 50,
    /// so that the first results do not depend on `max_results` (openclaw#134604).
    pub fn leg_limit(&self) -> usize {
        self.candidates().max(50)
    }

    /// The clamped score floor.
    pub fn min_score(&self) -> f64 {
        clamp01(self.min_score)
    }
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Maps an FTS5 `bm25()` rank (negative, more negative is better) to a text
/// score in [0, 1): `r / (1 + r)` with `r = −rank`; a rank ≥ 0 gives
/// `1 / (1 + rank)`; a non-finite rank gives `1/1000`.
pub fn bm25_score(rank: f64) -> f64 {
    if !rank.is_finite() {
        return 1.0 / 1000.0;
    }
    if rank < 0.0 {
        let r = -rank;
        r / (1.0 + r)
    } else {
        1.0 / (1.0 + rank)
    }
}

/// Cosine similarity over the shorter length; 0 when a norm is 0.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for i in 0..n {
        let (x, y) = (f64::from(a[i]), f64::from(b[i]));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// One candidate after fusion.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    /// Chunk id.
    pub id: String,
    /// Vector similarity (0 when only the keyword leg found it).
    pub vector_score: f64,
    /// Mapped BM25 score (0 when only the vector leg found it).
    pub text_score: f64,
    /// `vectorWeight·vectorScore + textWeight·textScore` (after decay, if any).
    pub score: f64,
}

/// Fuses the two legs by chunk id: vector rows first with text score 0, then
/// keyword rows fill in their text score or join with vector score 0.
/// Weights are normalised by [`SearchSettings::weights`].
pub fn fuse(vector: &[(String, f64)], keyword: &[(String, f64)], weights: (f64, f64)) -> Vec<Fused> {
    let mut out: Vec<Fused> = Vec::with_capacity(vector.len() + keyword.len());
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (id, v) in vector {
        if at.contains_key(id.as_str()) {
            continue;
        }
        at.insert(id, out.len());
        out.push(Fused { id: id.clone(), vector_score: *v, text_score: 0.0, score: 0.0 });
    }
    for (id, t) in keyword {
        match at.get(id.as_str()) {
            Some(&i) => out[i].text_score = out[i].text_score.max(*t),
            None => {
                at.insert(id, out.len());
                out.push(Fused { id: id.clone(), vector_score: 0.0, text_score: *t, score: 0.0 });
            }
        }
    }
    for f in &mut out {
        f.score = weights.0 * f.vector_score + weights.1 * f.text_score;
    }
    out
}

/// Sorts by score, highest first (ties by id, so the order is total).
pub fn sort_by_score(items: &mut [Fused]) {
    items.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
}

/// The decay multiplier `exp(−ln2 / halfLife · ageDays)`, age clamped ≥ 0.
pub fn decay_multiplier(age_ms: i64, half_life_days: f64) -> f64 {
    let half_life = half_life_days.floor().max(1.0);
    let age_days = (age_ms.max(0) as f64) / 86_400_000.0;
    (-std::f64::consts::LN_2 / half_life * age_days).exp()
}

/// The date (ms since the epoch, UTC midnight) of a dated memory file:
/// `memory/[dir/]*YYYY-MM-DD.md` (invalid dates give `None`).
pub fn dated_path_ms(path: &str) -> Option<i64> {
    let name = path.rsplit('/').next()?;
    let in_memory = path.starts_with("memory/") || path.contains("/memory/");
    if !in_memory {
        return None;
    }
    let stem = name.strip_suffix(".md")?;
    let b = stem.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |s: &str| -> Option<i64> {
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (y, m, d) = (num(&stem[0..4])?, num(&stem[5..7])?, num(&stem[8..10])?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&m) || d < 1 || d > days_in[(m - 1) as usize] {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400_000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// True for files that never decay: `MEMORY.md`, `memory.md` and undated
/// files under `memory/` (source `memory` only).
pub fn is_evergreen(source: &str, path: &str) -> bool {
    source == "memory" && dated_path_ms(path).is_none()
}

/// The lowercase word set MMR compares snippets with: runs of letters,
/// marks, digits and `_`.
pub fn mmr_tokens(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' || is_mark(c) {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.insert(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.insert(cur);
    }
    out
}

fn is_mark(c: char) -> bool {
    // Combining marks of the common blocks (no Unicode tables in std).
    matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}' | '\u{3099}'..='\u{309A}')
}

/// Jaccard similarity; both empty → 1, one empty → 0.
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let inter = a.intersection(b).count() as f64;
    let union = (a.len() + b.len()) as f64 - inter;
    inter / union
}

/// MMR re-ranking: returns the indices of `scores` in the greedy order that
/// maximises `λ·rel − (1−λ)·maxSim(selected)`, where `rel` is the min–max
/// normalised score (all equal → 1); ties go to the higher original score,
/// then to the earlier item.
pub fn mmr_order(scores: &[f64], snippets: &[&str], lambda: f64) -> Vec<usize> {
    let n = scores.len();
    let lambda = clamp01(lambda);
    let tokens: Vec<_> = snippets.iter().map(|s| mmr_tokens(s)).collect();
    let (lo, hi) = scores.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &s| (l.min(s), h.max(s)));
    let rel = |s: f64| if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
    let mut remaining: Vec<usize> = (0..n).collect();
    let mut selected: Vec<usize> = Vec::with_capacity(n);
    while !remaining.is_empty() {
        let mut best: Option<(usize, f64)> = None;
        for (pos, &i) in remaining.iter().enumerate() {
            let max_sim = selected.iter().map(|&j| jaccard(&tokens[i], &tokens[j])).fold(0.0, f64::max);
            let value = lambda * rel(scores[i]) - (1.0 - lambda) * max_sim;
            let better = match best {
                None => true,
                Some((bp, bv)) => {
                    let b = remaining[bp];
                    value > bv || (value == bv && scores[i] > scores[b])
                }
            };
            if better {
                best = Some((pos, value));
            }
        }
        let (pos, _) = best.expect("remaining is not empty");
        selected.push(remaining.remove(pos));
    }
    selected
}

/// Truncates a snippet to `max` characters.
pub fn snippet(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn bm25_mapping_by_hand() {
        // rank −3 → r = 3 → 3 / 4.
        assert!(close(bm25_score(-3.0), 0.75));
        // rank −0.5 → 0.5 / 1.5 = 1/3.
        assert!(close(bm25_score(-0.5), 1.0 / 3.0));
        // rank 1 (≥ 0) → 1 / 2; rank 0 → 1.
        assert!(close(bm25_score(1.0), 0.5));
        assert!(close(bm25_score(0.0), 1.0));
        assert!(close(bm25_score(f64::NAN), 0.001));
        assert!(close(bm25_score(f64::NEG_INFINITY), 0.001));
        // More negative ranks score higher.
        assert!(bm25_score(-10.0) > bm25_score(-2.0));
    }

    #[test]
    fn fusion_by_hand() {
        let s = SearchSettings::default();
        let w = s.weights();
        assert!(close(w.0, 0.7) && close(w.1, 0.3));
        let vector = vec![("a".to_owned(), 0.8), ("b".to_owned(), 0.5)];
        let keyword = vec![("b".to_owned(), 0.6), ("c".to_owned(), 0.9)];
        let f = fuse(&vector, &keyword, w);
        let got: Vec<_> = f.iter().map(|x| (x.id.as_str(), x.score)).collect();
        // a: 0.7·0.8 = 0.56; b: 0.7·0.5 + 0.3·0.6 = 0.35 + 0.18 = 0.53; c: 0.3·0.9 = 0.27.
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, "a");
        assert!(close(got[0].1, 0.56));
        assert_eq!(got[1].0, "b");
        assert!(close(got[1].1, 0.53));
        assert_eq!(got[2].0, "c");
        assert!(close(got[2].1, 0.27));
        // Weights are renormalised: 0.6 / 0.6 → 0.5 / 0.5; 0 / 0 → 0.7 / 0.3; clamped above 1.
        let w = SearchSettings { vector_weight: 0.6, text_weight: 0.6, ..s.clone() }.weights();
        assert!(close(w.0, 0.5) && close(w.1, 0.5));
        let w = SearchSettings { vector_weight: 0.0, text_weight: 0.0, ..s.clone() }.weights();
        assert!(close(w.0, 0.7) && close(w.1, 0.3));
        let w = SearchSettings { vector_weight: 3.0, text_weight: 0.0, ..s }.weights();
        assert!(close(w.0, 1.0) && close(w.1, 0.0));
    }

    #[test]
    fn candidate_pool_by_hand() {
        let s = |max_results, candidate_multiplier| SearchSettings {
            max_results,
            candidate_multiplier,
            ..Default::default()
        };
        assert_eq!(s(6, 4).candidates(), 24);
        assert_eq!(s(100, 4).candidates(), 200);
        assert_eq!(s(6, 50).candidates(), 120); // multiplier clamped to 20
        assert_eq!(s(0, 4).candidates(), 1);
        assert_eq!(s(6, 4).leg_limit(), 50);
    }

    #[test]
    fn decay_by_hand() {
        let day = 86_400_000;
        // Age 0 → 1; one half-life → 1/2; two → 1/4; 15 days at 30 → 2^(−1/2).
        assert!(close(decay_multiplier(0, 30.0), 1.0));
        assert!(close(decay_multiplier(30 * day, 30.0), 0.5));
        assert!(close(decay_multiplier(60 * day, 30.0), 0.25));
        assert!(close(decay_multiplier(15 * day, 30.0), 1.0 / 2f64.sqrt()));
        // Future dates do not boost; half-life floored, at least 1.
        assert!(close(decay_multiplier(-5 * day, 30.0), 1.0));
        assert!(close(decay_multiplier(day, 0.2), 0.5));
        assert!(close(decay_multiplier(30 * day, 30.9), 0.5));
    }

    #[test]
    fn dated_paths() {
        // 2026-12-01 is 20788 days after 1970-01-01 (checked with `date -d 2026-12-01 +%s` / 86400).
        assert_eq!(dated_path_ms("memory/2026-12-01.md"), Some(20_788 * 86_400_000));
        assert_eq!(dated_path_ms("memory/notes/2024-02-29.md"), Some(19_782 * 86_400_000));
        assert_eq!(dated_path_ms("memory/2023-02-29.md"), None);
        assert_eq!(dated_path_ms("memory/2026-13-01.md"), None);
        assert_eq!(dated_path_ms("notes/2026-12-01.md"), None);
        assert_eq!(dated_path_ms("memory/projects.md"), None);
        assert!(is_evergreen("memory", "MEMORY.md"));
        assert!(is_evergreen("memory", "memory/projects.md"));
        assert!(!is_evergreen("memory", "memory/2026-12-01.md"));
        assert!(!is_evergreen("sessions", "sessions/a.jsonl"));
    }

    #[test]
    fn mmr_by_hand() {
        // Scores 1.0, 0.9, 0.5 → rel 1, 0.8, 0. Snippets: a and b are identical
        // ({x, y}), c is disjoint ({z}). λ = 0.7.
        // Step 1: a = 0.7·1 = 0.7 (b 0.56, c 0) → a.
        // Step 2: b = 0.7·0.8 − 0.3·1 = 0.26; c = 0 − 0 = 0 → b.
        // With λ = 0.5: b = 0.4 − 0.5 = −0.1; c = 0 → c before b.
        let scores = [1.0, 0.9, 0.5];
        let snippets = ["x y", "Y X", "z"];
        assert_eq!(mmr_order(&scores, &snippets, 0.7), vec![0, 1, 2]);
        assert_eq!(mmr_order(&scores, &snippets, 0.5), vec![0, 2, 1]);
        // λ = 1 → plain order by score.
        assert_eq!(mmr_order(&[0.2, 0.9, 0.5], &["a", "a", "a"], 1.0), vec![1, 2, 0]);
        // All scores equal → rel 1 each; ties go to the earlier item, then diversity:
        // step 2: b = 0.7 − 0.3·1 = 0.4, c = 0.7 − 0 = 0.7 → c.
        assert_eq!(mmr_order(&[0.5, 0.5, 0.5], &snippets, 0.7), vec![0, 2, 1]);
    }

    #[test]
    fn jaccard_by_hand() {
        let a = mmr_tokens("Postgres billing, café");
        let b = mmr_tokens("postgres CAFÉ invoices");
        // {postgres, billing, café} vs {postgres, café, invoices}: 2 / 4.
        assert!(close(jaccard(&a, &b), 0.5));
        assert!(close(jaccard(&mmr_tokens(""), &mmr_tokens("...")), 1.0));
        assert!(close(jaccard(&mmr_tokens(""), &b), 0.0));
    }
}

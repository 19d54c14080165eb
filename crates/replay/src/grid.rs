//! Policy grids: the variants a sweep replays, from lists of knob values
//! (command-line flags, a sweep spec file, or both), policy files, and
//! always the OpenClaw and Pi defaults as reference rows.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sessionlog_compaction::{Policy, Trigger};
use sessionlog_tokens::Tokenizer;

use crate::sweep::Variant;
use crate::Measure;

/// Why a grid, a spec or a policy file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    /// A file could not be read.
    #[error("{}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A spec or policy file is not what it should be.
    #[error("{}: not a valid {what}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `sweep spec` or `policy`.
        what: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// A value of a list.
    #[error("{0}")]
    Value(String),
}

fn read(path: &Path) -> Result<String, GridError> {
    std::fs::read_to_string(path)
        .map_err(|e| GridError::Read { path: path.to_owned(), reason: e.to_string() })
}

/// A compaction policy from a TOML file (the fields of [`Policy`], camelCase;
/// see `replay/policies/`).
pub fn load_policy(path: &Path) -> Result<Policy, GridError> {
    toml::from_str(&read(path)?).map_err(|e| GridError::Invalid {
        path: path.to_owned(),
        what: "policy",
        reason: e.to_string(),
    })
}

/// A sweep spec file (`replay/sweeps/*.toml`): the corpus and the grid.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Spec {
    /// Transcripts and folders, relative to the spec's folder.
    pub corpus: Vec<PathBuf>,
    /// Context windows.
    pub context_window: Vec<u64>,
    /// Reserve tokens.
    pub reserve: Vec<u64>,
    /// Recent tokens kept.
    pub keep_recent: Vec<u64>,
    /// Chunk ratios (`auto` for OpenClaw's adaptive ratio).
    pub chunk_ratio: Vec<String>,
    /// Triggers.
    pub trigger: Vec<Trigger>,
    /// Token counters by name.
    pub tokenizer: Vec<String>,
    /// User turns kept verbatim.
    pub preserve_turns: Vec<u32>,
    /// Reserve floors (OpenClaw's `reserveTokensFloor`; 0 = Pi's behaviour).
    pub reserve_floor: Vec<u64>,
    /// OpenClaw's fix for compaction loops, off and/or on.
    pub skip_noop_compactions: Vec<bool>,
    /// Observation masking: tool results masked after this many turns (0 = off).
    pub mask_tool_results_after_turns: Vec<u32>,
    /// Policy files, relative to the spec's folder.
    pub policy: Vec<PathBuf>,
    /// Sweep archived transcripts too.
    pub include_archived: bool,
}

impl Spec {
    /// Reads a spec file.
    pub fn read(path: &Path) -> Result<Spec, GridError> {
        toml::from_str(&read(path)?).map_err(|e| GridError::Invalid {
            path: path.to_owned(),
            what: "sweep spec",
            reason: e.to_string(),
        })
    }

    /// The spec's lists as a grid.
    pub fn grid(&self) -> Result<Grid, GridError> {
        let tokenizer =
            self.tokenizer.iter().map(|t| t.parse().map_err(GridError::Value)).collect::<Result<_, _>>()?;
        Ok(Grid {
            context_window: self.context_window.clone(),
            reserve: self.reserve.clone(),
            keep_recent: self.keep_recent.clone(),
            chunk_ratio: self.chunk_ratio.clone(),
            trigger: self.trigger.clone(),
            tokenizer,
            preserve_turns: self.preserve_turns.clone(),
            reserve_floor: self.reserve_floor.clone(),
            skip_noop_compactions: self.skip_noop_compactions.clone(),
            mask_after: self.mask_tool_results_after_turns.clone(),
        })
    }
}

/// A sweep's inputs: transcripts and folders, and at most one spec file
/// (`*.toml`) whose corpus (relative to it) joins them.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The spec (empty without one).
    pub spec: Spec,
    /// The spec's folder (its corpus and policy files are relative to it).
    pub spec_dir: PathBuf,
    /// Transcripts and folders to sweep.
    pub corpus: Vec<PathBuf>,
}

impl Inputs {
    /// Sorts `paths` into a spec and the corpus.
    pub fn read(paths: &[PathBuf]) -> Result<Inputs, GridError> {
        let mut inputs = Inputs { spec_dir: PathBuf::from("."), ..Inputs::default() };
        for p in paths {
            if p.extension().is_some_and(|e| e == "toml") {
                inputs.spec = Spec::read(p)?;
                inputs.spec_dir = p.parent().map(Path::to_owned).unwrap_or_default();
                inputs.corpus.extend(inputs.spec.corpus.iter().map(|c| inputs.spec_dir.join(c)));
            } else {
                inputs.corpus.push(p.clone());
            }
        }
        Ok(inputs)
    }

    /// The spec's policy files, as paths.
    pub fn policy_files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.spec.policy.iter().map(|p| self.spec_dir.join(p))
    }
}

/// The lists a grid of policies is the product of; an empty list stands for
/// OpenClaw's default value alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grid {
    /// Context windows.
    pub context_window: Vec<u64>,
    /// Reserve tokens.
    pub reserve: Vec<u64>,
    /// Recent tokens kept.
    pub keep_recent: Vec<u64>,
    /// Chunk ratios: numbers, or `auto` for OpenClaw's adaptive ratio.
    pub chunk_ratio: Vec<String>,
    /// Triggers.
    pub trigger: Vec<Trigger>,
    /// Token counters.
    pub tokenizer: Vec<Tokenizer>,
    /// User turns kept verbatim (named in the variant only when swept).
    pub preserve_turns: Vec<u32>,
    /// Reserve floors (named in the variant only when swept).
    pub reserve_floor: Vec<u64>,
    /// OpenClaw's no-op compaction fix off/on (named only when swept).
    pub skip_noop_compactions: Vec<bool>,
    /// Observation masking after this many turns, 0 = off (named `-m<N>` only when swept).
    pub mask_after: Vec<u32>,
}

fn or<T>(a: Vec<T>, b: Vec<T>) -> Vec<T> {
    if a.is_empty() {
        b
    } else {
        a
    }
}

fn or_default<T: Clone>(list: &[T], default: T) -> Vec<T> {
    if list.is_empty() {
        vec![default]
    } else {
        list.to_vec()
    }
}

impl Grid {
    /// Each list of `self`, or `other`'s where `self`'s is empty (flags over a spec).
    pub fn or(self, other: Grid) -> Grid {
        Grid {
            context_window: or(self.context_window, other.context_window),
            reserve: or(self.reserve, other.reserve),
            keep_recent: or(self.keep_recent, other.keep_recent),
            chunk_ratio: or(self.chunk_ratio, other.chunk_ratio),
            trigger: or(self.trigger, other.trigger),
            tokenizer: or(self.tokenizer, other.tokenizer),
            preserve_turns: or(self.preserve_turns, other.preserve_turns),
            reserve_floor: or(self.reserve_floor, other.reserve_floor),
            skip_noop_compactions: or(self.skip_noop_compactions, other.skip_noop_compactions),
            mask_after: or(self.mask_after, other.mask_after),
        }
    }

    fn is_empty(&self) -> bool {
        self == &Grid::default()
    }

    /// The variants to replay: OpenClaw's and Pi's defaults, then `policies`
    /// (from files), then — when any list is given — the product of the lists
    /// over OpenClaw's defaults, named
    /// `w<W>-r<R>-k<K>-c<C>-<trigger>-<tokenizer>[-p<P>][-f<F>][-n<0|1>][-m<M>]`;
    /// a name seen before is not repeated.
    pub fn variants(&self, policies: Vec<Policy>, measure: Measure) -> Result<Vec<Variant>, GridError> {
        let mut ratios: Vec<Option<f64>> = Vec::new();
        for r in &self.chunk_ratio {
            ratios.push(match r.as_str() {
                "auto" => None,
                text => {
                    Some(text.parse().map_err(|e| GridError::Value(format!("--chunk-ratio {text}: {e}")))?)
                }
            });
        }
        let mut out: Vec<Variant> = Vec::new();
        let mut push = |policy: Policy, tokenizer: Tokenizer| {
            if !out.iter().any(|v| v.policy.name == policy.name) {
                out.push(Variant { policy, tokenizer, measure });
            }
        };
        push(Policy::openclaw(), Tokenizer::Pi);
        push(Policy::pi(), Tokenizer::Pi);
        for policy in policies {
            push(policy, Tokenizer::Pi);
        }
        if self.is_empty() {
            return Ok(out);
        }
        let base = Policy::openclaw();
        let turns: Vec<Option<u32>> =
            or_default(&self.preserve_turns.iter().copied().map(Some).collect::<Vec<_>>(), None);
        let ratios = or_default(&ratios, None);
        let floors: Vec<Option<u64>> =
            or_default(&self.reserve_floor.iter().copied().map(Some).collect::<Vec<_>>(), None);
        let noops: Vec<Option<bool>> =
            or_default(&self.skip_noop_compactions.iter().copied().map(Some).collect::<Vec<_>>(), None);
        let masks: Vec<Option<u32>> =
            or_default(&self.mask_after.iter().copied().map(Some).collect::<Vec<_>>(), None);
        for w in or_default(&self.context_window, base.context_window) {
            for r in or_default(&self.reserve, base.reserve_tokens) {
                for k in or_default(&self.keep_recent, base.keep_recent_tokens) {
                    for &c in &ratios {
                        for t in or_default(&self.trigger, Trigger::Threshold) {
                            for z in or_default(&self.tokenizer, Tokenizer::Pi) {
                                for ((&p, &f, &n), &m) in product3(&turns, &floors, &noops)
                                    .into_iter()
                                    .flat_map(|x| masks.iter().map(move |m| (x, m)))
                                {
                                    let ratio = c.map_or("auto".to_owned(), |r| r.to_string());
                                    let mut name = format!("w{w}-r{r}-k{k}-c{ratio}-{t}-{}", z.name());
                                    if let Some(p) = p {
                                        name.push_str(&format!("-p{p}"));
                                    }
                                    if let Some(f) = f {
                                        name.push_str(&format!("-f{f}"));
                                    }
                                    if let Some(n) = n {
                                        name.push_str(&format!("-n{}", u8::from(n)));
                                    }
                                    if let Some(m) = m {
                                        name.push_str(&format!("-m{m}"));
                                    }
                                    let policy = Policy {
                                        name,
                                        context_window: w,
                                        reserve_tokens: r,
                                        keep_recent_tokens: k,
                                        chunk_ratio: c,
                                        trigger: t,
                                        recent_turns_preserve: p.unwrap_or(base.recent_turns_preserve),
                                        reserve_tokens_floor: f.unwrap_or(base.reserve_tokens_floor),
                                        skip_noop_compactions: n.unwrap_or(base.skip_noop_compactions),
                                        mask_tool_results_after_turns: m.filter(|&m| m > 0),
                                        ..base.clone()
                                    };
                                    push(policy, z);
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Every combination of three lists, the last varying fastest.
fn product3<'a, A, B, C>(a: &'a [A], b: &'a [B], c: &'a [C]) -> Vec<(&'a A, &'a B, &'a C)> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            for z in c {
                out.push((x, y, z));
            }
        }
    }
    out
}

/// The policy as it acts: the name left out and the reserve and floor
/// replaced by the reserve in force, so two variants that only differ in
/// knobs the floor overrides compare equal.
pub fn effective(policy: &Policy) -> Policy {
    Policy {
        name: String::new(),
        reserve_tokens: policy.effective_reserve(),
        // The floor acts only through the reserve in force above (the memory
        // flush uses OpenClaw's default floor, not this field: see
        // `Policy::memory_flush_threshold`); it is kept for policies with a
        // flush, so two of them that differ only in the floor are not marked
        // alike even where they act the same.
        reserve_tokens_floor: if policy.memory_flush.is_some() { policy.reserve_tokens_floor } else { 0 },
        // 0 turns is masking off.
        mask_tool_results_after_turns: policy.mask_tool_results_after_turns.filter(|&m| m > 0),
        ..policy.clone()
    }
}

/// For each variant, the first earlier variant that acts the same (same
/// tokenizer, measure and [`effective`] policy): its results are the same
/// rows, reported once and marked.
pub fn same_as(variants: &[Variant]) -> Vec<Option<usize>> {
    let keys: Vec<Policy> = variants.iter().map(|v| effective(&v.policy)).collect();
    (0..variants.len())
        .map(|i| {
            (0..i).find(|&j| {
                keys[j] == keys[i]
                    && variants[j].tokenizer == variants[i].tokenizer
                    && variants[j].measure == variants[i].measure
            })
        })
        .collect()
}

/// For each variant that masks tool results, the first variant that acts
/// the same without masking (its baseline for "what did masking save?").
pub fn masking_baselines(variants: &[Variant]) -> Vec<Option<usize>> {
    let keys: Vec<Policy> = variants.iter().map(|v| effective(&v.policy)).collect();
    (0..variants.len())
        .map(|i| {
            keys[i].mask_tool_results_after_turns?;
            let unmasked = Policy { mask_tool_results_after_turns: None, ..keys[i].clone() };
            (0..variants.len()).find(|&j| {
                keys[j] == unmasked
                    && variants[j].tokenizer == variants[i].tokenizer
                    && variants[j].measure == variants[i].measure
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_come_first_and_the_product_is_named_by_its_values() {
        let grid = Grid { keep_recent: vec![8000, 20000], preserve_turns: vec![0], ..Grid::default() };
        let names: Vec<String> =
            grid.variants(Vec::new(), Measure::Usage).unwrap().into_iter().map(|v| v.policy.name).collect();
        // Written out by hand: the two presets, then 2 × 1 × … combinations.
        assert_eq!(
            names,
            [
                Policy::openclaw().name,
                Policy::pi().name,
                "w200000-r16384-k8000-cauto-threshold-pi-p0".to_owned(),
                "w200000-r16384-k20000-cauto-threshold-pi-p0".to_owned(),
            ]
        );
        // Nothing given: the presets only.
        assert_eq!(Grid::default().variants(Vec::new(), Measure::Usage).unwrap().len(), 2);
        // Flags win over a spec list by list.
        let spec = Grid { reserve: vec![1], keep_recent: vec![2], ..Grid::default() };
        let flags = Grid { keep_recent: vec![3], ..Grid::default() };
        assert_eq!(flags.or(spec), Grid { reserve: vec![1], keep_recent: vec![3], ..Grid::default() });
        let bad = Grid { chunk_ratio: vec!["much".into()], ..Grid::default() };
        assert!(bad.variants(Vec::new(), Measure::Usage).is_err());
    }

    #[test]
    fn reserves_under_the_floor_are_one_policy_and_the_floor_is_a_dimension() {
        // The case: under OpenClaw's 20000 floor, reserves 4000, 16384
        // and 20000 are all 20000 — one threshold, 180000 on a 200k window.
        let grid = Grid { reserve: vec![4_000, 16_384, 20_000, 30_000], ..Grid::default() };
        let variants = grid.variants(Vec::new(), Measure::Usage).unwrap();
        let names: Vec<&str> = variants.iter().map(|v| v.policy.name.as_str()).collect();
        assert_eq!(
            names[2..],
            [
                "w200000-r4000-k20000-cauto-threshold-pi",
                "w200000-r16384-k20000-cauto-threshold-pi",
                "w200000-r20000-k20000-cauto-threshold-pi",
                "w200000-r30000-k20000-cauto-threshold-pi"
            ]
        );
        // Reserves 4000, 16384 and 20000 act as OpenClaw's default (index 0) does.
        assert_eq!(same_as(&variants), [None, None, Some(0), Some(0), Some(0), None]);
        // With the floor swept at 0 the reserves act apart.
        let grid = Grid { reserve: vec![4_000, 16_384], reserve_floor: vec![0, 20_000], ..Grid::default() };
        let variants = grid.variants(Vec::new(), Measure::Usage).unwrap();
        let names: Vec<&str> = variants.iter().map(|v| v.policy.name.as_str()).collect();
        assert_eq!(
            names[2..],
            [
                "w200000-r4000-k20000-cauto-threshold-pi-f0",
                "w200000-r4000-k20000-cauto-threshold-pi-f20000",
                "w200000-r16384-k20000-cauto-threshold-pi-f0",
                "w200000-r16384-k20000-cauto-threshold-pi-f20000"
            ]
        );
        let thresholds: Vec<f64> = variants[2..].iter().map(|v| v.policy.threshold()).collect();
        assert_eq!(thresholds, [196_000.0, 180_000.0, 183_616.0, 180_000.0]);
        // r16384 with floor 0 is Pi's threshold, but Pi's rules and defaults differ from OpenClaw's base.
        assert_eq!(same_as(&variants), [None, None, None, Some(0), None, Some(0)]);
    }
}

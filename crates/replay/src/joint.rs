//! Joint replay: the policies of a sweep walk a transcript together until
//! each one's first decision of its own.
//!
//! Until a policy first compacts, flushes memory or finds its window
//! exceeded, its replay does exactly what another policy's does when both
//! count and measure alike (token counter, measure, Pi rule set, observation
//! masking): the path walk, the token counts, the usage calibration, the
//! identifier mentions are the same work. [`replay_together`] walks that
//! prefix once per such group, under an *inert* copy of the group's first
//! policy (no window, a trigger that never fires, no memory flush), and
//! hands each policy a copy of the walk at the entry where it may first act
//! on its own; the policy walks the rest alone. Each result is the one
//! [`crate::replay_memoized`] gives for that policy alone.
//!
//! Where a policy may first act is read from the inert walk's measured
//! context between entries, conservatively: at entry `i` when a memory flush
//! is due at the context before it (the flush test runs after masking, which
//! only lowers the context), when that context exceeds the window (overflow
//! recovery, truncation, an overflow call) or when the context after it fires
//! the trigger (the threshold test is the entry's last step). Each test is
//! monotone in the context, so a hand-over at an earlier entry only shares
//! less, never changes a result.

use sessionlog_compaction::{Extractive, Policy, Summarizer, Trigger};
use sessionlog_tokens::TokenCounter;

use crate::memo::{Answering, CompactionMemo};
use crate::{walk_finish, walk_start, Measure, Prepared, Replay};

/// The replays of a joint walk, and how much of the walk they shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Together {
    /// One replay per policy, in the order given.
    pub replays: Vec<Replay>,
    /// Path entries the policies took from a shared walk instead of walking
    /// them themselves, summed over policies.
    pub shared_entries: u64,
}

/// Replays `prepared` under every policy of `policies`, walking the entries
/// before each policy's first decision once for all the policies that count
/// alike (see the module documentation). `summarizer` makes each policy's
/// summariser; `done` is called once per policy replayed. The replays are
/// those of [`crate::replay_memoized`] one by one, in the order given.
pub fn replay_together(
    prepared: &Prepared<'_>,
    policies: &[&Policy],
    counter: &(dyn TokenCounter + Sync),
    measure: Measure,
    memo: Option<&CompactionMemo>,
    summarizer: &(dyn Fn() -> Box<dyn Summarizer> + Sync),
    done: &(dyn Fn() + Sync),
) -> Together {
    let n = prepared.path.len();
    let mut replays: Vec<Option<Replay>> = (0..policies.len()).map(|_| None).collect();
    let mut shared_entries = 0;
    for group in groups(policies) {
        let lead = inert(policies[group[0]]);
        let settings = lead.cut_settings();
        // Pass 1: where each policy may first act.
        let mut fork_at: Vec<Option<usize>> = vec![None; group.len()];
        let mut open = group.len();
        let mut walk = walk_start(prepared, &lead, "", counter.name(), measure, memo);
        let mut before = walk.measured();
        for i in 0..n {
            if open == 0 {
                break;
            }
            walk.step(i, &lead, &settings, &mut Extractive, counter);
            let after = walk.measured();
            for (at, &k) in fork_at.iter_mut().zip(&group) {
                if at.is_none() && may_act(policies[k], before, after) {
                    *at = Some(i);
                    open -= 1;
                }
            }
            before = after;
        }
        let mut order: Vec<(usize, usize)> =
            fork_at.iter().zip(&group).map(|(at, &k)| (at.unwrap_or(n), k)).collect();
        order.sort_unstable();
        shared_entries += order.iter().map(|&(at, _)| at as u64).sum::<u64>();
        // Pass 2: walk again, handing each policy a copy where it forks; each
        // copy goes on as a task of its own while the shared walk goes on,
        // so a transcript's policies run in parallel as they did alone.
        let finished: std::sync::Mutex<Vec<(usize, Replay)>> = std::sync::Mutex::new(Vec::new());
        rayon::scope(|scope| {
            let mut walk = walk_start(prepared, &lead, "", counter.name(), measure, memo);
            let mut next = 0;
            for i in 0..=n {
                let end = next + order[next..].iter().take_while(|&&(at, _)| at == i).count();
                for &(_, k) in &order[next..end] {
                    let mut own = walk.clone();
                    let finished = &finished;
                    scope.spawn(move |_| {
                        let policy = policies[k];
                        // Requests another compaction of the transcript sent are answered from the memo.
                        let mut summarizer: Box<dyn Summarizer + '_> = match memo {
                            Some(memo) => Box::new(Answering { inner: summarizer(), memo }),
                            None => summarizer(),
                        };
                        own.adopt(policy, summarizer.name());
                        let settings = policy.cut_settings();
                        for j in i..n {
                            own.step(j, policy, &settings, summarizer.as_mut(), counter);
                        }
                        done();
                        let replay = walk_finish(own);
                        finished.lock().unwrap_or_else(|e| e.into_inner()).push((k, replay));
                    });
                }
                next = end;
                if next == order.len() {
                    break;
                }
                walk.step(i, &lead, &settings, &mut Extractive, counter);
            }
        });
        for (k, r) in finished.into_inner().unwrap_or_else(|e| e.into_inner()) {
            replays[k] = Some(r);
        }
    }
    let replays = replays.into_iter().map(|r| r.expect("every policy is in a group")).collect();
    Together { replays, shared_entries }
}

/// The policies (by index) that walk alike before their first decision:
/// same Pi rule set (token counts, usage rule) and observation masking.
fn groups(policies: &[&Policy]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (k, p) in policies.iter().enumerate() {
        let alike = |q: &&Policy| {
            q.pi_rules == p.pi_rules && q.mask_tool_results_after_turns == p.mask_tool_results_after_turns
        };
        match out.iter_mut().find(|g| alike(&policies[g[0]])) {
            Some(g) => g.push(k),
            None => out.push(vec![k]),
        }
    }
    out
}

/// `policy` without any decision of its own: no window to exceed, a
/// trigger that never fires, no memory flush, no overflow attempt.
fn inert(policy: &Policy) -> Policy {
    Policy {
        context_window: u64::MAX,
        trigger: Trigger::Ratio(f64::INFINITY),
        memory_flush: None,
        max_overflow_attempts: 0,
        ..policy.clone()
    }
}

/// Whether `policy` may act on its own at an entry with the context
/// `before` it and `after` it (see the module documentation).
fn may_act(policy: &Policy, before: u64, after: u64) -> bool {
    policy.memory_flush_due(before as f64, 0, None)
        || before > policy.context_window
        || policy.should_compact(after as f64)
}

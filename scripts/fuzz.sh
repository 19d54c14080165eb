#!/usr/bin/env bash
# Bounded fuzzing of the readers with cargo-fuzz (libFuzzer), on the stable
# toolchain with RUSTC_BOOTSTRAP=1:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Each target's corpus is seeded at run time from ../shared/fixtures and from
# files the sessionlog binary generates (nothing is copied into the
# repository), under target/fuzz-corpus/<target>. A crash exits non-zero,
# prints the crashing input (base64) and leaves it under
# fuzz/artifacts/<target>/. Without cargo-fuzz, or when the toolchain cannot
# build the instrumented targets, the script says so and exits 0; targets that
# do not compile at all, or a stale fuzz/Cargo.lock, exit non-zero. FUZZ_INSTALL=1 installs the pinned
# cargo-fuzz first when it is missing (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(transcript migrate segment store_events session_key import sqlite)
shared=${SHARED:-../shared}
cargo_fuzz_version=0.13.2
if ! cargo fuzz --version >/dev/null 2>&1 && [ "${FUZZ_INSTALL:-0}" = 1 ]; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version" >&2
  started=$SECONDS
  if ! cargo install -q cargo-fuzz --version "$cargo_fuzz_version" --locked >&2; then
    echo "fuzz: skipped (cargo-fuzz $cargo_fuzz_version could not be installed)" >&2
    exit 0
  fi
  echo "fuzz: cargo-fuzz installed in $((SECONDS - started)) s" >&2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: skipped (cargo-fuzz is not installed: cargo install cargo-fuzz --version $cargo_fuzz_version --locked)" >&2
  exit 0
fi
# cargo-fuzz passes nightly-only flags (-Z sanitizer, sancov) to rustc; the
# default (stable) toolchain is told to accept them (RUSTC_BOOTSTRAP=1).
# FUZZ_TOOLCHAIN=nightly uses a nightly toolchain instead, where one is installed.
if [ "${FUZZ_TOOLCHAIN:-}" = nightly ]; then
  fuzz() { cargo +nightly fuzz "$@"; }
else
  fuzz() { RUSTC_BOOTSTRAP=1 cargo fuzz "$@"; }
fi
# AddressSanitizer by default (FUZZ_SANITIZER=none builds without it);
# optimised, with debug assertions and overflow checks (an overflow on user
# data is a finding, as it is in the tests).
build_flags=(-O --debug-assertions --sanitizer "${FUZZ_SANITIZER:-address}")
# Allocation stacks are not recorded (they cost a third of the time of a
# run); a crash's own stack is printed, and rerunning its input gives all.
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0}
started=$SECONDS
if ! fuzz build --fuzz-dir fuzz "${build_flags[@]}" >"${TMPDIR:-/tmp}/fuzz-build.$$.log" 2>&1; then
  tail -20 "${TMPDIR:-/tmp}/fuzz-build.$$.log" >&2
  rm -f "${TMPDIR:-/tmp}/fuzz-build.$$.log"
  # A toolchain that cannot instrument is skipped; targets that no longer
  # compile as plain Rust (an API change, a stale fuzz/Cargo.lock) fail.
  if ! cargo check -q --locked --manifest-path fuzz/Cargo.toml --bins >&2; then
    echo "fuzz: the fuzz targets do not compile (see above); fix them or fuzz/Cargo.lock" >&2
    exit 1
  fi
  echo "fuzz: skipped (the fuzz targets compile but do not build instrumented with this toolchain)" >&2
  exit 0
fi
rm -f "${TMPDIR:-/tmp}/fuzz-build.$$.log"
# cargo fuzz build resolves without --locked: a lock file it had to change is stale.
if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet -- fuzz/Cargo.lock; then
  git --no-pager diff --stat -- fuzz/Cargo.lock >&2
  echo "fuzz: fuzz/Cargo.lock is out of date with the crates' dependencies; commit the updated one" >&2
  exit 1
fi
echo "fuzz: targets built in $((SECONDS - started)) s" >&2
corpus=target/fuzz-corpus
rm -rf "$corpus"
mkdir -p "$corpus"
for t in "${targets[@]}"; do mkdir -p "$corpus/$t"; done
fixtures=$shared/fixtures
cargo build -q --locked -p sessionlog-cli
bin=target/debug/sessionlog
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Inputs are kept small: the instrumented readers cost time in proportion to
# the bytes of an input (a 64 KB input runs ~20 times a second, a 4 KB one
# hundreds), so seeds are windows of a file's lines of at most 4 KB and the
# fuzzer grows inputs to at most FUZZ_MAX_LEN bytes.
max_len=${FUZZ_MAX_LEN:-4096}
n=0
seed() { # seed TARGET FILE: windows of FILE's lines, its first line before each
  [ -d "$corpus/$1" ] || return 0
  n=$((n + 1))
  LC_ALL=C awk -v max="$max_len" -v out="$corpus/$1/seed-$n-" -v keep="${3:-1}" '
    NR == 1 { head = $0 "\n"; if (!keep) head = ""; if (keep) next }
    { line = $0 "\n"
      if (length(chunk) > 0 && length(head chunk line) > max) { flush() }
      chunk = chunk line
      if (length(head chunk) > max) { chunk = substr(chunk, 1, max - length(head)); flush() } }
    function flush() { if (k < 40) { printf "%s%s", head, chunk > (out k); close(out k); k++ } chunk = "" }
    END { if (length(chunk) > 0) flush(); else if (k == 0) { printf "%s", head > (out k) } }' "$2"
}
for f in "$fixtures"/pi/*.jsonl "$fixtures"/pi/*/*.jsonl "$fixtures"/openclaw/agents/*/sessions/*.jsonl; do
  [ -f "$f" ] || continue
  seed transcript "$f"
  seed migrate "$f"
done
for s in 1 2 3; do
  "$bin" gen --seed "$s" --entries 40 --branches 2 --compactions 1 -o "$scratch/gen-$s.jsonl"
  seed transcript "$scratch/gen-$s.jsonl"
  "$bin" gen --seed "$s" --entries 6 -o "$scratch/small-$s.jsonl"
  "$bin" pack "$scratch/small-$s.jsonl" -o "$scratch/gen-$s.slmp"
  [ -d "$corpus/segment" ] && cp "$scratch/gen-$s.slmp" "$corpus/segment/"
done
for f in "$fixtures"/claude-code/projects/*/*.jsonl "$fixtures"/codex/sessions/*/*/*/*.jsonl; do
  [ -f "$f" ] && seed import "$f"
done
for f in "$fixtures"/openclaw/agents/*/sessions/sessions.json; do
  [ -f "$f" ] || continue
  grep -o '"agent:[^"]*"' "$f" | tr -d '"' | while read -r key; do
    n=$((n + 1)); [ -d "$corpus/session_key" ] && printf '%s' "$key" >"$corpus/session_key/key-$n-$RANDOM"
  done
done
if [ -d "$fixtures/openclaw" ] && { [ -d "$corpus/store_events" ] || [ -d "$corpus/sqlite" ]; }; then
  "$bin" import "$fixtures/openclaw" --into "$scratch/store" >/dev/null
  for f in "$scratch"/store/agents/*/sessions/events.jsonl; do seed store_events "$f" 0; done
fi
if [ -d "$corpus/sqlite" ]; then
  # OpenClaw's own database, and small ones `export` writes: one session of
  # a few entries, and entries without transcripts.
  for f in "$fixtures"/openclaw-sqlite/agents/*/agent/openclaw-agent.sqlite; do
    [ -f "$f" ] && cp "$f" "$corpus/sqlite/openclaw-$n.sqlite" && n=$((n + 1))
  done
  for entries in 2 12; do
    state=$scratch/state-$entries/agents/main/sessions
    mkdir -p "$state"
    "$bin" gen --seed "$entries" --entries "$entries" -o "$scratch/t-$entries.jsonl"
    id=$(head -1 "$scratch/t-$entries.jsonl" | sed 's/.*"id":"\([^"]*\)".*/\1/')
    cp "$scratch/t-$entries.jsonl" "$state/$id.jsonl"
    printf '{"agent:main:main":{"sessionId":"%s","updatedAt":1},"agent:main:gone":{"sessionId":"gone-1","updatedAt":2}}\n' \
      "$id" >"$state/sessions.json"
    "$bin" import "$scratch/state-$entries" --into "$scratch/store-$entries" >/dev/null
    "$bin" export --store "$scratch/store-$entries" --to "$scratch/out-$entries" --now 0 >/dev/null
    cp "$scratch/out-$entries/agents/main/agent/openclaw-agent.sqlite" "$corpus/sqlite/small-$entries.sqlite"
  done
fi
# The mutations follow a fixed seed (FUZZ_SEED, default 1), so a run explores
# the same inputs in the same order wherever it runs: a slower machine goes
# through a prefix of what a faster one tries, and a crash CI reports is found
# again by rerunning. FUZZ_SEED=0 lets libFuzzer pick a seed (longer runs).
fuzz_seed=${FUZZ_SEED:-1}
status=0
for t in "${targets[@]}"; do
  echo "== fuzz: $t for ${secs}s ($(ls "$corpus/$t" | wc -l) seeds)"
  log=$scratch/$t.log
  limit=(-max_len="$max_len")
  case $t in sqlite|segment) limit=() ;; esac # whole databases and segments: their seeds' size
  mkdir -p "fuzz/artifacts/$t"
  touch "$scratch/started-$t"
  if ! fuzz run --fuzz-dir fuzz "${build_flags[@]}" "$t" "$corpus/$t" -- \
      -max_total_time="$secs" -seed="$fuzz_seed" "${limit[@]}" -rss_limit_mb=2048 -timeout=20 \
      -print_final_stats=1 >"$log" 2>&1; then
    tail -60 "$log"
    find "fuzz/artifacts/$t" -type f -newer "$scratch/started-$t" | while read -r a; do
      echo "fuzz: $t: crashing input $a ($(wc -c <"$a") bytes), base64:"
      head -c 65536 "$a" | base64 -w 0
      echo
    done
    echo "fuzz: $t found a crash (input under fuzz/artifacts/$t/)" >&2
    status=1
  fi
  grep -E '^stat::number_of_executed_units|^#[0-9]+[[:space:]]+DONE' "$log" | sed "s/^/fuzz: $t: /" || true
done
exit $status

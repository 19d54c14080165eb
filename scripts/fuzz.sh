#!/usr/bin/env bash
# Bounded fuzzing of the readers with cargo-fuzz (libFuzzer), on the stable
# toolchain with RUSTC_BOOTSTRAP=1:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Each target's corpus is seeded at run time from ../shared/fixtures and from
# files the sessionlog binary generates (nothing is copied into the
# repository), under target/fuzz-corpus/<target>. A crash exits non-zero and
# leaves its input under fuzz/artifacts/<target>/. Without cargo-fuzz, or when
# the targets do not build, the script says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(transcript migrate segment store_events session_key import sqlite)
shared=${SHARED:-../shared}
# cargo-fuzz passes nightly-only flags (-Z sanitizer, sancov) to rustc; the
# default (stable) toolchain is told to accept them (RUSTC_BOOTSTRAP=1).
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: skipped (cargo-fuzz is not installed: cargo install cargo-fuzz)" >&2
  exit 0
fi
# FUZZ_TOOLCHAIN=nightly uses a nightly toolchain instead, where one is installed.
if [ "${FUZZ_TOOLCHAIN:-}" = nightly ]; then
  fuzz() { cargo +nightly fuzz "$@"; }
else
  fuzz() { RUSTC_BOOTSTRAP=1 cargo fuzz "$@"; }
fi
# FUZZ_SANITIZER=none builds without AddressSanitizer (faster; CI).
sanitizer=(--sanitizer "${FUZZ_SANITIZER:-address}")
if ! fuzz build --fuzz-dir fuzz -O "${sanitizer[@]}" >"${TMPDIR:-/tmp}/fuzz-build.$$.log" 2>&1; then
  tail -20 "${TMPDIR:-/tmp}/fuzz-build.$$.log" >&2
  rm -f "${TMPDIR:-/tmp}/fuzz-build.$$.log"
  echo "fuzz: skipped (the fuzz targets do not build with this toolchain)" >&2
  exit 0
fi
rm -f "${TMPDIR:-/tmp}/fuzz-build.$$.log"
corpus=target/fuzz-corpus
rm -rf "$corpus"
mkdir -p "$corpus"
for t in "${targets[@]}"; do mkdir -p "$corpus/$t"; done
fixtures=$shared/fixtures
cargo build -q --locked -p sessionlog-cli
bin=target/debug/sessionlog
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
n=0
seed() { # seed TARGET FILE: the file's first lines (small inputs fuzz faster)
  n=$((n + 1))
  [ -d "$corpus/$1" ] && head -c 65536 "$2" >"$corpus/$1/seed-$n" || true
}
for f in "$fixtures"/pi/*.jsonl "$fixtures"/pi/*/*.jsonl "$fixtures"/openclaw/agents/*/sessions/*.jsonl; do
  [ -f "$f" ] || continue
  seed transcript "$f"
  seed migrate "$f"
done
for s in 1 2 3; do
  "$bin" gen --seed "$s" --entries 40 --branches 2 --compactions 1 -o "$scratch/gen-$s.jsonl"
  seed transcript "$scratch/gen-$s.jsonl"
  "$bin" pack "$scratch/gen-$s.jsonl" -o "$scratch/gen-$s.slmp"
  seed segment "$scratch/gen-$s.slmp"
done
for f in "$fixtures"/claude-code/projects/*/*.jsonl "$fixtures"/codex/sessions/*/*/*/*.jsonl; do
  [ -f "$f" ] && seed import "$f"
done
for f in "$fixtures"/openclaw/agents/*/sessions/sessions.json; do
  grep -o '"agent:[^"]*"' "$f" | tr -d '"' | while read -r key; do
    n=$((n + 1)); [ -d "$corpus/session_key" ] && printf '%s' "$key" >"$corpus/session_key/key-$n-$RANDOM"
  done
done
if [ -d "$corpus/store_events" ]; then
  "$bin" import "$fixtures/openclaw" --into "$scratch/store" >/dev/null
  for f in "$scratch"/store/agents/*/sessions/events.jsonl; do seed store_events "$f"; done
fi
for f in "$fixtures"/openclaw-sqlite/agents/*/agent/openclaw-agent.sqlite; do
  [ -f "$f" ] && [ -d "$corpus/sqlite" ] && cp "$f" "$corpus/sqlite/"
done
status=0
for t in "${targets[@]}"; do
  echo "== fuzz: $t for ${secs}s"
  log=$scratch/$t.log
  if ! fuzz run --fuzz-dir fuzz -O "${sanitizer[@]}" "$t" "$corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t found a crash (input under fuzz/artifacts/$t/)" >&2
    status=1
  fi
  grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" | sed "s/^/fuzz: $t: /" || true
done
exit $status

#!/usr/bin/env bash
# Sweeps, whole process:
# (a) the price of a grid: 102 policies (5 windows x 5 tails x 2 chunk ratios
#     x 2 triggers, + the 2 presets every sweep adds) against the smallest
#     sweep (the 2 presets alone) over the shared OpenClaw store (4 real
#     transcripts, archives included), with compactions shared between
#     policies (the default) and without (SESSIONLOG_SWEEP_MEMO=0), and
#     against one policy: `replay` of each transcript under the OpenClaw
#     preset (one process each); one hyperfine run for all five, ratios of
#     medians. The rows of the two 102-policy sweeps are compared byte for
#     byte first, and the sweep_stats example counts what was shared
#     (compactions, memo hits, distinct outcomes, entry walks shared).
# (b) the parallel gain of the joint walk's tasks: the same 102-policy sweep of
#     the one transcript with the most compactions (so only the policies' own
#     walks, rayon scope tasks, can run in parallel) and of the whole store, on
#     one thread and on two, in one hyperfine run.
# (d) sweep time and peak memory at 1x, 10x and 100x the bundled corpus (4 policies).
# (e) with CALLGRIND=1: the same grid over every real fixture transcript (a
#     second corpus, not the issue's) against one policy, by instructions.
#
#   scripts/bench-sweep.sh [RUNS]     (RUNS per command, default 5)
#   CALLGRIND=1 scripts/bench-sweep.sh   adds instruction counts of (a), one thread
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
for tool in hyperfine jq /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-sweep: needs $tool" >&2; exit 1; }
done
cargo build --release -q -p sessionlog-cli
cargo build --release -q -p sessionlog-replay --example sweep_stats
bin=target/release/sessionlog
store=../shared/fixtures/openclaw
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
grid="--context-window 32000,64000,128000,200000,400000 --keep-recent 2000,4000,8000,20000,40000 --chunk-ratio auto,0.3 --trigger threshold,ratio:0.8"
echo "corpus: $store, $(find "$store" -name '*.jsonl*' | wc -l) transcripts, $(find "$store" -name '*.jsonl*' -exec cat {} + | wc -c) bytes"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# shellcheck disable=SC2086
"$bin" sweep "$store" --include-archived --quiet --out "$scratch/memo" $grid >/dev/null
# shellcheck disable=SC2086
SESSIONLOG_SWEEP_MEMO=0 "$bin" sweep "$store" --include-archived --quiet --out "$scratch/plain" $grid >/dev/null
for f in results.jsonl summary.csv summary.json; do
  cmp "$scratch/memo/$f" "$scratch/plain/$f" || { echo "bench-sweep: $f differs with the memo" >&2; exit 1; }
done
echo "102 policies: results.jsonl, summary.csv, summary.json byte-identical with and without the memo" \
  "($(wc -l <"$scratch/memo/results.jsonl") rows, $(jq -s 'map(.metrics.compactions) | add' "$scratch/memo/results.jsonl") compactions)"
mapfile -t files < <(find "$store" -name '*.jsonl*' | sort)
target/release/examples/sweep_stats "${files[@]}"
one="for f in ${files[*]}; do $bin replay \$f >/dev/null; done"

hyperfine -N --warmup 1 --runs "$runs" --style basic --export-json "$scratch/h.json" \
  -n presets "$bin sweep $store --include-archived --quiet --out $scratch/o1" \
  -n presets-nomemo "env SESSIONLOG_SWEEP_MEMO=0 $bin sweep $store --include-archived --quiet --out $scratch/o2" \
  -n grid102 "$bin sweep $store --include-archived --quiet --out $scratch/o3 $grid" \
  -n grid102-nomemo "env SESSIONLOG_SWEEP_MEMO=0 $bin sweep $store --include-archived --quiet --out $scratch/o4 $grid" \
  -n one-policy "bash -c '$one'" \
  >/dev/null
echo
echo "wall clock, $runs runs each (hyperfine, one run), median / mean ± sd:"
jq -r '.results[] | "  \(.command)\t\(.median*1000|floor) ms / \(.mean*1000|floor) ± \(.stddev*1000|floor) ms"' \
  "$scratch/h.json" | column -t -s $'\t'
median() { jq -r --arg n "$1" '.results[] | select(.command == $n) | .median' "$scratch/h.json"; }
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { printf "%.2f", a / b }'; }
echo "ratios of medians (same run):"
echo "  102 policies / 2 presets, memo on:  $(ratio grid102 presets)x"
echo "  102 policies / 2 presets, memo off: $(ratio grid102-nomemo presets-nomemo)x"
echo "  102 policies, memo off / on:        $(ratio grid102-nomemo grid102)x"
echo "  102 policies / one policy (replay):  $(ratio grid102 one-policy)x"

if [ "${CALLGRIND:-0}" = 1 ]; then
  command -v valgrind >/dev/null || { echo "bench-sweep: CALLGRIND=1 needs valgrind" >&2; exit 1; }
  echo
  echo "instructions (valgrind --tool=callgrind, RAYON_NUM_THREADS=1):"
  replays() { # replays FILE...: the instructions of one `replay` process per file, summed
    local total=0 n f
    for f in "$@"; do
      n=$(RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" replay "$f" 2>&1 >/dev/null |
        sed -n 's/.*Collected : //p')
      total=$((total + n))
    done
    echo "$total"
  }
  count() { # count MEMO ARGS...
    local memo=$1; shift
    SESSIONLOG_SWEEP_MEMO=$memo RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      "$bin" sweep "$store" --include-archived --quiet --out "$scratch/cg" "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : //p'
  }
  p1=$(count 1); p0=$(count 0)
  # shellcheck disable=SC2086
  g1=$(count 1 $grid)
  # shellcheck disable=SC2086
  g0=$(count 0 $grid)
  o1=$(replays "${files[@]}")
  echo "  2 presets: $p1 (memo on), $p0 (off); 102 policies: $g1 (on), $g0 (off); one policy (replay of each): $o1"
  awk -v g1="$g1" -v p1="$p1" -v g0="$g0" -v p0="$p0" -v o1="$o1" \
    'BEGIN { printf "  102 / 2: %.2fx with the memo, %.2fx without; 102 / one policy: %.2fx\n", g1 / p1, g0 / p0, g1 / o1 }'
fi
echo "load average after (a): $(cut -d' ' -f1-3 /proc/loadavg)"

# (e) A second corpus (not the issue's 162-transcript store, which is not
# here): every real transcript of ../shared/fixtures — the OpenClaw store with
# its archive, Pi's four recorded sessions (pi/*.jsonl, pi/history; the
# synthetic ones left out), two Claude Code and two Codex transcripts — under
# the same 102-policy grid, against one policy (`replay` of each file), by
# instructions (one thread). Only with CALLGRIND=1: the grid takes minutes
# under valgrind.
if [ "${CALLGRIND:-0}" = 1 ]; then
  F=../shared/fixtures
  real=("$store"/agents/*/sessions/*.jsonl* "$F"/pi/*.jsonl "$F"/pi/history/*.jsonl
    "$F"/claude-code/projects/*/*.jsonl "$F"/codex/sessions/*/*/*/*.jsonl)
  echo
  echo "(e) all real fixture transcripts: ${#real[@]} files, $(cat "${real[@]}" | wc -c) bytes; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  e1=$(replays "${real[@]}")
  count1() { RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bin" sweep "${real[@]}" --quiet --out "$scratch/e" "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : //p'; }
  ep=$(count1)
  # shellcheck disable=SC2086
  eg=$(count1 $grid)
  echo "  one policy (replay of each): $e1; 2 presets: $ep; 102 policies: $eg" \
    "($(wc -l <"$scratch/e/results.jsonl") rows, $(jq -s 'map(.metrics.compactions) | add' "$scratch/e/results.jsonl") compactions)"
  awk -v g="$eg" -v o="$e1" -v p="$ep" 'BEGIN { printf "  102 / one policy: %.2fx; 102 / 2 presets: %.2fx\n", g / o, g / p }'
  echo "load average after (e): $(cut -d' ' -f1-3 /proc/loadavg)"
fi

echo
# The transcript the grid compacts most often.
busiest=$(jq -r '[.transcript, .metrics.compactions] | @tsv' "$scratch/memo/results.jsonl" |
  awk -F'\t' '{ c[$1] += $2 } END { for (t in c) print c[t] "\t" t }' | sort -rn | head -1 | cut -f2)
echo "(b) one thread vs two; busiest transcript: $busiest"
echo "load average before (b): $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N --warmup 1 --runs "$runs" --style basic --export-json "$scratch/p.json" \
  -n one-1 "env RAYON_NUM_THREADS=1 $bin sweep $busiest --quiet --out $scratch/p1 $grid" \
  -n one-2 "env RAYON_NUM_THREADS=2 $bin sweep $busiest --quiet --out $scratch/p2 $grid" \
  -n store-1 "env RAYON_NUM_THREADS=1 $bin sweep $store --include-archived --quiet --out $scratch/p3 $grid" \
  -n store-2 "env RAYON_NUM_THREADS=2 $bin sweep $store --include-archived --quiet --out $scratch/p4 $grid" \
  >/dev/null
jq -r '.results[] | "  \(.command)\t\(.median*1000|floor) ms / \(.mean*1000|floor) ± \(.stddev*1000|floor) ms (user \(.user*1000|floor) ms)"' \
  "$scratch/p.json" | column -t -s $'\t'
pmedian() { jq -r --arg n "$1" '.results[] | select(.command == $n) | .median' "$scratch/p.json"; }
pratio() { awk -v a="$(pmedian "$1")" -v b="$(pmedian "$2")" 'BEGIN { printf "%.2f", a / b }'; }
echo "  one transcript: 1 thread / 2 threads $(pratio one-1 one-2)x; the store: $(pratio store-1 store-2)x"
echo "load average after (b): $(cut -d' ' -f1-3 /proc/loadavg)"

echo
corpus=fixtures/generated
. scripts/lib.sh
for n in 1 10 100; do
  dir=bench-data/corpus-x$n
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    for i in $(seq "$n"); do for f in $corpus/*.jsonl; do cp "$f" "$dir/$i-$(basename "$f")"; done; done
  fi
  measure "(d) sweep x$n corpus ($(ls $dir | wc -l) files), 4 policies" 1 $bin sweep "$dir" --quiet \
    --context-window 32000,64000 --out "$scratch/d"
done

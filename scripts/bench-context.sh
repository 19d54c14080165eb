#!/usr/bin/env bash
# `context --json` on a 44.7 MB v3 transcript (no compaction, so the context
# is the whole file) against Pi's own implementation, both releases (the
# oracles: Pi 0.58.3 `oracle/pi`, Pi 1.6.0 `oracle/pi-1.6`), whole process,
# same file, one hyperfine run for all commands so that the ratios compare
# runs made under the same load. Also: the streaming typed read (the parse
# floor), peak RSS of each command (median of 3), and — with CALLGRIND=1 —
# our instruction counts (callgrind, one thread: repeatable under load).
#
#   scripts/bench-context.sh [RUNS]      (RUNS: hyperfine runs per command, default 5)
#
# Before timing, each of our outputs is checked byte for byte against the
# oracle of the same rules (Pi's `piVersion` line aside); a difference stops
# the script.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
for tool in hyperfine jq /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-context: needs $tool" >&2; exit 1; }
done
cargo build --release -q -p sessionlog-cli
cargo build --release -q -p sessionlog-event-log --example stream_read
bin=target/release/sessionlog
mkdir -p bench-data
f=bench-data/linear-44000.jsonl
[ -f "$f" ] || "$bin" gen --seed 1 --entries 44000 -o "$f"
pi058=../shared/oracle/pi/run.sh
pi16=../shared/oracle/pi-1.6/run.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "file: $f, $(stat -Lc %s "$f") bytes, $(wc -l <"$f") lines"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Byte identity first (this also installs and warms up each oracle).
same() { # same RULES ORACLE
  "$bin" context "$f" --json --pi-rules "$1" >"$scratch/ours"
  "$2" context "$f" --seq-ids | grep -v '^  "piVersion": ' >"$scratch/theirs"
  if cmp -s "$scratch/ours" "$scratch/theirs"; then
    echo "--pi-rules $1: byte-identical to $2 ($(stat -c %s "$scratch/ours") bytes)"
  else
    echo "bench-context: --pi-rules $1 output differs from $2" >&2
    exit 1
  fi
}
same 0.58 "$pi058"
same 1.6 "$pi16"

hyperfine -N --warmup 1 --runs "$runs" --style basic --export-json "$scratch/h.json" \
  -n floor "target/release/examples/stream_read $f" \
  -n ours-0.58 "$bin context $f --json --pi-rules 0.58" \
  -n ours-1.6 "$bin context $f --json --pi-rules 1.6" \
  -n pi-0.58.3 "$pi058 context $f --seq-ids" \
  -n pi-1.6.0 "$pi16 context $f --seq-ids" >/dev/null

echo
echo "wall clock, $runs runs each (hyperfine, one run), median / mean ± sd:"
jq -r '.results[] | "  \(.command)\t\(.median*1000|floor) ms / \(.mean*1000|floor) ± \(.stddev*1000|floor) ms"' \
  "$scratch/h.json" | column -t -s $'\t'
median() { jq -r --arg n "$1" '.results[] | select(.command == $n) | .median' "$scratch/h.json"; }
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { printf "%.1f", a / b }'; }
echo "ratios of medians (same run):"
echo "  Pi 0.58.3 / ours (0.58 rules): $(ratio pi-0.58.3 ours-0.58)x"
echo "  Pi 1.6.0  / ours (1.6 rules):  $(ratio pi-1.6.0 ours-1.6)x"
echo "  ours (0.58 rules) / typed-read floor: $(ratio ours-0.58 floor)x"
echo "  ours (1.6 rules)  / typed-read floor: $(ratio ours-1.6 floor)x"

echo
echo "peak RSS, median of 3 (/usr/bin/time %M):"
rss() { # rss NAME COMMAND...
  local name=$1; shift
  local kib
  kib=$(for _ in 1 2 3; do /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -n 1; done | sort -n | sed -n 2p)
  printf '  %-12s %8s KiB\n' "$name" "$kib"
  echo "$kib" >"$scratch/rss-$name"
}
rss floor target/release/examples/stream_read "$f"
rss ours-0.58 "$bin" context "$f" --json --pi-rules 0.58
rss ours-1.6 "$bin" context "$f" --json --pi-rules 1.6
rss pi-0.58.3 "$pi058" context "$f" --seq-ids
rss pi-1.6.0 "$pi16" context "$f" --seq-ids
share() { awk -v a="$(cat "$scratch/rss-$1")" -v b="$(cat "$scratch/rss-$2")" 'BEGIN { printf "%.2f", a / b }'; }
echo "  ours / Pi 0.58.3: $(share ours-0.58 pi-0.58.3)x the memory; ours / Pi 1.6.0: $(share ours-1.6 pi-1.6.0)x"

if [ "${CALLGRIND:-0}" = 1 ]; then
  command -v valgrind >/dev/null || { echo "bench-context: CALLGRIND=1 needs valgrind" >&2; exit 1; }
  echo
  echo "instructions (valgrind --tool=callgrind, RAYON_NUM_THREADS=1):"
  count() { RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : //p'; }
  printf '  typed read (floor): %s\n' "$(count target/release/examples/stream_read "$f")"
  for rules in 0.58 1.6; do
    printf '  ours (%s rules): %s\n' "$rules" "$(count "$bin" context "$f" --json --pi-rules "$rules")"
  done
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

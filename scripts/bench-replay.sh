#!/usr/bin/env bash
# Replay of the 44 MB generated transcript with the extractive summariser
# (OpenClaw defaults, usage-calibrated) against `context --json` of the same
# file, whole process, same run: the two commands alternate RUNS times
# (default 5) so that load changes hit both alike; medians of wall clock,
# user time and peak RSS, and replay / context of the medians.
#
#   scripts/bench-replay.sh [RUNS]
#   CALLGRIND=1 scripts/bench-replay.sh   adds instruction counts of both
#                                         (callgrind, RAYON_NUM_THREADS=1)
#
# With BASE=<git revision> (for instance `BASE=5397919^`, the tree before the
# carry-forward identifier ledger), the same replay is also run by that
# revision's binary, built in a temporary worktree, and the cost of what
# changed since is printed as ratios (wall and peak RSS, this tree / BASE) —
# both measured in this run, alternately (and, with CALLGRIND=1, counted).
# BASE_BIN=<binary> takes an already built binary of that revision instead.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
mkdir -p bench-data
if [ -n "${BASE_BIN:-}" ]; then
  BASE=${BASE:-$BASE_BIN}
  base_bin=$BASE_BIN
elif [ -n "${BASE:-}" ]; then
  base_bin=bench-data/sessionlog-base
  wt=$(mktemp -d)
  trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
  git worktree add -q --detach "$wt" "$BASE"
  # A target folder of its own: the two trees' crates have the same names and
  # hashes, so sharing one would mix their builds.
  cargo build --release -q -p sessionlog-cli --manifest-path "$wt/Cargo.toml" --target-dir target/bench-base
  cp target/bench-base/release/sessionlog "$base_bin"
fi
cargo build --release -q -p sessionlog-cli
bin=target/release/sessionlog
f=bench-data/linear-44000.jsonl
[ -f "$f" ] || "$bin" gen --seed 1 --entries 44000 -o "$f"
printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "context %e %U %M" "$bin" context "$f" --json 2>&1 >/dev/null | tail -n 1
  /usr/bin/time -f "replay %e %U %M" "$bin" replay "$f" --summarizer extractive --json 2>&1 >/dev/null | tail -n 1
done | awk -v runs="$runs" '
  { w[$1] = w[$1] " " $2; u[$1] = u[$1] " " $3; m[$1] = m[$1] " " $4 }
  function median(list,   a, n, i, j, x) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "%d alternating runs each, medians (wall / user / peak RSS):\n", runs
    for (c in w) printf "  %-8s %6.2f s / %6.2f s / %8d KiB   (wall:%s)\n", c, median(w[c]), median(u[c]), median(m[c]), w[c]
    printf "replay / context: wall %.2fx, user %.2fx\n", median(w["replay"]) / median(w["context"]), median(u["replay"]) / median(u["context"])
  }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${CALLGRIND:-}" ]; then
  count() {
    RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null \
      | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  }
  ic=$(count "$bin" context "$f" --json)
  ir=$(count "$bin" replay "$f" --summarizer extractive --json)
  printf 'instructions (callgrind, one thread): context %s, replay %s, replay / context %s\n' \
    "$ic" "$ir" "$(awk -v a="$ir" -v b="$ic" 'BEGIN { printf "%.2fx", a / b }')"
  if [ -n "${BASE:-}" ]; then
    ib=$(count "$base_bin" replay "$f" --summarizer extractive --json)
    printf 'instructions, replay by BASE %s: %s, this tree / BASE %s\n' \
      "$BASE" "$ib" "$(awk -v a="$ir" -v b="$ib" 'BEGIN { printf "%.2fx", a / b }')"
  fi
fi
"$bin" replay "$f" --summarizer extractive | sed -n '3,4p'
# Bytes of the compactions' identifier ledgers in the `--json` output (their
# lists, compact JSON): whole ledgers as written before they were stored as
# changes (`identifierLedger`, `secretRefs`), changes since.
ledger_bytes() {
  "$1" replay "$f" --summarizer extractive --json | jq '[.compactions[]
    | (.identifierLedger, .secretRefs, .ledgerAdded, .ledgerDropped, .secretRefsAdded)
    | select(. != null) | tojson | length] | add // 0'
}
printf 'ledger bytes in the replay output: %s\n' "$(ledger_bytes "$bin")"
if [ -n "${BASE:-}" ]; then
  printf 'ledger bytes in the replay output, BASE %s: %s\n' "$BASE" "$(ledger_bytes "$base_bin")"
  # Alternate the two binaries so that load changes hit both alike.
  for _ in $(seq "$runs"); do
    for b in "$base_bin" "$bin"; do
      /usr/bin/time -f "$b %e %M" "$b" replay "$f" --summarizer extractive --json 2>&1 >/dev/null | tail -n 1
    done
  done | awk -v base="$base_bin" '
    { t[$1] = t[$1] " " $2; m[$1] = m[$1] " " $3 }
    function median(list,   a, n, i, j, x) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      for (b in t) if (b != base) head = b
      tb = median(t[base]); th = median(t[head]); mb = median(m[base]); mh = median(m[head])
      printf "replay, BASE %s: %.2f s, %d KiB; this tree: %.2f s, %d KiB\n", ENVIRON["BASE"], tb, mb, th, mh
      printf "ratio this tree / BASE: wall %.2fx, peak RSS %.2fx\n", th / tb, mh / mb
    }'
  "$bin" replay "$f" --summarizer extractive | sed -n '3,4p'
  "$base_bin" replay "$f" --summarizer extractive | sed -n '3,4p'
fi

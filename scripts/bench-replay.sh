#!/usr/bin/env bash
# Replay of the 44 MB generated transcript with the extractive summariser
# (OpenClaw defaults, usage-calibrated) against one `context --json` build of
# the same file, whole process, same run. Median of 3 runs each.
#
# With BASE=<git revision> (for instance `BASE=5397919^`, the tree before the
# carry-forward identifier ledger), the same replay is also run by that
# revision's binary, built in a temporary worktree, and the cost of what
# changed since is printed as ratios (wall and peak RSS, this tree / BASE) —
# both measured in this run, alternately.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench-data
if [ -n "${BASE:-}" ]; then
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
f=bench-data/linear-44000.jsonl
[ -f "$f" ] || target/release/sessionlog gen --seed 1 --entries 44000 -o "$f"
. scripts/lib.sh
printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"
measure "sessionlog context --json" 3 target/release/sessionlog context "$f" --json
measure "sessionlog replay (extractive)" 3 target/release/sessionlog replay "$f" --summarizer extractive --json
target/release/sessionlog replay "$f" --summarizer extractive | sed -n '3,4p'
# Bytes of the compactions' identifier ledgers in the `--json` output (their
# lists, compact JSON): whole ledgers as written before they were stored as
# changes (`identifierLedger`, `secretRefs`), changes since.
ledger_bytes() {
  "$1" replay "$f" --summarizer extractive --json | jq '[.compactions[]
    | (.identifierLedger, .secretRefs, .ledgerAdded, .ledgerDropped, .secretRefsAdded)
    | select(. != null) | tojson | length] | add // 0'
}
printf 'ledger bytes in the replay output: %s\n' "$(ledger_bytes target/release/sessionlog)"
if [ -n "${BASE:-}" ]; then
  printf 'ledger bytes in the replay output, BASE %s: %s\n' "$BASE" "$(ledger_bytes "$base_bin")"
fi
if [ -n "${BASE:-}" ]; then
  # Alternate the two binaries so that load changes hit both alike.
  runs=${RUNS:-5}
  for _ in $(seq "$runs"); do
    for bin in "$base_bin" target/release/sessionlog; do
      /usr/bin/time -f "$bin %e %M" "$bin" replay "$f" --summarizer extractive --json 2>&1 >/dev/null | tail -n 1
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
  target/release/sessionlog replay "$f" --summarizer extractive | sed -n '3,4p'
  "$base_bin" replay "$f" --summarizer extractive | sed -n '3,4p'
fi

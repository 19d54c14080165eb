#!/usr/bin/env bash
# Replay of the 44 MB generated transcript with the extractive summariser
# (OpenClaw defaults, usage-calibrated) against one `context --json` build of
# the same file, whole process, same run. Median of 3 runs each.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli
mkdir -p bench-data
f=bench-data/linear-44000.jsonl
[ -f "$f" ] || target/release/sessionlog gen --seed 1 --entries 44000 -o "$f"
measure() { # name command...
  local name=$1; shift
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1
  done | sort -n | sed -n 2p | { read -r secs kib; printf '%-34s %8s s %10s KiB\n' "$name" "$secs" "$kib"; }
}
printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"
measure "sessionlog context --json" target/release/sessionlog context "$f" --json
measure "sessionlog replay (extractive)" target/release/sessionlog replay "$f" --summarizer extractive --json
target/release/sessionlog replay "$f" --summarizer extractive | sed -n '3,4p'

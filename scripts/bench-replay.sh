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
. scripts/lib.sh
printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"
measure "sessionlog context --json" 3 target/release/sessionlog context "$f" --json
measure "sessionlog replay (extractive)" 3 target/release/sessionlog replay "$f" --summarizer extractive --json
target/release/sessionlog replay "$f" --summarizer extractive | sed -n '3,4p'

#!/usr/bin/env bash
# `context --json` on a 44 MB v3 transcript (no compaction, so the context is
# the whole file): sessionlog vs Pi's own implementation (the oracle), whole
# process, same file, same run; plus the streaming typed read as the floor.
# Prints the median wall time and peak RSS of 3 runs each.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli
cargo build --release -q -p sessionlog-event-log --example stream_read
mkdir -p bench-data
f=bench-data/linear-44000.jsonl
[ -f "$f" ] || target/release/sessionlog gen --seed 1 --entries 44000 -o "$f"
oracle=../shared/oracle/pi/run.sh
"$oracle" context "$f" --seq-ids > /dev/null   # install and warm up once
. scripts/lib.sh
printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"
measure "typed read (floor)" 3 target/release/examples/stream_read "$f"
measure "sessionlog context --json" 3 target/release/sessionlog context "$f" --json
measure "pi oracle context" 3 "$oracle" context "$f" --seq-ids

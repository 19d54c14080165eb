#!/usr/bin/env bash
# Peak memory of the streaming typed read at 40 MB and 400 MB (issue: foundation).
# Generates the inputs under bench-data/ (git-ignored) with `sessionlog gen`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli --example stream_read -p sessionlog-event-log
mkdir -p bench-data
for n in 44000 440000; do
  f="bench-data/gen-$n.jsonl"
  [ -f "$f" ] || target/release/sessionlog gen --seed 1 --entries "$n" --branches 3 --compactions 5 -o "$f"
  target/release/examples/stream_read "$f"
done

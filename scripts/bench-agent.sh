#!/usr/bin/env bash
# The live loop against the fake model server (answering at once): median
# per-turn time and overhead (less the provider's own call) on a new session,
# a 1 MB and a 44.7 MB session (generated transcripts put in place as the
# session's transcript, each compacted once with /compact so that its context
# is what a long session that compacts sends), their ratios to the new
# session, time to first streamed token through the agent vs the provider
# alone, and one provider context built from the whole transcript vs folded;
# once with the state folder on disk, once on tmpfs (/dev/shm) where syncs
# are free.
# Usage: scripts/bench-agent.sh [TURNS] [--no-compact] (default 20 turns).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli -p sessionlog-agent --example bench_turn
mkdir -p bench-data
small=bench-data/compacted-1000.jsonl
large=bench-data/compacted-44000.jsonl
[ -f "$small" ] || target/release/sessionlog gen --seed 1 --entries 1000 --compactions 1 -o "$small"
[ -f "$large" ] || target/release/sessionlog gen --seed 1 --entries 44000 --compactions 5 -o "$large"
uptime
echo "== state folder on disk (every append synced, as by default)"
target/release/examples/bench_turn --turns "${1:-20}" ${2:-} "$small" "$large"
if [ -d /dev/shm ]; then
  echo "== state folder on tmpfs (syncs cost nothing: the loop's own work)"
  TMPDIR=/dev/shm target/release/examples/bench_turn --turns "${1:-20}" ${2:-} "$small" "$large"
fi
uptime

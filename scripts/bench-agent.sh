#!/usr/bin/env bash
# The live loop against the fake model server (answering at once): median
# per-turn time on a new session and on a 44.7 MB session (a generated
# transcript with 5 compactions put in place as the session's transcript),
# their ratio, and time to first streamed token through the agent vs the
# provider alone. Usage: scripts/bench-agent.sh [TURNS] (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli
cargo build --release -q -p sessionlog-agent --example bench_turn
mkdir -p bench-data
f=bench-data/compacted-44000.jsonl
[ -f "$f" ] || target/release/sessionlog gen --seed 1 --entries 44000 --compactions 5 -o "$f"
uptime
target/release/examples/bench_turn "$f" "${1:-20}"

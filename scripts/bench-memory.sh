#!/usr/bin/env bash
# Memory index benchmark: ~10,000 chunks × 384 dimensions (hashing embedder),
# index time, peak memory, query latency p50/p95; with all-MiniLM-L6-v2 installed
# (scripts/fetch-minilm.sh) also its load time, indexing rate (LOCAL_SAMPLE chunks,
# default 40, extrapolated to 10,000) and per query its embedding and search times.
# Writes its synthetic workspace under bench-data/memory (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-memory --example bench
target/release/examples/bench bench-data/memory "${1:-10000}"

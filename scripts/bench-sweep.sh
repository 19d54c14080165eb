#!/usr/bin/env bash
# (c) a 100-policy sweep over the bundled corpus vs one parse of it;
# (d) sweep time and peak memory at 1x, 10x and 100x the corpus (4 policies).
# Whole process, /usr/bin/time; the median of 3 runs for (c), one run each for (d).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p sessionlog-cli
bin=target/release/sessionlog
corpus=fixtures/generated
. scripts/lib.sh
echo "corpus: $(ls $corpus/*.jsonl | wc -l) files, $(cat $corpus/*.jsonl | wc -c) bytes"
measure "one parse (inspect every file)" 3 $bin inspect $corpus/*.jsonl --json
# 5 windows x 5 tails x 2 chunk ratios x 2 triggers = 100 grid policies (+2 references).
measure "sweep, 102 policies" 3 $bin sweep $corpus --quiet \
  --context-window 32000,64000,128000,200000,400000 --keep-recent 2000,4000,8000,20000,40000 \
  --chunk-ratio auto,0.3 --trigger threshold,ratio:0.8
for n in 1 10 100; do
  dir=bench-data/corpus-x$n
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    for i in $(seq "$n"); do for f in $corpus/*.jsonl; do cp "$f" "$dir/$i-$(basename "$f")"; done; done
  fi
  measure "sweep x$n corpus ($(ls $dir | wc -l) files), 4 policies" 1 $bin sweep "$dir" --quiet \
    --context-window 32000,64000
done

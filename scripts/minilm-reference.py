#!/usr/bin/env python3
"""Reference values for the local embedder's tests (crates/memory/tests/minilm.rs).

Token ids come from Hugging Face's `tokenizers` reading the model's own
tokenizer.json (truncated at 256 tokens, as sentence-transformers runs this
model); embeddings from an independent forward pass of BERT written with numpy
in float64 over the same model.safetensors, then mean pooling and L2
normalisation. "hello world" gives [-0.034477, 0.031023, 0.006735, 0.026109,
-0.039362, ...], the published sentence-transformers vector of that text.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy tokenizers safetensors
    scripts/fetch-minilm.sh /tmp/minilm
    /tmp/v/bin/python scripts/minilm-reference.py /tmp/minilm > fixtures/minilm-reference.json
"""
import json
import sys
from math import erf, sqrt

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

LONG = " ".join(
    f"Paragraph {i}: the memory index keeps chunks of about four hundred tokens, with overlap, and embeds each one."
    for i in range(40)
)
TEXTS = [
    "hello world",
    "The billing database runs on Postgres 16.",
    "数据库迁移计划在周五完成。",
    "Crème brûlée, naïve café — résumé! Ångström?",
    "un-believable!!! (foo) [bar] {baz} e.g. 3.14 $100 #tag @user user_name",
    "Mixed 中文 and English: 上海 deploy v2.3.1",
    "日本語のテキスト、カタカナ。한국어 텍스트",
    "Emoji \U0001F642 and tab\tnew\nline\u200b zero\u00a0width ©2026",
    "",
    LONG,
]

model_dir = sys.argv[1]
tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
tok.no_padding()
tok.enable_truncation(256)
W = {k: v.astype(np.float64) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
verf = np.vectorize(erf)


def layer_norm(x, p):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * W[p + ".weight"] + W[p + ".bias"]


def dense(x, p):
    return x @ W[p + ".weight"].T + W[p + ".bias"]


def embed(ids):
    n = len(ids)
    x = (W["embeddings.word_embeddings.weight"][ids] + W["embeddings.token_type_embeddings.weight"][0]
         + W["embeddings.position_embeddings.weight"][:n])
    x = layer_norm(x, "embeddings.LayerNorm")
    for layer in range(6):
        p = f"encoder.layer.{layer}."
        heads = [dense(x, p + f"attention.self.{w}").reshape(n, 12, 32).transpose(1, 0, 2) for w in ("query", "key", "value")]
        q, k, v = heads
        s = q @ k.transpose(0, 2, 1) / sqrt(32)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, 384)
        x = layer_norm(dense(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + verf(h / sqrt(2)))
        x = layer_norm(dense(h, p + "output.dense") + x, p + "output.LayerNorm")
    e = x.mean(0)
    return e / np.linalg.norm(e)


out = []
for text in TEXTS:
    enc = tok.encode(text)
    out.append({"text": text, "ids": enc.ids, "embedding": [round(float(v), 7) for v in embed(enc.ids)]})
json.dump(out, sys.stdout, ensure_ascii=False)
sys.stdout.write("\n")

#!/usr/bin/env python3
"""Record reference token counts of the corpus text with Python tiktoken.

Walks every transcript under ../shared/corpus (JSON, or JSONL line by line),
takes every string value in document order (keys excluded) and counts it with
tiktoken's encode_ordinary for o200k_base and cl100k_base. Writes, per file,
the number of strings, the total and an order-weighted sum
(sum((i % 9973 + 1) * count_i)) so that errors cannot cancel out.

    pip install tiktoken
    TIKTOKEN_CACHE_DIR=../shared/tiktoken-cache python3 scripts/reference_token_counts.py \
        > crates/tokens/tests/fixtures/corpus_token_counts.json
"""
import json
import os
import sys

import tiktoken

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")


def strings(v, out):
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, list):
        for x in v:
            strings(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            strings(x, out)


def main():
    encs = {name: tiktoken.get_encoding(name) for name in ("o200k_base", "cl100k_base")}
    result = {}
    for sub in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, sub)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not (f.endswith(".json") or f.endswith(".jsonl")):
                continue
            text = open(os.path.join(d, f), encoding="utf-8").read()
            docs = [json.loads(l) for l in text.splitlines() if l.strip()] if f.endswith(".jsonl") else [json.loads(text)]
            out = []
            for doc in docs:
                strings(doc, out)
            entry = {"strings": len(out)}
            for name, enc in encs.items():
                counts = [len(enc.encode_ordinary(s)) for s in out]
                entry[name] = {
                    "total": sum(counts),
                    "weighted": sum((i % 9973 + 1) * c for i, c in enumerate(counts)),
                }
            result[f"{sub}/{f}"] = entry
    json.dump({"tiktoken": tiktoken.__version__, "files": result}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Exact token counting: abridge vs Python tiktoken on the same text, one run.

    pip install tiktoken
    python3 benches/compare_tiktoken.py [FILE]

Counts every string of FILE (default: the largest corpus transcript) with
both, single-threaded, best of 5, and prints MB/s and the ratio. Needs the
encodings offline: TIKTOKEN_CACHE_DIR defaults to ../shared/tiktoken-cache.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(ROOT, "..", "shared", "tiktoken-cache"))
import tiktoken  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from reference_token_counts import strings  # noqa: E402  (the same walk the fixture was recorded with)


def largest_corpus_file():
    corpus = os.path.join(ROOT, "..", "shared", "corpus")
    files = [os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in fs if f.endswith((".json", ".jsonl"))]
    if not files:
        sys.exit("no file given and ../shared/corpus not found")
    return max(files, key=os.path.getsize)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else largest_corpus_file()
    text = open(path, encoding="utf-8").read()
    out = []
    try:
        strings(json.loads(text), out)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                strings(json.loads(line), out)
    nbytes = sum(len(s.encode()) for s in out)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "abridge-tokens", "--example", "throughput"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "throughput")
    print(f"file: {path} ({nbytes / 1e6:.2f} MB of text in {len(out)} strings)")
    for enc_name in ("o200k_base", "cl100k_base"):
        enc = tiktoken.get_encoding(enc_name)
        enc.encode_ordinary("warm up")
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            tokens = sum(len(enc.encode_ordinary(s)) for s in out)
            best = min(best, time.perf_counter() - t)
        py = nbytes / best / 1e6
        rs = json.loads(subprocess.run([exe, path, enc_name], capture_output=True, text=True, check=True).stdout)
        assert rs["tokens"] == tokens, f"token counts differ: {rs['tokens']} vs {tokens}"
        print(f"{enc_name}: tiktoken {tiktoken.__version__} {py:.1f} MB/s, abridge {rs['mb_per_s']:.1f} MB/s, "
              f"ratio {rs['mb_per_s'] / py:.2f}x ({tokens} tokens, identical)")


if __name__ == "__main__":
    main()

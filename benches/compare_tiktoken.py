#!/usr/bin/env python3
"""Exact token counting: abridge vs Python tiktoken on the same texts, one run.

    pip install tiktoken
    python3 benches/compare_tiktoken.py [FILE]

Three sets, each counted by both with o200k_base and cl100k_base:
  prose  the strings of benches/workload.py's 10,000-message tool chat
  code   every Rust source file of this repository
  json   the JSON bodies of examples/ and the corpus's .json files (up to 8 MB)
         as text, in pieces of at most 64 KB
FILE adds a fourth: every string of a JSON/JSONL file. Single thread: best of
5, one string at a time on both sides (tiktoken `encode_ordinary`). Batched:
tiktoken `encode_ordinary_batch` on 2 threads against abridge counting the
strings as one history's messages (its cache empty: all of it is new), which
uses every core. Token totals must be identical. Needs the encodings offline:
TIKTOKEN_CACHE_DIR defaults to ../shared/tiktoken-cache.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(ROOT, "..", "shared", "tiktoken-cache"))
import tiktoken  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "benches"))
from reference_token_counts import strings  # noqa: E402  (the same walk the fixture was recorded with)
import workload  # noqa: E402


def prose():
    out = []
    strings(workload.toolchat(10000), out)
    return out


def code():
    files = sorted(glob.glob(os.path.join(ROOT, "crates", "**", "*.rs"), recursive=True))
    return [open(f, encoding="utf-8").read() for f in files]


def json_texts():
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "*.json")))
    files += sorted(glob.glob(os.path.join(ROOT, "..", "shared", "corpus", "**", "*.json"), recursive=True))
    out, total = [], 0
    for f in files:
        text = open(f, encoding="utf-8").read()
        for i in range(0, len(text), 65536):
            out.append(text[i:i + 65536])
        total += len(text)
        if total > 8_000_000:
            break
    return out


def file_strings(path):
    text = open(path, encoding="utf-8").read()
    out = []
    try:
        strings(json.loads(text), out)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                strings(json.loads(line), out)
    return out


def main():
    sets = [("prose", prose()), ("code", code()), ("json", json_texts())]
    if len(sys.argv) > 1:
        sets.append((os.path.basename(sys.argv[1]), file_strings(sys.argv[1])))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "abridge-tokens", "--example", "throughput"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "throughput")
    print(f"tiktoken {tiktoken.__version__}; {os.cpu_count()} cores; MB/s of UTF-8 text")
    print(f"{'set':<10} {'encoding':<12} {'MB':>6} {'tiktoken':>9} {'abridge':>8} {'ratio':>6}"
          f" {'tiktoken 2t':>12} {'abridge all':>12} {'ratio':>6}")
    for name, texts in sets:
        nbytes = sum(len(s.encode()) for s in texts)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(texts, f)
            path = f.name
        for enc_name in ("o200k_base", "cl100k_base"):
            enc = tiktoken.get_encoding(enc_name)
            enc.encode_ordinary("warm up")
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                tokens = sum(len(enc.encode_ordinary(s)) for s in texts)
                best = min(best, time.perf_counter() - t)
            batch = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                enc.encode_ordinary_batch(texts, num_threads=2)
                batch = min(batch, time.perf_counter() - t)
            rs = json.loads(subprocess.run([exe, path, enc_name], capture_output=True, text=True,
                                           check=True).stdout)
            assert rs["tokens"] == tokens, f"{name} {enc_name}: {rs['tokens']} vs {tokens} tokens"
            py, py2 = nbytes / best / 1e6, nbytes / batch / 1e6
            print(f"{name:<10} {enc_name:<12} {nbytes / 1e6:6.2f} {py:9.1f} {rs['mb_per_s']:8.1f}"
                  f" {rs['mb_per_s'] / py:5.2f}x {py2:12.1f} {rs['batched_mb_per_s']:12.1f}"
                  f" {rs['batched_mb_per_s'] / py:5.2f}x")
        os.unlink(path)
    print("(last ratio: abridge on every core against tiktoken's single thread, as issue 32 asks)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compaction cost: abridge vs LangChain trim_messages, same transcript and budget, one run.

    pip install langchain-core tiktoken
    python3 benches/compare_langchain.py [FILE | toolchat]

FILE defaults to the longest corpus conversation (a Claude Code session). It is
converted to an OpenAI body with `abridge convert`, its o200k_base size measured,
and both tools bring it to 30% of that: LangChain with trim_messages
(strategy="last", the system message kept, start_on="human") and a counter of the
same kind, abridge with Compactor::compact in-process. Best of 20 runs each
(3 for trim_messages with the exact counter). `toolchat` is issue 32's one-shot
workload instead: benches/workload.py's 10,000-message tool chat (about 8 MB)
brought to 128,000 tokens. When the `abridge` package is installed in the same
Python (pip install ./bindings/python), `abridge.compact` on the body as a dict
is timed in this process too, dict in and dict out.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(ROOT, "..", "shared", "tiktoken-cache"))
import tiktoken  # noqa: E402
from langchain_core.messages import convert_to_messages, trim_messages  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

DEFAULT = os.path.join(ROOT, "..", "shared", "corpus", "claude-code_marot-spotter",
                       "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")


def cargo(*args):
    subprocess.run(["cargo", *args], cwd=ROOT, check=True)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    cargo("build", "--release", "-q", "-p", "abridge-cli", "-p", "abridge", "--example", "compact_timing")
    exe = os.path.join(ROOT, "target", "release")
    if src == "toolchat":
        sys.path.insert(0, os.path.join(ROOT, "benches"))
        import workload
        body = json.dumps(workload.toolchat(10000))
    else:
        body = subprocess.run([os.path.join(exe, "abridge"), "convert", src, "--to", "openai", "--compact"],
                              capture_output=True, text=True, check=True).stdout
    stats = json.loads(subprocess.run([os.path.join(exe, "abridge"), "stats", "--json", "-"], input=body,
                                      capture_output=True, text=True, check=True).stdout)
    target = 128000 if src == "toolchat" else stats["tokens"] * 3 // 10
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(body)
        path = f.name
    messages = convert_to_messages(json.loads(body)["messages"])
    enc = tiktoken.get_encoding("o200k_base")

    def exact_counter(msgs):
        n = 0
        for m in msgs:
            n += 3 + len(enc.encode_ordinary(m.content if isinstance(m.content, str) else json.dumps(m.content)))
            for c in getattr(m, "tool_calls", []) or []:
                n += len(enc.encode_ordinary(c["name"] + json.dumps(c["args"])))
        return n

    print(f"transcript: {src}\n{len(messages)} messages, {stats['tokens']} tokens (o200k_base); budget {target}\n")
    for label, counter, tok in [("exact o200k_base", exact_counter, "o200k_base"),
                                ("approximate chars/4", count_tokens_approximately, "estimate")]:
        best, kept = float("inf"), None
        runs = 20 if tok == "estimate" else 3
        for _ in range(runs):
            t = time.perf_counter()
            kept = trim_messages(messages, max_tokens=target, token_counter=counter, strategy="last",
                                 include_system=True, start_on="human", allow_partial=False)
            best = min(best, time.perf_counter() - t)
        rs = json.loads(subprocess.run([os.path.join(exe, "examples", "compact_timing"), path, str(target), tok],
                                       capture_output=True, text=True, check=True).stdout)
        print(f"{label}: trim_messages {best * 1e3:.2f} ms (kept {len(kept)} of {len(messages)} messages); "
              f"abridge {rs['seconds'] * 1e3:.2f} ms ({rs['messages_after']} of {rs['messages']} messages, {rs['tokens_after']} tokens); "
              f"abridge is {best / rs['seconds']:.1f}x faster")
        package = in_process(json.loads(body), target, tok)
        if package is not None:
            print(f"  abridge.compact from Python (dict in, dict out): {package * 1e3:.2f} ms, "
                  f"{best / package:.1f}x faster than trim_messages")
    os.unlink(path)


def in_process(body, target, tokenizer):
    """Best of 5 of the package's compact on `body`, or None without the package."""
    try:
        import abridge
    except ImportError:
        return None
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        abridge.compact(body, target_tokens=target, tokenizer=tokenizer)
        best = min(best, time.perf_counter() - t)
    return best


if __name__ == "__main__":
    main()

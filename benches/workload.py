#!/usr/bin/env python3
"""Synthetic histories for the size benchmarks, deterministic (seeded).

    python3 benches/workload.py toolchat 10000 > toolchat.json   # 10,000 messages, ~8.8 MB
    python3 benches/workload.py tiny 1000000 > tiny-1m.json      # one-word turns
    python3 benches/workload.py distinct 80000 > distinct.json    # a new file or command each call

toolchat: a system prompt; user turns of 10-150 words, half of them followed by
a `read_file` call whose result is 50-600 words; assistant replies of 20-300
words (the workload of issue 32). tiny: alternating one-word user and assistant
messages. distinct: a task, then calls that each read a file or run a command
never seen before (what the facts of a region index by name). All are Chat
Completions bodies on gpt-4o.
"""
import json
import random
import sys

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but "
         "have an they you were her she there been one all we their has would when if so no will more can "
         "who them than some into other time could only new these two may first then do any like my now "
         "over such our man me even most made after also did many before must through back years where much "
         "your way well down should because each just those people how too little state good very make world "
         "still own see men work long get here between both life being under never day same another know "
         "while last might us great old year off come since against go came right used take three "
         "function variable parameter configuration repository implementation interface dependency "
         "request response compaction tokenizer conversation assistant message context boundary "
         "summary identifier database migration transaction connection benchmark throughput").split()


def words(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def toolchat(n):
    rng = random.Random(32)
    messages = [{"role": "system", "content": "You are a careful coding assistant. " + words(rng, 80, 80)}]
    call = 0
    while len(messages) < n:
        messages.append({"role": "user", "content": words(rng, 10, 150)})
        if rng.random() < 0.5 and len(messages) + 3 <= n:
            call += 1
            cid = f"call_{call:06d}"
            path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{call % 97}.py"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]})
            messages.append({"role": "tool", "tool_call_id": cid, "content": words(rng, 50, 600)})
        messages.append({"role": "assistant", "content": words(rng, 20, 300)})
    tools = [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    return {"model": "gpt-4o", "messages": messages[:n], "tools": tools}


def tiny(n):
    roles = ("user", "assistant")
    return {"model": "gpt-4o", "messages": [{"role": roles[i % 2], "content": f"w{i % 10}"} for i in range(n)]}


def distinct(n):
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Build it."}]
    for i in range(n):
        name, args, out = (("read_file", {"path": f"src/mod_{i}.rs"}, f"fn f{i}() {{}}") if i % 2 == 0
                           else ("bash", {"command": f"make target_{i}"}, "ok"))
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    return {"model": "gpt-4o", "messages": messages}


KINDS = {"toolchat": toolchat, "tiny": tiny, "distinct": distinct}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        sys.exit(__doc__)
    body = KINDS[sys.argv[1]](int(sys.argv[2]))
    json.dump(body, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()

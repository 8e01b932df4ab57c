"""The official OpenAI and Anthropic Python SDKs run tool loops through
`abridge serve`, streaming and not, against the fake provider
(`abridge-fake-provider`), which checks every request it receives."""

import json
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

import anthropic
import openai

from harness import ROOT, get, provider, proxy, stop

LIMIT = 6000
TOOLS_OPENAI = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
TOOLS_ANTHROPIC = [{"name": "read_file", "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]


def file_content(turn):
    return "".join(f"def step_{turn}_{k}(x):\n    return x * {k} + {turn}  # line {k}\n" for k in range(30))


class ProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="abridge-sdk-")
        cls.store = os.path.join(cls.tmp, "store.sqlite")
        cls.provider, cls.upstream = provider("--max-tokens", str(LIMIT))
        cls.proxy, cls.url = proxy(cls.upstream, os.path.join(ROOT, "sdk-tests", "harness.toml"),
                                   "--store", cls.store)

    @classmethod
    def tearDownClass(cls):
        stop(cls.proxy, cls.provider)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def report_since(self, start):
        return json.loads(get(self.upstream + "/_report"))["requests"][start:]

    def requests_so_far(self):
        return len(json.loads(get(self.upstream + "/_report"))["requests"])

    def check(self, requests, turns):
        self.assertEqual(len(requests), turns)
        for i, r in enumerate(requests):
            self.assertEqual(r["violations"], [], f"request {i}")
            self.assertFalse(r["over_limit"], f"request {i}: {r['tokens']} tokens")
        breaks = sum(1 for r in requests if r["prefix_kept"] is False)
        return breaks

    def openai_loop(self, turns, stream, session):
        client = openai.OpenAI(base_url=self.url + "/v1", api_key="sk-python-test",
                               default_headers={"x-abridge-session": session, "x-fake-session": session})
        messages = [{"role": "system", "content": "You are a careful coding agent."},
                    {"role": "user", "content": "Read every module and report."}]
        compactions = 0
        for turn in range(turns):
            kwargs = dict(model="fake-model", messages=messages, tools=TOOLS_OPENAI)
            if stream:
                with client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs) as s:
                    calls, content = {}, ""
                    for chunk in s:
                        if not chunk.choices:
                            continue
                        d = chunk.choices[0].delta
                        content += d.content or ""
                        for tc in d.tool_calls or []:
                            c = calls.setdefault(tc.index, {"id": tc.id, "type": "function",
                                                            "function": {"name": tc.function.name, "arguments": ""}})
                            c["function"]["arguments"] += tc.function.arguments or ""
                    message = {"role": "assistant", "content": content, "tool_calls": list(calls.values())}
                    headers = s.response.headers
            else:
                raw = client.chat.completions.with_raw_response.create(**kwargs)
                headers = raw.headers
                message = raw.parse().choices[0].message.model_dump(exclude_none=True)
            compactions += "x-abridge-compacted" in headers
            messages.append(message)
            for c in message.get("tool_calls") or []:
                json.loads(c["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": file_content(turn)})
        return compactions

    def anthropic_loop(self, turns, stream, session):
        client = anthropic.Anthropic(base_url=self.url, api_key="sk-ant-python-test",
                                     default_headers={"x-abridge-session": session, "x-fake-session": session})
        messages = [{"role": "user", "content": "Read every module and report."}]
        compactions = 0
        for turn in range(turns):
            kwargs = dict(model="fake-model", max_tokens=1024, system="You are a careful coding agent.",
                          tools=TOOLS_ANTHROPIC, messages=messages)
            if stream:
                with client.messages.stream(**kwargs) as s:
                    final = s.get_final_message()
                    headers = s.response.headers
            else:
                raw = client.messages.with_raw_response.create(**kwargs)
                headers = raw.headers
                final = raw.parse()
            compactions += "x-abridge-compacted" in headers
            content = [b.model_dump(exclude_none=True) for b in final.content]
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if uses:
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": u["id"], "content": file_content(turn)} for u in uses]})
        return compactions

    def test_openai_sdk_100_turns_stay_under_the_trigger(self):
        start = self.requests_so_far()
        compactions = self.openai_loop(100, stream=False, session="py-openai")
        requests = self.report_since(start)
        breaks = self.check(requests, 100)
        self.assertGreater(compactions, 0)
        self.assertLessEqual(breaks, compactions, "the prefix changes only at compactions")
        metrics = get(self.url + "/metrics")
        self.assertIn("abridge_compactions_total", metrics)
        with sqlite3.connect(self.store) as db:
            self.assertGreater(db.execute("select count(*) from snapshots").fetchone()[0], 0)
            self.assertGreater(db.execute("select count(*) from sessions").fetchone()[0], 0)

    def test_openai_sdk_streaming(self):
        start = self.requests_so_far()
        compactions = self.openai_loop(40, stream=True, session="py-openai-stream")
        requests = self.report_since(start)
        self.assertTrue(all(r["stream"] for r in requests))
        self.assertLessEqual(self.check(requests, 40), compactions)
        self.assertGreater(compactions, 0)

    def test_anthropic_sdk_streaming_and_not(self):
        for stream in (False, True):
            start = self.requests_so_far()
            compactions = self.anthropic_loop(40, stream=stream, session=f"py-anthropic-{stream}")
            requests = self.report_since(start)
            self.assertLessEqual(self.check(requests, 40), compactions)
            self.assertGreater(compactions, 0)


if __name__ == "__main__":
    sys.exit(unittest.main())

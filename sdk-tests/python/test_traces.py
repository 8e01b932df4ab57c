"""Traces reach a real OTLP receiver: Arize Phoenix (from PyPI) is started,
`abridge serve` exports to it by the standard OTEL_EXPORTER_OTLP_* variables,
a tool loop runs through the proxy against the fake provider (whose model
calls the recall tool), and the spans are read back through Phoenix's own
REST API: a span per request continuing the client's trace, a child per
compaction and per recall round, the provider's usage on each, and the
upstream sent the request's own span as its parent."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from harness import ROOT, get, metric, provider, proxy, report, stop

PROJECT = "abridge-traces"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                         "required": ["path"]}}}]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def file_content(turn):
    return "".join(f"def step_{turn}_{k}(x):\n    return x * {k} + {turn}  # line {k}\n" for k in range(30))


def attr(span, key):
    """An attribute, whether Phoenix gives it flat or nested by its dots."""
    attrs = span["attributes"]
    if key in attrs:
        return attrs[key]
    node = attrs
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=60) as r:
        return dict(r.headers), json.loads(r.read())


class TracesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="abridge-traces-")
        port = free_port()
        cls.phoenix_url = f"http://127.0.0.1:{port}"
        env = dict(os.environ, PHOENIX_WORKING_DIR=cls.tmp, PHOENIX_PORT=str(port),
                   PHOENIX_GRPC_PORT=str(free_port()), PHOENIX_HOST="127.0.0.1",
                   PHOENIX_TELEMETRY_ENABLED="false")
        phoenix = os.path.join(os.path.dirname(sys.executable), "phoenix")
        cls.log = open(os.path.join(cls.tmp, "phoenix.log"), "w")
        cls.phoenix = subprocess.Popen([phoenix, "serve"], env=env, stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while True:
            try:
                get(cls.phoenix_url + "/healthz")
                break
            except OSError:
                if time.time() > deadline or cls.phoenix.poll() is not None:
                    raise RuntimeError(f"Phoenix did not start; see {cls.log.name}")
                time.sleep(0.5)
        cls.provider, cls.upstream = provider("--recall", "alone")
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = cls.phoenix_url
        os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = f"x-project-name={PROJECT}"
        try:
            cls.proxy, cls.url = proxy(cls.upstream, os.path.join(ROOT, "sdk-tests", "harness.toml"), "--no-store")
        finally:
            del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], os.environ["OTEL_EXPORTER_OTLP_HEADERS"]

    @classmethod
    def tearDownClass(cls):
        stop(cls.proxy, cls.provider)
        cls.phoenix.terminate()
        cls.phoenix.wait(timeout=30)
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def spans(self):
        out, cursor = [], None
        while True:
            q = f"?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            try:
                page = json.loads(get(f"{self.phoenix_url}/v1/projects/{PROJECT}/spans{q}"))
            except urllib.error.HTTPError as e:
                if e.code == 404:  # no span has arrived yet: the project is made by the first
                    return out
                raise
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def test_spans_follow_the_client_trace_and_carry_usage_compaction_and_recall(self):
        headers = {"authorization": "Bearer sk-traces-test", "x-abridge-session": "traced",
                   "x-fake-session": "traced", "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
        messages = [{"role": "system", "content": "You are a careful coding agent."},
                    {"role": "user", "content": "Read every module and report."}]
        turns, compacted = 14, 0
        for turn in range(turns):
            head, body = post(self.url + "/v1/chat/completions",
                              {"model": "fake-model", "messages": messages, "tools": TOOLS}, headers)
            compacted += "x-abridge-compacted" in {k.lower() for k in head}
            message = body["choices"][0]["message"]
            messages.append(message)
            for c in message.get("tool_calls") or []:
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": file_content(turn)})
        self.assertGreater(compacted, 0, "the loop never went over the trigger")
        sent = report(self.upstream)

        # Spans leave in batches: wait until every request's span is in.
        deadline, spans = time.time() + 60, []
        while time.time() < deadline:
            spans = self.spans()
            if sum(s["name"].startswith("chat ") for s in spans) >= turns:
                break
            time.sleep(0.5)
        chats = [s for s in spans if s["name"].startswith("chat ")]
        self.assertEqual(len(chats), turns, [s["name"] for s in spans])
        by_id = {s["context"]["span_id"]: s for s in spans}

        for s in chats:
            # Each request continues the client's trace, under the client's span.
            self.assertEqual(s["context"]["trace_id"], TRACE_ID)
            self.assertEqual(s["parent_id"], CLIENT_SPAN)
            # Phoenix reads the GenAI conventions: an LLM call.
            self.assertEqual(s["span_kind"], "LLM")
            self.assertEqual(s["name"], "chat fake-model")
            self.assertEqual(attr(s, "gen_ai.provider.name"), "openai")
            self.assertEqual(attr(s, "gen_ai.request.model"), "fake-model")
            self.assertEqual(attr(s, "gen_ai.response.model"), "fake-model")
            self.assertEqual(attr(s, "server.address"), "127.0.0.1")
            self.assertEqual(attr(s, "http.response.status_code"), 200)
            self.assertNotEqual(s["status_code"], "ERROR")
            # No credential and no content in any attribute.
            self.assertNotIn("sk-traces-test", json.dumps(s))
            self.assertNotIn("careful coding agent", json.dumps(s))

        # The provider saw each first round's span as the parent it was sent.
        firsts = [r for r in sent if not r["recalled"]]
        parents = {r["traceparent"].split("-")[2] for r in sent}
        self.assertTrue(all(r["traceparent"].split("-")[1] == TRACE_ID for r in sent))
        self.assertEqual(parents, {s["context"]["span_id"] for s in chats})
        # Each span's input tokens are the provider's count of its first round
        # (the fake provider counts with the tokenizer it reports).
        by_parent = {r["traceparent"].split("-")[2]: r for r in firsts}
        for s in chats:
            self.assertEqual(attr(s, "gen_ai.usage.input_tokens"),
                             by_parent[s["context"]["span_id"]]["tokens"], s["context"]["span_id"])
        client = sum(attr(s, "abridge.tokens.client") for s in chats)
        forwarded = sum(attr(s, "abridge.tokens.forwarded") for s in chats)
        self.assertGreater(client, forwarded)

        compactions = [s for s in spans if s["name"] == "abridge.compaction"]
        self.assertEqual(len(compactions), compacted)
        for c in compactions:
            parent = by_id[c["parent_id"]]
            self.assertTrue(parent["name"].startswith("chat "))
            self.assertTrue(attr(parent, "abridge.compacted"))
            self.assertGreater(attr(c, "abridge.tokens_before"), attr(c, "abridge.tokens_after"))
            self.assertLessEqual(parent["start_time"], c["start_time"])

        rounds = [s for s in spans if s["name"] == "abridge.recall_round"]
        answered = sum(attr(s, "abridge.recall.calls") or 0 for s in chats)
        self.assertGreater(len(rounds), 0, "the model never called the recall tool")
        self.assertEqual(sum(attr(r, "abridge.recall.calls") for r in rounds), answered)
        self.assertEqual(len(rounds), len(sent) - len(firsts))
        for r in rounds:
            self.assertEqual(by_id[r["parent_id"]]["context"]["trace_id"], TRACE_ID)

        print(f"\n  {len(chats)} request spans, {len(compactions)} compactions, {len(rounds)} recall rounds "
              f"({answered} calls); tokens {client:,} from the client, {forwarded:,} forwarded", file=sys.stderr)
        # Nothing was lost on the way.
        m = get(self.url + "/metrics")
        self.assertEqual(metric(m, "abridge_trace_spans_dropped_total"), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

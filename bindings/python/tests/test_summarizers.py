"""``[[summarizers]]`` from the config reach an LLM server on 127.0.0.1 (the
fake provider from ``crates/testkit``), and a summarizer that fails
degrades to the offline fact sheet."""

import json
import os
import pathlib
import socket
import subprocess
import unittest
import urllib.request

import abridge

ROOT = pathlib.Path(__file__).resolve().parents[3]
FAKE = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "abridge-fake-provider"
EXAMPLE = json.loads((ROOT / "examples" / "coding-agent.openai.json").read_text())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(FAKE.exists(), f"{FAKE} not built (cargo build --bins)")
class Summarizers(unittest.TestCase):
    def setUp(self):
        self.server = subprocess.Popen([str(FAKE), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
        line = self.server.stdout.readline()
        self.url = next(w for w in line.split() if w.startswith("http://")).rstrip(");")

    def tearDown(self):
        self.server.terminate()
        self.server.wait()
        self.server.stdout.close()

    def compact(self, base_url):
        config = {"budget": {"min_iterations": 2}, "summarizers": [
            {"kind": "openai", "model": "fake-model", "base_url": base_url, "timeout_secs": 5}]}
        return abridge.compact(EXAMPLE, target_tokens=700, config=config)

    def test_the_configured_llm_is_asked(self):
        out = self.compact(f"{self.url}/v1")
        attempts = out["report"]["attempts"]
        self.assertEqual(attempts[0]["summarizer"], "openai:fake-model")
        with urllib.request.urlopen(f"{self.url}/_report") as r:
            seen = json.load(r)["requests"]
        self.assertEqual(len(seen), 1, "the summarizer's request reached the server")
        self.assertLessEqual(out["report"]["tokens_after"], 700)
        self.assertEqual(abridge.validate(out["body"]), [])

    def test_a_failing_llm_degrades_to_the_offline_sheet(self):
        out = self.compact(f"http://127.0.0.1:{closed_port()}/v1")
        report = out["report"]
        self.assertEqual(report["attempts"][0]["summarizer"], "openai:fake-model")
        self.assertEqual(report["summarizer"], "offline")
        self.assertIn("<compacted-history>", json.dumps(out["body"]))
        self.assertEqual(abridge.validate(out["body"]), [])


if __name__ == "__main__":
    unittest.main()

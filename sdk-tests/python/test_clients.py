"""Real agent clients, as shipped, through `abridge serve`: Claude Code (npm
`@anthropic-ai/claude-code`, pinned in sdk-tests/clients), Codex (npm
`@openai/codex`, pinned there, on the Responses API), Gemini CLI (npm
`@google/gemini-cli`, pinned there, on the Gemini API) and the OpenAI Agents
SDK (PyPI `openai-agents`, pinned) on both the Responses API, its default,
and Chat Completions. The fake
provider plays a scripted model (`--script`) that has each client run 60
real shell commands printing 8-20 KB through its own shell tool; each
client runs once directly against the provider and once through the proxy,
and the provider checks every request it gets. Telemetry and update checks
are off through the clients' own variables, their config lives in a
temporary directory, and nothing leaves 127.0.0.1.

Prints one line per run with the figures the closing notes quote."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from harness import ROOT, get, metric, provider, proxy, report, stop

STEPS = 60
TASK = "Read every build log the tools print, one after the other, and say when you are done."
CLAUDE = os.path.join(ROOT, "sdk-tests", "clients", "node_modules", "@anthropic-ai", "claude-code",
                      "bin", "claude.exe")
CODEX = os.path.join(ROOT, "sdk-tests", "clients", "node_modules", "@openai", "codex", "bin", "codex.js")
GEMINI = os.path.join(ROOT, "sdk-tests", "clients", "node_modules", "@google", "gemini-cli", "bundle",
                      "gemini.js")
DONE = "All steps are done"


def config(tmp, trigger):
    path = os.path.join(tmp, f"trigger-{trigger}.toml")
    with open(path, "w") as f:
        f.write(f"[trigger]\nmax_tokens = {trigger}\n")
    return path


def claude_code(base_url, home, extra_env):
    """Claude Code in print mode, allowed to run Bash, with only the base
    URL, a key and its telemetry switches set; its answer."""
    work = os.path.join(home, "work")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(work)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-client-test",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **extra_env,
    }
    done = subprocess.run([CLAUDE, "-p", TASK, "--allowedTools", "Bash"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def codex(base_url, home):
    """Codex in exec mode with a model provider at the base URL (the
    Responses API), commands run without sandbox or approval, update checks
    and analytics off; its answer."""
    work = os.path.join(home, "work")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f"""model = "gpt-5-codex"
model_provider = "test"
check_for_update_on_startup = false

[model_providers.test]
name = "test provider"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "CODEX_TEST_KEY"

[analytics]
enabled = false
""")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "CODEX_HOME": home,
        "CODEX_TEST_KEY": "sk-codex-test",
    }
    done = subprocess.run(["node", CODEX, "exec", "--skip-git-repo-check",
                           "--dangerously-bypass-approvals-and-sandbox", TASK],
                          cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def gemini_cli(base_url, home):
    """Gemini CLI in non-interactive mode with an API key and its base URL
    at the proxy, every tool allowed (`--yolo`), telemetry, usage
    statistics, update checks and folder trust off in its settings; its
    answer."""
    work = os.path.join(home, "work")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(work)
    os.makedirs(os.path.join(home, ".gemini"))
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        json.dump(settings, f)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "GEMINI_API_KEY": "gemini-client-test",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_NO_RELAUNCH": "1",
        "NO_COLOR": "1",
    }
    done = subprocess.run(["node", GEMINI, "-p", TASK, "--yolo", "-m", "gemini-2.5-pro"], cwd=work, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def agents_sdk(base_url, responses=False, run_config=None, tools=(), headers=None):
    """An OpenAI Agents SDK agent with a shell tool (and `tools`), on the
    Responses API (the SDK's default model class) or on Chat Completions,
    its client sending `headers`; its answer."""
    from agents import (Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner,
                        function_tool, set_tracing_disabled)
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def run_shell(command: str) -> str:
        """Run a shell command and return what it printed."""
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        return out.stdout + out.stderr

    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-agents-test", default_headers=headers)
    kind = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    model = kind(model="gpt-4o", openai_client=client)
    agent = Agent(name="builder", instructions="You read build logs with the shell tool.",
                  tools=[run_shell, *tools], model=model)
    result = asyncio.run(Runner.run(agent, TASK, max_turns=STEPS + 30, run_config=run_config or RunConfig()))
    return result.final_output


class Run:
    """One client run against a fresh provider, through a proxy or not."""

    def __init__(self, test, client, trigger=None, limit=None, recall=False):
        self.test, self.tmp = test, test.tmp
        flags = ["--script", str(STEPS)] + (["--max-tokens", str(limit)] if limit else [])
        flags += ["--recall", "alone"] if recall else []
        self.provider, self.upstream = provider(*flags)
        self.proxy, self.url = (None, self.upstream)
        if trigger:
            self.proxy, self.url = proxy(self.upstream, config(self.tmp, trigger), "--no-store")
        try:
            self.answer = client(self.url)
            self.requests = report(self.upstream)
            self.metrics = get(self.url + "/metrics") if self.proxy else ""
        finally:
            stop(*[p for p in (self.proxy, self.provider) if p])

    def peak(self):
        return max(r["tokens"] for r in self.requests)

    def count(self, prefix):
        return metric(self.metrics, prefix)

    def check_valid(self, step=lambda r: True):
        """Every request (or every one `step` picks) valid for its API."""
        for i, r in enumerate(self.requests):
            if step(r):
                self.test.assertEqual(r["violations"], [], f"request {i}")

    def summary(self, name):
        fast = self.count('abridge_decoded_total{part="added"}')
        line = (f"{name}: {len(self.requests)} requests, peak {self.peak():,} tokens, "
                f"{self.count('abridge_compactions_total'):.0f} compactions, "
                f"{fast:.0f} decoded by the fast path")
        print(line, file=sys.stderr)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="abridge-clients-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def claude(self, trigger=None, limit=None, env=None):
        home = os.path.join(self.tmp, "claude-home")
        return Run(self, lambda url: claude_code(url, home, env or {}), trigger, limit)

    @unittest.skipUnless(os.path.exists(CLAUDE), "Claude Code is not installed (npm ci in sdk-tests/clients)")
    def test_claude_code_as_shipped_stays_under_the_trigger(self):
        direct = self.claude()
        direct.summary("claude code, direct")
        self.assertIn(DONE, direct.answer)
        self.assertGreater(direct.peak(), 200_000, "the run grows far past the trigger without abridge")
        run = self.claude(trigger=40_000, limit=40_000)
        run.summary("claude code, through abridge (trigger 40,000)")
        self.assertEqual(run.answer, direct.answer, "finishes like the direct run")
        self.assertEqual(len(run.requests), len(direct.requests))
        run.check_valid()
        self.assertLessEqual(run.peak(), 40_000)
        self.assertGreaterEqual(run.count("abridge_compactions_total"), 1)
        heads = {r["head_hash"] for r in run.requests}
        self.assertEqual(heads, {r["head_hash"] for r in direct.requests}, "system prompt and tools as sent")
        self.assertLessEqual(max(r["cache_breakpoints"] for r in run.requests), 4)
        self.assertGreaterEqual(run.count('abridge_decoded_total{part="added"}'), 55)
        self.assertEqual(run.count("abridge_passthrough_total"), run.count(
            'abridge_passthrough_total{why="unchanged"}'), "nothing forwarded for want of understanding")

    @unittest.skipUnless(os.path.exists(CLAUDE), "Claude Code is not installed (npm ci in sdk-tests/clients)")
    def test_claude_code_without_betas_never_goes_out_whole(self):
        run = self.claude(trigger=30_000, limit=30_000, env={"CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1"})
        run.summary("claude code without betas, through abridge (trigger 30,000)")
        self.assertIn(DONE, run.answer)
        run.check_valid()
        over = [r["tokens"] for r in run.requests if r["over_limit"]]
        self.assertEqual(over, [], "every request at or under the trigger")
        self.assertEqual(run.count("abridge_over_target_total"), 0)
        self.assertGreaterEqual(run.count("abridge_compactions_total"), 1)

    def direct_then_through(self, name, client, grows_past):
        """`client` run directly, where it grows past `grows_past` tokens, then
        through the proxy with a 30,000 trigger: both finish, with as many
        requests."""
        direct = Run(self, client)
        direct.summary(f"{name}, direct")
        self.assertIn(DONE, direct.answer)
        self.assertGreater(direct.peak(), grows_past, "the run grows far past the trigger without abridge")
        run = Run(self, client, trigger=30_000, limit=30_000)
        run.summary(f"{name}, through abridge (trigger 30,000)")
        self.assertIn(DONE, run.answer)
        self.assertEqual(len(run.requests), len(direct.requests))
        return direct, run

    @unittest.skipUnless(os.path.exists(CODEX), "Codex is not installed (npm ci in sdk-tests/clients)")
    def test_codex_as_shipped_stays_under_the_trigger(self):
        home = os.path.join(self.tmp, "codex-home")
        _, run = self.direct_then_through("codex", lambda url: codex(url, home), 150_000)
        run.check_valid()
        self.assertLessEqual(run.peak(), 30_000)
        self.assertGreaterEqual(run.count("abridge_compactions_total"), 1)
        self.assertTrue(all(r["path"] == "/v1/responses" for r in run.requests))
        self.assertGreater(max(r["reasoning_items"] for r in run.requests), 5)
        self.assertEqual(sum(r["altered_reasoning"] for r in run.requests), 0, "reasoning kept byte for byte")
        breaks = sum(r["prefix_kept"] is False for r in run.requests)
        self.assertLessEqual(breaks, run.count("abridge_compactions_total"), "prefix kept between compactions")
        # Codex gives its items new ids each run: its developer messages and
        # tools are the same on every request, as its first went (under the trigger).
        self.assertEqual(len({r["head_hash"] for r in run.requests}), 1, "instructions and tools as sent")
        self.assertGreaterEqual(run.count('abridge_decoded_total{part="added"}'), 55)
        self.assertEqual(run.count("abridge_passthrough_total"), run.count(
            'abridge_passthrough_total{why="unchanged"}'), "nothing forwarded for want of understanding")

    @unittest.skipUnless(os.path.exists(GEMINI), "Gemini CLI is not installed (npm ci in sdk-tests/clients)")
    def test_gemini_cli_as_shipped_stays_under_the_trigger(self):
        home = os.path.join(self.tmp, "gemini-home")
        direct, run = self.direct_then_through("gemini cli", lambda url: gemini_cli(url, home), 100_000)
        # The agent's own steps go to the model it was given; its side
        # queries (next-speaker and loop checks) to a flash model.
        main = [r for r in run.requests if "/gemini-2.5-pro:streamGenerateContent" in r["path"]]
        self.assertEqual(len(main), STEPS + 1)
        for i, r in enumerate(main):
            self.assertEqual(r["violations"], [], f"step {i}")
            self.assertLessEqual(r["tokens"], 30_000, f"step {i}")
        # Gemini CLI's loop check sends its last history entries with the
        # newest call unanswered (text and a call in one turn survive its
        # trim): invalid as sent, so the proxy forwards it as sent.
        invalid = lambda rs: [i for i, r in enumerate(rs) if r["violations"]]
        self.assertEqual(invalid(run.requests), invalid(direct.requests), "no request made invalid")
        over = [i for i, r in enumerate(run.requests) if r["tokens"] > 30_000]
        self.assertLessEqual(set(over), set(invalid(direct.requests)), "over the trigger only as sent")
        self.assertEqual(run.count('abridge_passthrough_total{why="undecodable"}'), len(invalid(direct.requests)))
        self.assertGreaterEqual(run.count("abridge_compactions_total"), 1)
        self.assertGreater(max(r["reasoning_items"] for r in run.requests), 5)
        self.assertEqual(sum(r["altered_reasoning"] for r in run.requests), 0, "signatures kept byte for byte")
        self.assertGreaterEqual(run.count('abridge_decoded_total{part="added"}'), 50)
        self.assertEqual(run.count('abridge_requests_total{route="gemini"'), len(run.requests))

    def recalls_through_abridge(self, name, client, trigger, step=lambda r: True):
        """A model that, once the history is compacted, recalls an original by
        the first handle it reads before each step: the proxy answers it and
        continues upstream, and the client, as shipped, reads one response
        per request with no trace of the tool and runs every step."""
        run = Run(self, client, trigger=trigger, limit=trigger, recall=True)
        continued = [r for r in run.requests if r["recalled"]]
        own = [r for r in run.requests if not r["recalled"]]
        print(f"{name}, recalling through abridge (trigger {trigger:,}): {len(own)} client requests, "
              f"{len(continued)} recall rounds, {run.count('abridge_recall_bytes_total'):,.0f} bytes recalled",
              file=sys.stderr)
        self.assertIn(DONE, run.answer)
        self.assertEqual(len([r for r in own if step(r)]), STEPS + 1, "each step asked once, as in a direct run")
        run.check_valid(step)
        self.assertGreaterEqual(len(continued), 10)
        for r in continued:
            self.assertNotIn("no original is kept", r["recalled"][0])
        self.assertEqual(sum(r["recall_calls"] for r in own), 0, "the client never saw the tool")
        self.assertTrue(all(r["prefix_kept"] for r in continued), "a continuation extends the client's request")
        self.assertEqual(run.count('abridge_recalls_total{outcome="found"}'), len(continued))
        self.assertEqual(sum(r["altered_reasoning"] for r in run.requests), 0, "reasoning kept byte for byte")
        return run

    @unittest.skipUnless(os.path.exists(CLAUDE), "Claude Code is not installed (npm ci in sdk-tests/clients)")
    def test_claude_code_reads_a_recalled_original_through_the_proxy(self):
        self.recalls_through_abridge("claude code", lambda url: claude_code(
            url, os.path.join(self.tmp, "claude-home"), {}), 40_000)

    @unittest.skipUnless(os.path.exists(CODEX), "Codex is not installed (npm ci in sdk-tests/clients)")
    def test_codex_reads_a_recalled_original_through_the_proxy(self):
        self.recalls_through_abridge("codex", lambda url: codex(url, os.path.join(self.tmp, "codex-home")),
                                     30_000)

    @unittest.skipUnless(os.path.exists(GEMINI), "Gemini CLI is not installed (npm ci in sdk-tests/clients)")
    def test_gemini_cli_reads_a_recalled_original_through_the_proxy(self):
        self.recalls_through_abridge("gemini cli", lambda url: gemini_cli(url, os.path.join(self.tmp, "gemini-home")),
                                     30_000, step=lambda r: "/gemini-2.5-pro:" in r["path"])

    def test_agents_sdk_on_responses_reads_a_recalled_original_through_the_proxy(self):
        self.recalls_through_abridge("agents sdk (responses)", lambda url: agents_sdk(url, True), 30_000)

    def agents_sdk_through_abridge(self, responses):
        """The Agents SDK directly, then through the proxy: it finishes the
        same way with every request under the trigger."""
        api, path = ("responses", "/v1/responses") if responses else ("chat completions", "/v1/chat/completions")
        client = lambda url: agents_sdk(url, responses)
        direct = Run(self, client)
        direct.summary(f"agents sdk ({api}), direct")
        self.assertIn(DONE, direct.answer)
        run = Run(self, client, trigger=30_000, limit=30_000)
        run.summary(f"agents sdk ({api}), through abridge (trigger 30,000)")
        self.assertEqual(run.answer, direct.answer)
        self.assertEqual(len(run.requests), len(direct.requests))
        self.assertTrue(all(r["path"] == path for r in run.requests))
        run.check_valid()
        self.assertLessEqual(run.peak(), 30_000)
        self.assertGreaterEqual(run.count("abridge_compactions_total"), 1)

    def test_agents_sdk_on_responses_stays_under_the_trigger(self):
        self.agents_sdk_through_abridge(responses=True)

    def test_agents_sdk_with_the_in_process_filter_stays_under_the_trigger(self):
        try:
            from abridge.agents import AbridgeInputFilter
        except ImportError:
            self.skipTest("the abridge Python package is not installed in this virtualenv")
        from agents import RunConfig

        hook = AbridgeInputFilter(trigger_tokens=30_000)
        run = Run(self, lambda url: agents_sdk(url, True, RunConfig(call_model_input_filter=hook)),
                  limit=30_000)
        print(f"agents sdk (responses), abridge in-process (trigger 30,000): {len(run.requests)} requests, "
              f"peak {run.peak():,} tokens, {hook.compactions} compactions", file=sys.stderr)
        self.assertIn(DONE, run.answer)
        self.assertEqual(len(run.requests), STEPS + 1)
        run.check_valid()
        self.assertLessEqual(run.peak(), 30_000)
        self.assertGreaterEqual(hook.compactions, 1)
        self.assertIsNone(hook.last_error)

    def test_agents_sdk_with_the_mycoder_preset_compacts_when_its_status_says_so(self):
        """mycoder's design in-process: the filter adds a status note every
        third call; the model (told of the tool) calls it once the note says
        the context is full; the next call is smaller."""
        try:
            from abridge.agents import AbridgeInputFilter
        except ImportError:
            self.skipTest("the abridge Python package is not installed in this virtualenv")
        from agents import RunConfig

        hook = AbridgeInputFilter(preset="mycoder", model="gpt-4o",
                                  config={"agent": {"status_every": 3, "hint_at": 0.25}})
        tool = hook.compact_tool()
        self.assertEqual(tool.name, "compactHistory")
        run = Run(self, lambda url: agents_sdk(url, True, RunConfig(call_model_input_filter=hook), tools=[tool],
                                                headers={"x-fake-compact": "compactHistory"}))
        tokens = [r["tokens"] for r in run.requests]
        noted = [i for i, r in enumerate(run.requests) if r["status_note"]]
        calls = [i for i, r in enumerate(run.requests[1:]) if r["compact_calls"] > run.requests[i]["compact_calls"]]
        print(f"agents sdk (responses), mycoder in-process: {len(tokens)} requests, peak {max(tokens):,} tokens, "
              f"notes at {noted}, {hook.compactions} compactions", file=sys.stderr)
        self.assertIn(DONE, run.answer)
        run.check_valid()
        self.assertEqual(noted, [i for i in range(len(tokens)) if (i + 1) % 3 == 0])
        self.assertGreaterEqual(hook.compactions, 1)
        self.assertIsNone(hook.last_error)
        # The request after the one answered by a call of the tool carries
        # the compacted history: smaller than the one that called.
        self.assertTrue(calls, "the model never called the tool")
        for i in calls:
            self.assertLess(tokens[i + 1], tokens[i] * 3 // 4, f"request {i + 1}: {tokens}")

    def test_agents_sdk_on_chat_completions_stays_under_the_trigger(self):
        self.agents_sdk_through_abridge(responses=False)

if __name__ == "__main__":
    sys.exit(unittest.main())

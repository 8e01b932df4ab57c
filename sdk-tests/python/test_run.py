"""`abridge run <agent>` with the real agents, as shipped (pinned in
sdk-tests/clients): Claude Code, Codex, Gemini CLI, OpenCode and GitHub
Copilot CLI (BYOK), each set up the way a
user with a gateway sets it up (its own documented variable or config file
pointing at the fake provider), run once directly and once as
`abridge run <agent> -- …` with nothing else changed. Through abridge the
agent finishes as it does directly, with as many requests, every one valid
and bounded; the exit summary's figures equal what the providers logged;
the user's config files are byte for byte what the agent alone makes of
them (the direct run's), and no file in the agent's home names the proxy. Telemetry and update checks are off,
HOME is a temporary directory, nothing leaves 127.0.0.1.

Prints one line per run with the figures the closing notes quote."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from harness import BIN, ROOT, provider, report, stop

STEPS = 24
TRIGGER = 30_000
TASK = "Read every build log the tools print, one after the other, and say when you are done."
DONE = "All steps are done"
NODE_MODULES = os.path.join(ROOT, "sdk-tests", "clients", "node_modules")
# OpenCode's platform package is pinned itself (its wrapper's lock would need
# every platform's binary): its bin/ holds the `opencode` executable.
BIN_DIRS = [os.path.join(NODE_MODULES, ".bin"), os.path.join(NODE_MODULES, "opencode-linux-x64", "bin")]
ABRIDGE = os.path.join(BIN, "abridge")


def installed(name):
    return any(os.path.exists(os.path.join(d, name)) for d in BIN_DIRS)


def claude(home, upstream):
    """Claude Code in print mode with ANTHROPIC_BASE_URL at the gateway."""
    env = {"CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"), "ANTHROPIC_BASE_URL": upstream,
           "ANTHROPIC_API_KEY": "sk-ant-client-test", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    os.makedirs(os.path.join(home, ".claude"))
    with open(os.path.join(home, ".claude", "settings.json"), "w") as f:
        json.dump({"permissions": {"allow": ["Bash"]}}, f)
    return ["-p", TASK, "--allowedTools", "Bash"], env


def codex(home, upstream):
    """Codex in exec mode, its built-in OpenAI provider at the gateway
    through `openai_base_url` in its config.toml."""
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home)
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f'model = "gpt-5-codex"\nopenai_base_url = "{upstream}/v1"\n'
                "check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n")
    env = {"CODEX_HOME": codex_home, "OPENAI_API_KEY": "sk-codex-test"}
    return ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK], env


def gemini(home, upstream):
    """Gemini CLI with an API key and GOOGLE_GEMINI_BASE_URL at the gateway."""
    os.makedirs(os.path.join(home, ".gemini"))
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        json.dump(settings, f)
    env = {"GEMINI_API_KEY": "gemini-client-test", "GOOGLE_GEMINI_BASE_URL": upstream,
           "GEMINI_CLI_NO_RELAUNCH": "1", "NO_COLOR": "1"}
    return ["-p", TASK, "--yolo", "-m", "gemini-2.5-pro"], env


def opencode(home, upstream):
    """OpenCode's `run` with Claude, its Anthropic provider at the gateway
    in its global opencode.json; autoupdate and sharing off."""
    config_dir = os.path.join(home, ".config", "opencode")
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "opencode.json"), "w") as f:
        json.dump({"autoupdate": False, "share": "disabled",
                   "provider": {"anthropic": {"options": {"baseURL": f"{upstream}/v1"}}}}, f)
    env = {"ANTHROPIC_API_KEY": "sk-ant-client-test", "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_MODELS_FETCH": "1", "XDG_CONFIG_HOME": os.path.join(home, ".config")}
    return ["run", "-m", "anthropic/claude-sonnet-4-5", TASK], env


def copilot(home, upstream):
    """GitHub Copilot CLI with a model provider of one's own (BYOK, Chat
    Completions) at the gateway, every tool allowed, auto-update off."""
    env = {"COPILOT_PROVIDER_BASE_URL": f"{upstream}/v1", "COPILOT_PROVIDER_API_KEY": "sk-copilot-test",
           "COPILOT_MODEL": "gpt-4o", "COPILOT_AUTO_UPDATE": "false"}
    return ["-p", TASK, "--allow-all-tools"], env


def hashes(home):
    """The hash of every file under `home`, by path."""
    out = {}
    for d, _, files in os.walk(home):
        for name in files:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, home)] = hashlib.sha256(f.read()).hexdigest()
    return out


def naming(home, needle):
    """Files under `home` whose bytes contain `needle`."""
    found = []
    for d, _, files in os.walk(home):
        for name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as f:
                    if needle.encode() in f.read():
                        found.append(os.path.relpath(p, home))
            except OSError:
                pass
    return found


class Launch:
    """One run of `name` against a fresh provider: directly, or as
    `abridge run name` (`through`)."""

    def __init__(self, tmp, name, setup, through):
        # The same home both ways: the agent's requests name their paths.
        self.home = os.path.join(tmp, name)
        shutil.rmtree(self.home, ignore_errors=True)
        work = os.path.join(self.home, "work")
        os.makedirs(work)
        self.provider, self.upstream = provider("--script", str(STEPS), "--max-tokens", str(TRIGGER))
        try:
            args, env = setup(self.home, self.upstream)
            env.update({"HOME": self.home, "PATH": ":".join(BIN_DIRS + ["/usr/local/bin", "/usr/bin", "/bin"])})
            self.config_files = {p: h for p, h in hashes(self.home).items()}
            self.summary_path = os.path.join(tmp, f"{name}-summary.json")
            if through:
                config = os.path.join(tmp, "trigger.toml")
                with open(config, "w") as f:
                    f.write(f"[trigger]\nmax_tokens = {TRIGGER}\n")
                argv = [ABRIDGE, "run", name, "--store", os.path.join(tmp, f"{name}.sqlite"),
                        "--config", config, "--summary", self.summary_path, "--", *args]
            else:
                argv = [name, *args]
            done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=900)
            self.code, self.answer, self.stderr = done.returncode, done.stdout, done.stderr
            self.requests = report(self.upstream)
            self.after = hashes(self.home)
        finally:
            stop(self.provider)

    def tokens(self):
        return sum(r["tokens"] for r in self.requests)

    def summary(self):
        with open(self.summary_path) as f:
            return json.load(f)


@unittest.skipUnless(os.path.exists(ABRIDGE), "abridge is not built (cargo build)")
class RunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="abridge-run-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def through_abridge_run(self, name, setup, tolerance):
        direct = Launch(self.tmp, name, setup, through=False)
        self.assertEqual(direct.code, 0, direct.answer + direct.stderr)
        self.assertIn(DONE, direct.answer)
        run = Launch(self.tmp, name, setup, through=True)
        self.assertEqual(run.code, 0, run.answer + run.stderr)
        self.assertIn(DONE, run.answer, "finishes as it does directly")
        self.assertEqual(len(run.requests), len(direct.requests))
        for i, r in enumerate(run.requests):
            self.assertEqual(r["violations"], [], f"request {i}")
            self.assertFalse(r["over_limit"], f"request {i}: {r['tokens']} tokens")
        s = run.summary()
        t = s["summary"]["totals"]
        print(f"{name} through abridge run: {t['requests']} requests, {s['summary']['compactions']} compactions, "
              f"{t['client_tokens']:,} tokens sent by the agent (directly: {direct.tokens():,}), "
              f"{t['forwarded_tokens']:,} forwarded (provider: {run.tokens():,}), "
              f"${t['cost_compared']:.4f} with, ${t['cost_without']:.4f} without", file=sys.stderr)
        self.assertGreaterEqual(s["summary"]["compactions"], 1)
        self.assertEqual(t["requests"], len(run.requests), "every request accounted")
        self.assertEqual(t["forwarded_tokens"], run.tokens(), "forwarded: what the provider logged")
        # What the agent sent: the provider's report, plus what abridge left
        # out as it counts it. The agent's own requests differ from run to run
        # by a few tokens (its commands' output), and the part left out is
        # counted in the provider's units by a learned calibration where the
        # model's tokenizer is estimated (Claude, Gemini; the fake provider
        # counts o200k_base), exactly where it is not (Codex's).
        error = abs(t["client_tokens"] - direct.tokens()) / direct.tokens()
        print(f"{name}: tokens sent by the agent {t['client_tokens']:,}, the direct run's provider logged "
              f"{direct.tokens():,} ({100 * error:.2f}% apart)", file=sys.stderr)
        self.assertLess(error, tolerance)
        self.assertIn(f"abridge run: {name} exited with 0", run.stderr)
        self.assertIn(f"forwarded {run.tokens():,}", run.stderr)
        # The user's config files end as the agent alone leaves them (Gemini
        # CLI rewrites its settings.json itself); no file names the proxy.
        for path, before in run.config_files.items():
            if direct.after.get(path) == direct.config_files[path]:
                self.assertEqual(run.after.get(path), before, f"{path} changed")
            elif before == direct.config_files[path]:
                self.assertEqual(run.after.get(path), direct.after.get(path), f"{path} differs from the direct run's")
        self.assertEqual(naming(run.home, s["proxy"]), [], "a file names the proxy's address")
        return direct, run

    @unittest.skipUnless(installed("claude"), "Claude Code is not installed (npm ci in sdk-tests/clients)")
    def test_claude_code(self):
        direct, run = self.through_abridge_run("claude", claude, 0.08)
        self.assertEqual(run.answer, direct.answer)

    @unittest.skipUnless(installed("codex"), "Codex is not installed (npm ci in sdk-tests/clients)")
    def test_codex(self):
        self.through_abridge_run("codex", codex, 0.005)

    @unittest.skipUnless(installed("gemini"), "Gemini CLI is not installed (npm ci in sdk-tests/clients)")
    def test_gemini_cli(self):
        self.through_abridge_run("gemini", gemini, 0.08)


    @unittest.skipUnless(installed("opencode"), "OpenCode is not installed (npm ci in sdk-tests/clients)")
    def test_opencode(self):
        self.through_abridge_run("opencode", opencode, 0.08)

    @unittest.skipUnless(installed("copilot"), "Copilot CLI is not installed (npm ci in sdk-tests/clients)")
    def test_copilot_cli_byok(self):
        self.through_abridge_run("copilot", copilot, 0.02)


if __name__ == "__main__":
    sys.exit(unittest.main())

"""Every Python sample in the README and the book, run as written.

Each sample runs in a namespace that holds what its prose takes as given
(a request body, the messages a loop added, a model, a tool); a sample
that awaits runs in an event loop. The samples that use the OpenAI Agents
SDK need its virtualenv and the rest LangChain's: test-all.sh runs this
file in both, and each says which samples it leaves to the other. An
Agents SDK run goes to the fake provider, never outside the machine.
"""

import ast
import asyncio
import importlib.util
import json
import os
import re
import unittest

from harness import ROOT, provider, stop

PAGES = ["README.md", "docs/src/packages.md"]


def samples():
    """(page, line, code) of every ```python block of PAGES."""
    out = []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            out.append((page, text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def needs(code):
    """The top-level packages a sample imports."""
    names = set()
    for node in ast.walk(ast.parse(code, mode="exec", type_comments=False)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def given(upstream):
    """What the samples' prose takes as given."""
    ns = {"__name__": "sample"}
    with open(os.path.join(ROOT, "examples", "coding-agent.openai.json"), encoding="utf-8") as f:
        ns["body"] = json.load(f)
    ns["new_messages"] = [{"role": "user", "content": "Go on with the next file."}]
    ns["prompt_tokens"] = None
    ns["sent"] = []
    ns["send"] = ns["sent"].append
    if importlib.util.find_spec("langchain_core"):
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        ns["model"] = GenericFakeChatModel(messages=iter([AIMessage(content="done")]))
        ns["tools"] = []
    if importlib.util.find_spec("agents"):
        from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)

        @function_tool
        def run_shell(command: str) -> str:
            """Run a shell command and return what it printed."""
            return f"ran {command}"

        client = AsyncOpenAI(base_url=upstream + "/v1", api_key="sk-docs-test")
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        ns["run_shell"] = run_shell
        ns["agent"] = Agent(name="builder", instructions="Answer briefly.", model=model)
        ns["task"] = "Say that the build is green."
    return ns


def run(code, ns):
    """Runs a sample in `ns`, in an event loop when it awaits."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, "<sample>", "exec", flags=flags)
    result = eval(compiled, ns)  # noqa: S307 - the book's own samples
    if asyncio.iscoroutine(result):
        asyncio.run(result)


class DocSamples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.provider, cls.upstream = provider()

    @classmethod
    def tearDownClass(cls):
        stop(cls.provider)

    def test_every_python_sample_runs(self):
        found = samples()
        self.assertGreaterEqual(len(found), 5, "the pages hold fewer samples than they did")
        ran, left = 0, []
        for page, line, code in found:
            missing = sorted(n for n in needs(code) if importlib.util.find_spec(n) is None)
            if missing:
                left.append(f"{page}:{line} (needs {', '.join(missing)})")
                continue
            with self.subTest(sample=f"{page}:{line}"):
                ns = given(self.upstream)
                run(code, ns)
                if "session.turn" in code:
                    self.assertTrue(ns["sent"], "the session's messages were sent")
                if "out = abridge.compact" in code:
                    self.assertLess(ns["report"]["tokens_after"], ns["report"]["tokens_before"] + 1)
                if "Runner.run" in code:
                    self.assertTrue(ns["result"].final_output)
                if "compact_tool()" in code:
                    names = [t.name for t in ns["agent"].tools]
                    self.assertIn("compactHistory", names)
                ran += 1
        print(f"{ran} samples ran here; left to the other virtualenv: {left or 'none'}")
        self.assertGreater(ran, 0)


if __name__ == "__main__":
    unittest.main()

"""AbridgeMiddleware in a real LangChain v1 ``create_agent`` loop: a scripted
chat model calls a browsing tool 50 times; every model call gets a history
under the trigger with every tool call paired, while the agent's state
keeps every message."""

import asyncio
import os
import sqlite3
import tempfile
import unittest
from typing import Any, List

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

import abridge
import abridge.langchain
from abridge.langchain import AbridgeMiddleware

STEPS = 50
TRIGGER = 20_000
TARGET = 12_000


@tool
def read_page(url: str) -> str:
    """Open a page and return its snapshot."""
    rows = "\n".join(f'- row "Fare {url[-3:]}-{k} CHF {180 + k}" [ref=e{k}]' for k in range(90))
    return f"<EXTERNAL-CONTENT>\nPage: {url}\n{rows}\n</EXTERNAL-CONTENT>"


class ScriptedModel(BaseChatModel):
    """Calls read_page STEPS - 1 times, then answers; records what it was sent."""

    seen: List[List[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        n = len(self.seen)
        self.seen.append(list(messages))
        if n < STEPS - 1:
            call = {"name": "read_page", "args": {"url": f"https://fly.example/p{n:03}"}, "id": f"call_{n}", "type": "tool_call"}
            msg = AIMessage("", tool_calls=[call])
        else:
            msg = AIMessage("The cheapest fare is CHF 180.")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def check_calls(case: unittest.TestCase, seen: List[List[BaseMessage]]) -> int:
    """Every call under the trigger and valid; returns the peak."""
    peak = 0
    for i, sent in enumerate(seen):
        dicts = abridge.langchain.to_dicts(sent)
        tokens = abridge.count_tokens(dicts)
        peak = max(peak, tokens)
        case.assertLessEqual(tokens, TRIGGER, f"call {i}")
        case.assertEqual(abridge.validate(dicts), [], f"call {i}: pairing")
    return peak


class AgentLoop(unittest.TestCase):
    def run_agent(self, run):
        model = ScriptedModel(seen=[])
        reports = []
        store = os.path.join(tempfile.mkdtemp(), "store.sqlite")
        middleware = AbridgeMiddleware(
            trigger_tokens=TRIGGER, target_tokens=TARGET, store=store, source="langchain-test", on_compact=reports.append
        )
        agent = create_agent(model=model, tools=[read_page], system_prompt="You are a web agent.", middleware=[middleware])
        state = run(agent, {"messages": [{"role": "user", "content": "Find the cheapest fare to Lisbon."}]})
        self.assertEqual(len(model.seen), STEPS)
        self.assertEqual(len(state["messages"]), 2 * STEPS, "the agent's state keeps every message")
        peak = check_calls(self, model.seen)
        uncompacted = abridge.count_tokens(abridge.langchain.to_dicts(state["messages"][:-1]))
        self.assertGreater(uncompacted, 3 * TRIGGER)
        self.assertTrue(reports and all(r["tokens_after"] <= TARGET for r in reports))
        self.assertEqual(middleware.stats["sessions"], 1, "one session: only appended messages read")
        self.assertEqual(middleware.stats["messages_read"], 2 * STEPS - 1)
        # Every compaction is in the store, for `abridge log` and the dashboard.
        with sqlite3.connect(store) as db:
            rows = db.execute("SELECT source FROM snapshots").fetchall()
        self.assertEqual(rows, [("langchain-test",)] * len(reports))
        return peak, uncompacted, len(reports)

    def test_a_create_agent_loop_plateaus_under_the_trigger(self):
        peak, uncompacted, n = self.run_agent(lambda agent, inp: agent.invoke(inp, {"recursion_limit": 4 * STEPS}))
        print(f"\n{STEPS} model calls: peak {peak} tokens sent, uncompacted {uncompacted}, {n} compactions")

    def test_unknown_options_are_refused_when_the_middleware_is_made(self):
        with self.assertRaises(TypeError):
            AbridgeMiddleware(trigger_tokens=TRIGGER, target_tokns=TARGET)
        with self.assertRaises(abridge.ConfigError):
            AbridgeMiddleware(trigger_tokens=0)

    def test_the_async_agent_too(self):
        self.run_agent(lambda agent, inp: asyncio.run(agent.ainvoke(inp, {"recursion_limit": 4 * STEPS})))


if __name__ == "__main__":
    unittest.main()

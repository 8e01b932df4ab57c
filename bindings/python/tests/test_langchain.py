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


class StatusReader(BaseChatModel):
    """Calls read_page, or the compact tool when the last message it is sent
    says the context is full; records what it was sent."""

    seen: List[List[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "status-reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "StatusReader":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        n = len(self.seen)
        self.seen.append(list(messages))
        last = str(messages[-1].content)
        if n >= 23:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Done."))])
        if "Token usage is high" in last:
            call = {"name": "compactHistory", "args": {"preserve_recent_messages": 4}, "id": f"call_{n}", "type": "tool_call"}
        else:
            call = {"name": "read_page", "args": {"url": f"https://fly.example/p{n:03}"}, "id": f"call_{n}", "type": "tool_call"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


class MycoderPreset(unittest.TestCase):
    def test_the_model_reads_its_status_and_compacts_its_own_history(self):
        model = StatusReader(seen=[])
        config = {"agent": {"status_every": 3, "hint_at": 0.3},
                  "models": {"status-reader": {"context_window": 30000, "max_output": 2000}}}
        middleware = AbridgeMiddleware(preset="mycoder", model="status-reader", trigger_tokens=8000, config=config)
        self.assertEqual([t.name for t in middleware.tools], ["abridge_recall", "compactHistory"])
        agent = create_agent(model=model, tools=[read_page], system_prompt="You are a web agent.", middleware=[middleware])
        state = agent.invoke({"messages": [{"role": "user", "content": "Find the cheapest fare to Lisbon."}]},
                             {"recursion_limit": 200})
        sent = [abridge.count_tokens(abridge.langchain.to_dicts(m)) for m in model.seen]
        noted = [i for i, m in enumerate(model.seen) if "STATUS UPDATE" in str(m[-1].content)]
        self.assertEqual(noted, [i for i in range(len(sent)) if (i + 1) % 3 == 0])
        for i, m in enumerate(model.seen):
            self.assertEqual(abridge.validate(abridge.langchain.to_dicts(m)), [], f"call {i}: pairing")
        answers = [m for m in state["messages"] if getattr(m, "name", None) == "compactHistory"]
        self.assertTrue(answers, "the model compacted")
        for a in answers:
            self.assertTrue(str(a.content).startswith("History compacted:"), a.content)
        calls = [i for i, m in enumerate(model.seen) if "Token usage is high" in str(m[-1].content)]
        for i in calls[:-1] if calls[-1] + 1 >= len(sent) else calls:
            self.assertLess(sent[i + 1], sent[i] * 3 // 4, f"call {i + 1}: {sent}")
        # Nothing compacted by itself before the first call, past the trigger.
        self.assertTrue(all(b > a for a, b in zip(sent[: calls[0]], sent[1 : calls[0] + 1])), sent)
        self.assertGreater(sent[calls[0]], 8000)
        self.assertEqual(middleware.stats["compactions"], len(answers))
        print(f"\nmycoder (LangChain): calls {sent}, compacted at {calls}")


if __name__ == "__main__":
    unittest.main()


@tool
def book_fare(fare: str) -> str:
    """Book a fare."""
    return f"Booked {fare}."


book_fare.description = "Book a fare. " + "Check the traveller's documents first. " * 400


class ALongSystemPromptAndTools(unittest.TestCase):
    def test_the_system_prompt_and_tools_count_towards_the_trigger(self):
        # LangChain sends the system prompt and the tools apart from the
        # messages; the model gets all of it, so the trigger holds for all.
        from langchain_core.utils.function_calling import convert_to_openai_tool

        model = ScriptedModel(seen=[])
        middleware = AbridgeMiddleware(trigger_tokens=TRIGGER, target_tokens=TARGET)
        system = "Follow the house rules for fares. " * 1200
        tools = [read_page, book_fare]
        agent = create_agent(model=model, tools=tools, system_prompt=system, middleware=[middleware])
        agent.invoke({"messages": [{"role": "user", "content": "Find the cheapest fare to Lisbon."}]},
                     {"recursion_limit": 4 * STEPS})
        self.assertEqual(len(model.seen), STEPS)
        head = abridge.count_tokens(abridge.langchain.to_dicts(model.seen[0]))
        self.assertGreater(head, TRIGGER // 3)
        declared = [convert_to_openai_tool(t) for t in tools]
        beside = abridge.count_tokens({"messages": [], "tools": declared})
        self.assertGreater(beside, 2000)
        for i, sent in enumerate(model.seen):
            self.assertEqual(sent[0].content, system, "the system prompt goes as it is")
            tokens = abridge.count_tokens({"messages": abridge.langchain.to_dicts(sent), "tools": declared})
            self.assertLessEqual(tokens, TRIGGER, f"call {i}")
        check_calls(self, model.seen)
        self.assertEqual(middleware.stats["sessions"], 1)

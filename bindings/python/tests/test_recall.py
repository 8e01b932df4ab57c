"""The recall tool in-process: ``AbridgeMiddleware`` gives a LangChain agent
``abridge_recall``; after a compaction the model reads a handle in its
input, calls the tool and gets the page back whole. ``Session.recall`` is
the same as a plain function."""

import json
import re
import unittest
from typing import Any, List

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

import abridge
from abridge.langchain import AbridgeMiddleware

HANDLE = re.compile(r"abr_[0-9a-z]{10}")
STEPS = 24


def page(n: int) -> str:
    rows = "\n".join(f'- row "Flight LX{n}{k} CHF {180 + k}" [ref=e{n}_{k}]' for k in range(90))
    return f"<EXTERNAL-CONTENT>\nPage {n}\n{rows}\n</EXTERNAL-CONTENT>"


@tool
def goto(n: int) -> str:
    """Open a page of results."""
    return page(n)


class RecallingModel(BaseChatModel):
    """Opens pages; once its input names a handle, recalls it once."""

    recalled: List[str] = []
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "recalling"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "RecallingModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        self.calls += 1
        n = self.calls
        answers = [m.content for m in messages if isinstance(m, ToolMessage) and m.name == "abridge_recall"]
        if answers and not self.recalled:
            self.recalled.extend(str(a) for a in answers)
        text = json.dumps([m.content for m in messages])
        handle = HANDLE.search(text)
        if n >= STEPS:
            msg = AIMessage("Done.")
        elif handle and not self.recalled and not answers:
            msg = AIMessage("", tool_calls=[{"name": "abridge_recall", "args": {"handle": handle.group(0)}, "id": f"r{n}", "type": "tool_call"}])
        else:
            msg = AIMessage("", tool_calls=[{"name": "goto", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=msg)])


class Recall(unittest.TestCase):
    def test_a_langchain_agent_recalls_a_page_by_its_handle(self):
        model = RecallingModel(recalled=[], calls=0)
        middleware = AbridgeMiddleware(trigger_tokens=8_000, target_tokens=5_000)
        self.assertEqual([t.name for t in middleware.tools], ["abridge_recall"])
        agent = create_agent(model=model, tools=[goto], middleware=[middleware])
        agent.invoke({"messages": [{"role": "user", "content": "Find the cheapest flight."}]}, {"recursion_limit": 200})
        self.assertGreater(middleware.stats["compactions"], 0)
        self.assertEqual(len(model.recalled), 1, "the model recalled once and read the answer")
        answer = model.recalled[0]
        self.assertRegex(answer, r"^\[abr_[0-9a-z]{10} · ")
        # The page's body, whole (the placeholder kept its tags).
        bodies = ["\n".join(page(n).split("\n")[1:-1]) for n in range(STEPS)]
        self.assertTrue(any(b in answer for b in bodies), answer[:300])

    def test_session_recall_is_a_plain_function(self):
        tools = [{"type": "function", "function": {"name": "goto", "parameters": {"type": "object"}}}]
        s = abridge.Session({"model": "gpt-4o", "messages": [{"role": "user", "content": "task"}], "tools": tools},
                            trigger_tokens=3_000, target_tokens=2_000)
        for n in range(8):
            s.push([
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": f"c{n}", "type": "function", "function": {"name": "goto", "arguments": json.dumps({"n": n})}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": page(n)},
            ])
            s.turn()
        handle = HANDLE.search(json.dumps(s.messages))
        self.assertIsNotNone(handle)
        self.assertIn("Flight LX", s.recall(handle.group(0)))
        # A name seen only inside a clipped page is found without its handle.
        found = s.recall(query="LX145")
        self.assertIn('search for "LX145"', found)
        self.assertIn('Flight LX145 CHF 225', found)
        self.assertRegex(found, r"abr_[0-9a-z]{10} · ")
        self.assertIn("no original", s.recall(query="LX9999"))
        self.assertEqual(s.recall_tool()["name"], "abridge_recall")
        self.assertTrue(s.recall_answer("not json")["is_error"])
        self.assertTrue(s.recall_answer({"handle": "abr_zzzzzzzzzz"})["is_error"])
        off = abridge.Session(recall=False)
        self.assertIsNone(off.recall_tool())


if __name__ == "__main__":
    unittest.main()

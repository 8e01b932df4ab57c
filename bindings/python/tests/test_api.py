"""The Python package's API: bodies of both families, sessions, errors,
LangChain lists, and every corpus conversation under its target."""

import json
import pathlib
import re
import threading
import time
import unittest

import abridge
from abridge import _native

CORPUS = pathlib.Path(__file__).resolve().parents[4] / "shared" / "corpus"


def openai_body(n):
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix src/date.rs."}]
    for i in range(n):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "src/f{i}.rs"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"fn f{i}() {{}}\n" * 120})
    return {"model": "gpt-4o", "messages": messages, "temperature": 0.2}


class Api(unittest.TestCase):
    def test_compact_gives_the_shape_back_under_the_target(self):
        body = openai_body(30)
        before = abridge.count_tokens(body)
        out = abridge.compact(body, target_tokens=4000)
        self.assertGreater(before, 12000)
        self.assertTrue(out["report"]["compacted"])
        self.assertLessEqual(out["report"]["tokens_after"], 4000)
        self.assertEqual(out["body"]["model"], "gpt-4o")
        self.assertEqual(out["body"]["messages"][-1], body["messages"][-1])
        self.assertEqual(abridge.validate(out["body"]), [])
        self.assertEqual(abridge.count_tokens(out["body"]), out["report"]["tokens_after"])
        self.assertIsInstance(abridge.compact(body["messages"], target_tokens=4000)["body"], list)

    def test_a_body_reads_the_same_whichever_serializer_is_installed(self):
        # orjson (when installed) refuses integers past 64 bits: the standard
        # library takes those; keys that are not strings become strings either way.
        body = openai_body(2)
        body["metadata"] = {"big": 2**70, 7: "seven", "ratio": 0.1, "text": "é ✓ \u2028"}
        expected = json.loads(json.dumps(body))
        self.assertEqual(json.loads(abridge._dumps(body)), expected)
        out = abridge.compact(body, target_tokens=100000)
        self.assertEqual(out["body"], expected)
        small = {k: v for k, v in body.items() if k != "metadata"}
        self.assertEqual(json.loads(abridge._dumps(small)), small)

    def test_anthropic_bodies_keep_their_system(self):
        messages = [{"role": "user", "content": "Build it."}]
        for i in range(20):
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"u{i}", "name": "sh", "input": {"cmd": "make"}}]})
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"u{i}", "content": "warning: unused\n" * 100}]})
        body = {"model": "claude-sonnet-4-5", "max_tokens": 512, "system": "Be brief.", "messages": messages}
        out = abridge.compact(body, target_tokens=2500, config={"budget": {"min_iterations": 2}})
        self.assertEqual(out["body"]["system"], "Be brief.")
        self.assertLessEqual(out["report"]["tokens_after"], 2500)
        self.assertEqual(abridge.validate(out["body"]), [])

    def test_a_session_compacts_as_it_grows_and_calls_back(self):
        events = []
        s = abridge.Session(trigger_tokens=3000, target_tokens=2000).on_event(lambda e: events.append(e["event"]))
        s.push({"role": "user", "content": "Watch the logs."})
        compacted = 0
        for i in range(40):
            self.assertGreater(s.push([
                {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "tail", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 60},
            ]), 0)
            t = s.turn()
            compacted += t["compacted"]
            self.assertLessEqual(t["tokens"], 3000)
            self.assertEqual(abridge.validate(s.messages), [])
        self.assertGreater(compacted, 0)
        self.assertIn("history_compacted", events)
        self.assertEqual(s.tokens, abridge.count_tokens(s.messages))

    def test_a_session_over_its_trigger_even_at_the_floor_sends_the_floor(self):
        # The system prompt alone is over the trigger: each compaction misses
        # its target, and the session keeps the smallest valid history it
        # reached (as the proxy sends it) instead of failing and growing.
        system = {"role": "system", "content": "Follow the rules. " * 1500}
        s = abridge.Session([system], trigger_tokens=3000, target_tokens=2000)
        head = s.tokens
        self.assertGreater(head, 3000)
        s.push({"role": "user", "content": "Watch the logs."})
        compacted = 0
        for i in range(40):
            s.push([
                {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "tail", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 60},
            ])
            try:
                t = s.turn()
            except abridge.CannotShrinkError:
                # Nothing to shrink yet: the first step alone.
                self.assertEqual(i, 0)
                continue
            compacted += t["compacted"]
            if t["compacted"]:
                self.assertGreater(t["report"]["tokens_after"], t["report"]["target"])
            self.assertLess(t["tokens"], head + 1500, f"step {i}")
            self.assertEqual(abridge.validate(s.messages), [])
        self.assertGreater(compacted, 30)

    def test_a_preset_gives_a_seed_systems_behaviour(self):
        # Pilo #437: every old result clipped before each step, however
        # short, the last three iterations whole; the defaults leave these be.
        for preset, clips in (("pilo-clipping", True), (None, False)):
            s = abridge.Session(preset=preset, model="gpt-4o")
            s.push({"role": "user", "content": "Click through the form."})
            results = []
            for i in range(10):
                result = f"clicked #button-{i}: the page now shows step {i + 1}"
                results.append(result)
                s.push([
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "click", "arguments": f'{{"ref": "b{i}"}}'}}]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": result},
                ])
                s.turn()
            sent = [m["content"] for m in s.messages if m["role"] == "tool"]
            self.assertEqual(sent[-3:], results[-3:], preset)
            self.assertEqual(sent[:7] != results[:7], clips, (preset, sent[:2]))
            self.assertEqual(abridge.validate(s.messages), [])
        with self.assertRaisesRegex(abridge.ConfigError, "pilo-clipping"):
            abridge.compact(openai_body(2), preset="pilo")

    def test_responses_bodies_and_items_compact_in_their_own_shape(self):
        items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix src/date.rs."}]}]
        for i in range(30):
            items.append({"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": f"gAAAA{i}"})
            items.append({"type": "function_call", "call_id": f"c{i}", "name": "exec_command",
                          "arguments": f'{{"cmd": "cat src/f{i}.rs"}}'})
            items.append({"type": "function_call_output", "call_id": f"c{i}", "output": f"fn f{i}() {{}}\n" * 120})
        body = {"model": "gpt-5", "instructions": "You are a coding agent.", "input": items, "store": False}
        self.assertGreater(abridge.count_tokens(body), 12000)
        out = abridge.compact(body, target_tokens=4000)
        self.assertTrue(out["report"]["compacted"])
        self.assertLessEqual(out["report"]["tokens_after"], 4000)
        self.assertEqual(out["body"]["instructions"], body["instructions"])
        self.assertEqual(out["body"]["input"][-3:], items[-3:], "the newest turn, reasoning included, as sent")
        self.assertEqual(abridge.validate(out["body"]), [])
        kept = [i for i in out["body"]["input"] if i.get("type") == "reasoning"]
        self.assertTrue(all(i in items for i in kept), "reasoning items are never edited")
        as_list = abridge.compact(items, target_tokens=4000)["body"]
        self.assertIsInstance(as_list, list)
        self.assertEqual(abridge.validate(as_list, format="responses"), [])

        # A loop that appends items one by one: the model's turn is one iteration.
        s = abridge.Session({"input": items[:1]}, format="responses", trigger_tokens=5000, target_tokens=3000)
        for item in items[1:]:
            s.push(item)
            if item["type"] == "function_call_output":
                self.assertLessEqual(s.turn()["tokens"], 5000)
        self.assertEqual(abridge.validate(s.messages), [])
        self.assertEqual(s.tokens, abridge.count_tokens(s.messages))

    def test_gemini_bodies_and_contents_compact_in_their_own_shape(self):
        contents = [{"role": "user", "parts": [{"text": "Fix src/date.rs."}]}]
        for i in range(30):
            contents.append({"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": f"src/f{i}.rs"}},
                                                         "thoughtSignature": f"c2ln{i:04}"}]})
            contents.append({"role": "user", "parts": [{"functionResponse": {"name": "read_file",
                                                                             "response": {"output": f"fn f{i}() {{}}\n" * 120}}}]})
        body = {"contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}]},
                "generationConfig": {"temperature": 0.2}}
        self.assertGreater(abridge.count_tokens(body), 12000)
        out = abridge.compact(body, target_tokens=4000)
        self.assertTrue(out["report"]["compacted"])
        self.assertLessEqual(out["report"]["tokens_after"], 4000)
        self.assertEqual(out["body"]["systemInstruction"], body["systemInstruction"])
        self.assertEqual(out["body"]["generationConfig"], body["generationConfig"])
        self.assertEqual(out["body"]["contents"][-2:], contents[-2:], "the newest call and response as sent")
        self.assertEqual(abridge.validate(out["body"]), [])
        signed = [p for t in out["body"]["contents"] for p in t["parts"] if "thoughtSignature" in p]
        self.assertTrue(all(p["functionCall"]["args"]["path"] == f"src/f{int(p['thoughtSignature'][4:])}.rs"
                            for p in signed), "signatures stay on their calls")
        as_list = abridge.compact(contents, target_tokens=4000)["body"]
        self.assertIsInstance(as_list, list)
        self.assertEqual(abridge.validate(as_list, format="gemini"), [])

        s = abridge.Session(format="gemini", trigger_tokens=5000, target_tokens=3000)
        s.push(contents[0])
        for i in range(1, len(contents), 2):
            s.push(contents[i:i + 2])
            self.assertLessEqual(s.turn()["tokens"], 5000)
        self.assertEqual(abridge.validate(s.messages, format="gemini"), [])
        self.assertEqual(s.tokens, abridge.count_tokens(s.messages, format="gemini"))

    def test_errors_are_typed_and_name_what_and_where(self):
        with self.assertRaisesRegex(abridge.InputError, "messages"):
            abridge.compact({"model": "x"})
        with self.assertRaisesRegex(abridge.InputError, r"messages\[1\]"):
            abridge.compact([{"role": "user", "content": "a"}, {"role": "tool", "content": "no id"}])
        with self.assertRaises(abridge.ConfigError):
            abridge.compact(openai_body(2), target_tokens=0)
        with self.assertRaisesRegex(abridge.ConfigError, "nope"):
            abridge.compact(openai_body(2), config={"trigger": {"nope": 1}})
        with self.assertRaisesRegex(abridge.ConfigError, "/nonexistent.toml"):
            abridge.compact(openai_body(2), config=pathlib.Path("/nonexistent.toml"))
        with self.assertRaises(abridge.CannotShrinkError) as e:
            abridge.compact(openai_body(3), target_tokens=10)
        self.assertIsInstance(e.exception, abridge.AbridgeError)

    def test_compaction_runs_without_the_gil(self):
        # While a thread is inside the engine, this one keeps running: its
        # longest pause is far shorter than one engine call.
        body = json.dumps(openai_body(300))
        options = json.dumps({"target_tokens": 4000})
        durations = []

        def work():
            for _ in range(3):
                start = time.perf_counter()
                _native.compact(body, options)
                durations.append(time.perf_counter() - start)

        worker = threading.Thread(target=work)
        worker.start()
        gaps, last = [], time.perf_counter()
        while worker.is_alive():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
        worker.join()
        self.assertLess(max(gaps), min(durations) / 2, f"longest pause {max(gaps):.4f}s, calls {durations}")

    def test_langchain_lists_come_back_as_langchain_messages(self):
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        messages = [HumanMessage("Read every file.")]
        for i in range(30):
            messages.append(AIMessage("", tool_calls=[{"name": "read", "args": {"path": f"f{i}"}, "id": f"c{i}", "type": "tool_call"}]))
            messages.append(ToolMessage("fn x() {}\n" * 80, tool_call_id=f"c{i}"))
        out = abridge.compact(messages, target_tokens=3000)
        body = out["body"]
        self.assertLessEqual(out["report"]["tokens_after"], 3000)
        self.assertIs(body[0], messages[0])
        self.assertIs(body[-1], messages[-1], "the newest result is the original object")
        self.assertIsInstance(body[2], ToolMessage)
        self.assertNotEqual(body[2].content, messages[2].content, "an old result is clipped")
        self.assertEqual(abridge.count_tokens(body), out["report"]["tokens_after"])

    @unittest.skipUnless(CORPUS.is_dir(), f"corpus not found at {CORPUS}")
    def test_every_corpus_conversation_compacts_under_its_target(self):
        n = compacted = 0
        for path in sorted(CORPUS.glob("*/*.json*")):
            text = path.read_text()
            for family in ("openai", "anthropic"):
                for i, body in enumerate(abridge.convert(text, to=family)):
                    at = f"{path.name}#{i} as {family}"
                    target = abridge.count_tokens(body) * 3 // 10
                    try:
                        out = abridge.compact(body, target_tokens=target)
                    except abridge.CannotShrinkError as e:
                        # The floor (system prompt, task, last iteration) is over 30%: ask for the floor.
                        target = int(re.search(r"cannot shrink below (\d+)", str(e)).group(1))
                        out = abridge.compact(body, target_tokens=target)
                    self.assertLessEqual(out["report"]["tokens_after"], target, at)
                    # A log may end on a call still waiting for its result
                    # (mini-swe-agent's submit, a Claude Code checkpoint taken
                    # mid-step); compacting adds no violation to it.
                    pending = len(abridge.validate(body))
                    self.assertLessEqual(pending, 1, at)
                    self.assertEqual(len(abridge.validate(out["body"])), pending, at)
                    compacted += out["report"]["compacted"]
                    n += 1
        self.assertGreater(n, 400)
        print(f"\n{n} corpus bodies (both families): {compacted} compacted, all valid and under target")


if __name__ == "__main__":
    unittest.main()

"""abridge for the OpenAI Agents SDK: a ``call_model_input_filter`` that
keeps the input of every model call within budget, in-process.

.. code-block:: python

    from agents import RunConfig, Runner
    from abridge.agents import AbridgeInputFilter

    run_config = RunConfig(call_model_input_filter=AbridgeInputFilter(trigger_tokens=30_000))
    result = await Runner.run(agent, task, run_config=run_config)

Before each model call the SDK hands the filter the run's whole input (the
items given to the run and every item generated since), as Responses API
input items. The filter keeps an abridge ``Session`` and pushes only the
items added since its last call, so a call costs the new items; when the
input does not extend the last one (a new run), it starts a new session.
The instructions go as the SDK built them. If abridge cannot read the
input, the input goes as it was and the error is kept in ``last_error``.

A filter cannot add tools to the agent, so handles on what was replaced
(and the index in briefings) are off unless the agent has the recall tool:
``Agent(tools=[..., input_filter.recall_tool()])``. Under ``[agent]`` (the
``mycoder`` preset) give it ``input_filter.compact_tool()`` as well: the
model compacts its own history with it, and every ``status_every``-th call
carries a status note.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional

from . import AbridgeError, Session

__all__ = ["AbridgeInputFilter"]

log = logging.getLogger("abridge.agents")


def _plain(item: Any) -> Any:
    """An input item as plain JSON (the SDK holds dicts, and sometimes models)."""

    def dump(o: Any) -> Any:
        if hasattr(o, "model_dump"):
            return o.model_dump(mode="json", exclude_unset=True)
        raise TypeError(f"{type(o).__name__} is not JSON")

    return json.loads(json.dumps(item, default=dump))


def _function_tool(declaration: Dict[str, Any], invoke: Any) -> Any:
    """A tool's declaration (``{"name", "description", "parameters"}``) as
    an Agents SDK ``FunctionTool`` that ``invoke`` answers."""
    from agents import FunctionTool

    return FunctionTool(
        name=declaration["name"],
        description=declaration["description"],
        params_json_schema=declaration["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


class AbridgeInputFilter:
    """A ``RunConfig.call_model_input_filter`` that compacts the model input
    with abridge. Options as for ``abridge.Session`` (``trigger_tokens``,
    ``target_tokens``, ``config``, ``model``, ``tokenizer``, ``store``,
    ``source``). ``last_turn`` is the engine's report of the last call and
    ``compactions`` counts the calls that rewrote the history."""

    def __init__(self, **session_options: Any) -> None:
        if "format" in session_options:
            raise TypeError("AbridgeInputFilter sends Responses input items: no format option")
        # Checked now, not at the first model call: an unknown name is a TypeError.
        Session(format="responses", **session_options)
        self._options: Dict[str, Any] = {"recall": False, **session_options}
        self._session: Optional[Session] = None
        self._seen = 0
        self._last: Optional[str] = None
        self.last_turn: Optional[Dict[str, Any]] = None
        self.last_error: Optional[AbridgeError] = None
        self.compactions = 0

    def recall_tool(self) -> Any:
        """The ``abridge_recall`` tool as an Agents SDK ``FunctionTool``, for
        the agent's tools; once it is asked for, the filter's compactions
        name what they replace by handles the tool answers."""
        self._options["recall"] = True
        declaration = Session(format="responses", **self._options).recall_tool()
        if declaration is None:
            raise AbridgeError("recall is off in the config ([recall] enabled = false)")

        async def invoke(_ctx: Any, arguments: str) -> str:
            if self._session is None:
                return "No original is kept yet: nothing has been compacted."
            return self._session.recall_answer(arguments)["text"]

        return _function_tool(declaration, invoke)

    def compact_tool(self) -> Any:
        """The compact tool (``[agent] compact_tool``, on under the
        ``mycoder`` preset) as an Agents SDK ``FunctionTool``: the model
        calls it to compact its own history, and the filter's next inputs
        carry that compaction."""
        declaration = Session(format="responses", **self._options).compact_tool()
        if declaration is None:
            raise AbridgeError("the compact tool is off in the config ([agent] compact_tool = false)")

        async def invoke(_ctx: Any, arguments: str) -> str:
            if self._session is None:
                return "Nothing to compact yet. No changes made."
            answer = self._session.compact_history(arguments or "{}")
            self.compactions += int(answer["compacted"])
            return answer["text"]

        return _function_tool(declaration, invoke)

    def __call__(self, data: Any) -> Any:
        from agents.run_config import ModelInputData

        given = data.model_data
        try:
            items = self._compact([_plain(i) for i in given.input], given.instructions)
        except AbridgeError as e:
            log.warning("abridge could not compact the model input; sending it as it was: %s", e)
            self.last_error, self._session = e, None
            return given
        return ModelInputData(input=items, instructions=given.instructions)

    def _compact(self, items: List[Any], instructions: Optional[str]) -> List[Any]:
        if self._session is not None and self._extends(items):
            added = items[self._seen :]
            if added:
                self._session.push(added)
        else:
            body: Dict[str, Any] = {"input": items}
            if isinstance(instructions, str) and instructions:
                body["instructions"] = instructions
            self._session = Session(body, format="responses", **self._options)
        self._seen = len(items)
        self._last = json.dumps(items[-1], sort_keys=True) if items else None
        self.last_turn = self._session.turn()
        self.compactions += int(self.last_turn["compacted"])
        items = list(self._session.messages["input"])
        status = self.last_turn.get("status")
        if status is not None:
            # The note goes this once, after the input the model is sent.
            items.append({"role": "user", "content": status})
        return items

    def _extends(self, items: List[Any]) -> bool:
        """Whether ``items`` goes on from the input of the last call."""
        if len(items) < self._seen or self._seen == 0:
            return False
        return json.dumps(items[self._seen - 1], sort_keys=True) == self._last

"""LangChain support: message conversion and ``AbridgeMiddleware``.

>>> from langchain.agents import create_agent
>>> from abridge.langchain import AbridgeMiddleware
>>> agent = create_agent(model, tools, middleware=[AbridgeMiddleware(trigger_tokens=60_000)])  # doctest: +SKIP

The middleware compacts the model's input before each call (the agent's
state keeps every message); only the messages added since the last call
are read, and the compacted prefix stays the same from call to call, so
prompt caches hold. It also gives the agent the ``abridge_recall`` tool:
placeholders and briefings name what they replaced by a handle, and the
model gets an original back by calling the tool with it. Under
``[agent]`` (the ``mycoder`` preset) it adds the compact tool, which the
model calls to compact its own history, and a status note to every
``status_every``-th call.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage

from . import AbridgeError, Session
from ._lc import from_dicts, to_dicts

__all__ = ["AbridgeMiddleware", "to_dicts", "from_dicts"]

log = logging.getLogger("abridge")


class AbridgeMiddleware(AgentMiddleware):
    """A LangChain v1 agent middleware that compacts the model input before
    each model call. The system prompt and the tools stay apart (LangChain
    sends them separately) and as they are, but count: the triggers and the
    target hold for what the model is sent. The state is not touched.

    Keyword options are those of ``abridge.Session`` (``trigger_tokens``:
    compact above this, ``target_tokens``, ``model``, ``config``,
    ``tokenizer``, ``store`` and ``source`` to record every compaction for
    the dashboard), checked when the middleware is made;
    ``on_compact(report)`` is called after each compaction. A failure never
    stops the agent: the call goes on with its own messages and the error
    is logged (``logging.getLogger("abridge")``).
    """

    def __init__(
        self,
        *,
        on_compact: Optional[Callable[[Dict[str, Any]], None]] = None,
        **session_options: Any,
    ) -> None:
        super().__init__()
        if "format" in session_options:
            raise TypeError("AbridgeMiddleware sends LangChain messages: no format option")
        # Checked now, not at the first model call: an unknown name is a TypeError.
        probe = Session(**session_options)
        declaration, compact = probe.recall_tool(), probe.compact_tool()
        self._options = session_options
        #: The recall tool, and the compact tool under ``[agent]``
        #: (registered with the agent by ``create_agent``).
        self.tools = [] if declaration is None else [self._recall_tool(declaration)]
        if compact is not None:
            self.tools.append(self._compact_tool(compact))
        self._on_compact = on_compact
        self._lock = threading.Lock()
        self._session: Optional[Session] = None
        self._seen: List[BaseMessage] = []
        self._dicts: List[Dict[str, Any]] = []
        #: The system message the session counts ahead of the messages, and
        #: the tools it counts beside them.
        self._system: List[Dict[str, Any]] = []
        self._tools: List[Dict[str, Any]] = []
        #: The last call's tool objects and their declarations: the same
        #: objects next call are not converted again.
        self._declarations: Tuple[List[Any], List[Dict[str, Any]]] = ([], [])
        self._current: Optional[List[BaseMessage]] = None
        #: Sessions started (1 unless the history was edited), messages read, compactions.
        self.stats = {"sessions": 0, "messages_read": 0, "compactions": 0}

    def _recall_tool(self, declaration: Dict[str, Any]) -> Any:
        from langchain_core.tools import StructuredTool

        def recall(handle: str, page: Optional[int] = None) -> str:
            with self._lock:
                session = self._session
            if session is None:
                return "No original is kept yet: nothing has been compacted."
            return session.recall(handle, page)

        return StructuredTool.from_function(
            func=recall,
            name=declaration["name"],
            description=declaration["description"],
            args_schema=declaration["parameters"],
        )

    def _compact_tool(self, declaration: Dict[str, Any]) -> Any:
        from langchain_core.tools import StructuredTool

        def compact(preserve_recent_messages: Optional[int] = None,
                    custom_prompt: Optional[str] = None) -> str:
            args: Dict[str, Any] = {}
            if preserve_recent_messages is not None:
                args["preserve_recent_messages"] = preserve_recent_messages
            if custom_prompt is not None:
                args["custom_prompt"] = custom_prompt
            with self._lock:
                session = self._session
                if session is None:
                    return "Nothing to compact yet. No changes made."
                answer = session.compact_history(args)
                if answer["compacted"]:
                    self.stats["compactions"] += 1
                    self._current = from_dicts(self._sent(), self._dicts, self._seen)
            return answer["text"]

        return StructuredTool.from_function(
            func=compact,
            name=declaration["name"],
            description=declaration["description"],
            args_schema=declaration["parameters"],
        )

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        compacted = self._prepare(request.messages, _system(request), list(request.tools or []))
        return handler(request if compacted is None else request.override(messages=compacted))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        compacted = await asyncio.to_thread(self._prepare, request.messages, _system(request), list(request.tools or []))
        return await handler(request if compacted is None else request.override(messages=compacted))

    def _prepare(
        self, messages: List[BaseMessage], system: List[Dict[str, Any]], tools: List[Any]
    ) -> Optional[List[BaseMessage]]:
        """The messages to send, or ``None`` for the agent's own."""
        with self._lock:
            try:
                return self._step(messages, system, tools)
            except AbridgeError as e:
                log.warning("abridge: the model call goes on uncompacted: %s", e)
                self._session = None
                return None

    def _sent(self) -> List[Dict[str, Any]]:
        """The session's messages after the system message it counts."""
        return self._session.messages["messages"][len(self._system):]

    def _declared(self, tools: List[Any]) -> List[Dict[str, Any]]:
        """``tools`` as Chat Completions declarations: converted when they
        are not the objects of the last call."""
        objects, declared = self._declarations
        if len(tools) == len(objects) and all(a is b for a, b in zip(tools, objects)):
            return declared
        declared = _tools(tools)
        self._declarations = (tools, declared)
        return declared

    def _step(
        self, messages: List[BaseMessage], system: List[Dict[str, Any]], tool_objects: List[Any]
    ) -> Optional[List[BaseMessage]]:
        tools = self._declared(tool_objects)
        seen = self._seen
        appended = len(seen) <= len(messages) and all(a is b or a == b for a, b in zip(seen, messages))
        if self._session is None or not appended or (system, tools) != (self._system, self._tools):
            self._dicts = to_dicts(messages)
            self._system, self._tools = system, tools
            body: Dict[str, Any] = {"messages": system + self._dicts}
            if tools:
                body["tools"] = tools
            self._session = Session(body, format="openai", **self._options)
            self._current = None
            self.stats["sessions"] += 1
            self.stats["messages_read"] += len(messages)
        elif len(messages) > len(seen):
            new = messages[len(seen):]
            new_dicts = to_dicts(new)
            self._session.push(new_dicts)
            self._dicts.extend(new_dicts)
            if self._current is not None:
                self._current.extend(new)
            self.stats["messages_read"] += len(new)
        self._seen = list(messages)
        turn = self._session.turn()
        if turn["compacted"]:
            self.stats["compactions"] += 1
            self._current = from_dicts(self._sent(), self._dicts, self._seen)
            if self._on_compact is not None:
                self._on_compact(turn["report"])
        status = turn.get("status")
        if status is None:
            return None if self._current is None else list(self._current)
        from langchain_core.messages import HumanMessage

        # The note goes this once, after the history the model is sent.
        sent = list(self._seen) if self._current is None else list(self._current)
        return sent + [HumanMessage(content=status)]


def _system(request: Any) -> List[Dict[str, Any]]:
    """The system message LangChain sends apart from the messages, as a
    one-item list of its dict (none: empty)."""
    message = getattr(request, "system_message", None)
    if message is not None:
        return to_dicts([message])
    prompt = getattr(request, "system_prompt", None)
    return [{"role": "system", "content": prompt}] if isinstance(prompt, str) and prompt else []


def _tools(tools: List[Any]) -> List[Dict[str, Any]]:
    """LangChain tools as Chat Completions declarations (one that does not
    convert is left out of the count)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out = []
    for t in tools:
        try:
            out.append(convert_to_openai_tool(t))
        except (ValueError, TypeError):
            continue
    return out

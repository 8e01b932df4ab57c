"""abridge keeps LLM agents inside their context window, in-process.

>>> import abridge
>>> body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
>>> out = abridge.compact(body, target_tokens=1000)
>>> out["body"] == body, out["report"]["compacted"]
(True, False)

``compact`` takes an OpenAI or Anthropic request body (a dict with
``messages``, or a Responses body with ``input``), a bare list of their
messages or Responses input items, or a list of LangChain messages, and
gives the same shape back. ``Session`` keeps a growing history;
``abridge.langchain.AbridgeMiddleware`` compacts a LangChain agent's model
input before each call, ``abridge.agents.AbridgeInputFilter`` an OpenAI
Agents SDK run's.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional, Union

from . import _native
from ._native import AbridgeError, CannotShrinkError, ConfigError, EngineError, InputError

try:  # optional: `pip install "abridge[fast]"`; LangChain's langsmith brings it too
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

__all__ = [
    "compact",
    "count_tokens",
    "validate",
    "convert",
    "Session",
    "AbridgeError",
    "InputError",
    "ConfigError",
    "CannotShrinkError",
    "EngineError",
]

Config = Union[str, "os.PathLike[str]", Dict[str, Any]]


def _options(**values: Any) -> str:
    """The options the engine reads, as JSON (``None`` left out)."""
    for key in ("config", "store"):
        if isinstance(values.get(key), os.PathLike):
            values[key] = os.fspath(values[key])
    return json.dumps({k: v for k, v in values.items() if v is not None})


def _dumps(value: Any) -> str:
    """``value`` as JSON text for the engine: with orjson when it is installed
    (an 8 MB body in 1.4 ms instead of 22 ms), else the standard library,
    which also takes what orjson refuses (integers past 64 bits)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value, option=_orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            pass
    return json.dumps(value)


def _is_langchain(body: Any) -> bool:
    if not isinstance(body, (list, tuple)) or not body:
        return False
    first = body[0]
    return type(first).__module__.startswith("langchain") and hasattr(first, "content")


def compact(
    body: Any,
    *,
    target_tokens: Optional[int] = None,
    config: Optional[Config] = None,
    model: Optional[str] = None,
    tokenizer: Optional[str] = None,
    store: Optional[Union[str, "os.PathLike[str]"]] = None,
    source: Optional[str] = None,
    preset: Optional[str] = None,
) -> Dict[str, Any]:
    """Compacts ``body`` to ``target_tokens`` (or the config's target).

    Returns ``{"body": ..., "report": ...}``, the body in the shape given. A
    history already under the target comes back as it was. Raises
    ``CannotShrinkError`` when what compaction may not touch is over the
    target, ``InputError`` for unreadable messages, ``ConfigError`` for a
    bad option or config. With ``store`` (a SQLite file), every compaction
    is recorded there under ``source`` for ``abridge log``/``show`` and the
    dashboard (``abridge ui --store``). ``preset`` starts from a seed
    system's settings (``"pilo-clipping"``, ``"pilo-compaction"``,
    ``"compaction-note"``, ``"stagewise"``); ``config``'s keys still win.
    """
    opts = dict(target_tokens=target_tokens, config=config, model=model, tokenizer=tokenizer, store=store, source=source,
                preset=preset)
    if _is_langchain(body):
        from ._lc import from_dicts, to_dicts

        dicts = to_dicts(body)
        out = json.loads(_native.compact(_dumps(dicts), _options(format="openai", **opts)))
        return {"body": from_dicts(out["value"], dicts, body), "report": out["report"]}
    out = json.loads(_native.compact(_dumps(body), _options(**opts)))
    return {"body": out["value"], "report": out["report"]}


def count_tokens(body: Any, *, tokenizer: Optional[str] = None, model: Optional[str] = None,
                 format: Optional[str] = None) -> int:
    """Tokens of a body or list of messages (tool declarations included);
    `format` as for `validate` when a bare list is ambiguous."""
    if _is_langchain(body):
        from ._lc import to_dicts

        body = to_dicts(body)
    return _native.count_tokens(_dumps(body), _options(tokenizer=tokenizer, model=model, format=format))


def validate(body: Any, *, format: Optional[str] = None) -> List[Dict[str, Any]]:
    """Tool-pairing and role violations (``[]``: valid)."""
    return json.loads(_native.validate(_dumps(body), _options(format=format)))


def convert(text: str, *, to: str) -> List[Any]:
    """Every conversation in a file's text (request bodies, AI SDK messages,
    Claude Code logs, agent trajectories) as ``to``: ``"openai"``,
    ``"anthropic"`` or ``"ai-sdk"``."""
    return json.loads(_native.convert(text, to))


class Session:
    """A history an agent loop grows: ``push`` what it adds, ``turn()``
    before each model call, send ``messages``. A push costs the new
    messages only; engine events go to the callbacks given to ``on_event``.
    """

    def __init__(
        self,
        initial: Any = None,
        *,
        format: Optional[str] = None,
        trigger_tokens: Optional[int] = None,
        target_tokens: Optional[int] = None,
        config: Optional[Config] = None,
        model: Optional[str] = None,
        tokenizer: Optional[str] = None,
        store: Optional[Union[str, "os.PathLike[str]"]] = None,
        source: Optional[str] = None,
        recall: Optional[bool] = None,
        preset: Optional[str] = None,
    ) -> None:
        opts = _options(
            preset=preset,
            format=format,
            trigger_tokens=trigger_tokens,
            target_tokens=target_tokens,
            config=config,
            model=model,
            tokenizer=tokenizer,
            store=store,
            source=source,
            recall=recall,
        )
        self._native = _native.Session(None if initial is None else _dumps(initial), opts)
        self._callbacks: List[Callable[[Dict[str, Any]], None]] = []
        self._messages: Optional[Any] = None

    def push(self, messages: Any) -> int:
        """Appends a message (a dict) or a list of them; returns the tokens they add."""
        n = self._native.push(_dumps(messages))
        if isinstance(self._messages, list):
            self._messages = self._messages + (list(messages) if isinstance(messages, list) else [messages])
        else:
            self._messages = None
        self._flush()
        return n

    def turn(self, usage: Optional[int] = None) -> Dict[str, Any]:
        """Checks the triggers (with the provider-reported prompt tokens of the
        last call, when known) and compacts when one fires: ``{"tokens",
        "compacted", "report", "duration_us", "status"}``. ``status`` is the
        note for the agent when ``[agent] status_every`` says one is due
        (add it to what the model is sent this once), else ``None``."""
        t = json.loads(self._native.turn(usage))
        if t["compacted"]:
            self._messages = None
        self._flush()
        return t

    @property
    def messages(self) -> Any:
        """The history to send now, in the shape the session started with."""
        if self._messages is None:
            self._messages = json.loads(self._native.messages())
        return self._messages

    @property
    def tokens(self) -> int:
        """Tokens of the history now."""
        return self._native.tokens

    def recall_tool(self) -> Optional[Dict[str, Any]]:
        """The recall tool's declaration, ``{"name", "description",
        "parameters"}`` (a JSON Schema), or ``None`` with ``[recall]`` off.
        Placeholders and briefings name what they replaced by a handle
        (``abr_…``); give the model this tool beside the agent's own and
        answer its calls with ``recall``. As an OpenAI tool:
        ``{"type": "function", "function": session.recall_tool()}``."""
        text = self._native.recall_tool()
        return None if text is None else json.loads(text)

    def recall(
        self, handle: Optional[str] = None, page: Optional[int] = None, query: Optional[str] = None
    ) -> str:
        """The recall tool as a plain function: the original ``handle``
        names (in pages when it is large; the answer says so), or, given a
        ``query`` (a name, an id, a phrase) instead, the lines of this
        session's originals that hold it under their handles; else a
        message that says why there is none. Images are left out of the
        text (see ``recall_answer``)."""
        args: Dict[str, Any] = {}
        if handle is not None:
            args["handle"] = handle
        if query is not None:
            args["query"] = query
        if page is not None:
            args["page"] = page
        return self.recall_answer(args)["text"]

    def recall_answer(self, arguments: Union[str, Dict[str, Any]]) -> Dict[str, Any]:
        """Answers a call of the recall tool given its arguments (a dict or
        the JSON text a model wrote): ``{"text", "pieces", "is_error",
        "page", "pages", "bytes", "handle"}``; ``pieces`` holds the images
        too, as ``{"type": "image", "url": …}``."""
        if isinstance(arguments, str):
            try:
                json.loads(arguments)
                text = arguments
            except ValueError:
                # Not JSON: answered as a malformed call, not raised.
                text = json.dumps({"unparsed": arguments})
        else:
            text = json.dumps(arguments)
        answer = json.loads(self._native.recall(text))
        answer["text"] = "\n".join(p["text"] for p in answer["pieces"] if p["type"] == "text")
        self._flush()
        return answer

    def compact_tool(self) -> Optional[Dict[str, Any]]:
        """The compact tool's declaration, ``{"name", "description",
        "parameters"}``, or ``None`` unless ``[agent] compact_tool`` is on
        (the ``mycoder`` preset): give the model this tool and answer its
        calls with ``compact_history``; the agent decides when to compact."""
        text = self._native.compact_tool()
        return None if text is None else json.loads(text)

    def compact_history(self, arguments: Union[str, Dict[str, Any], None] = None) -> Dict[str, Any]:
        """Answers a call of the compact tool given its arguments (a dict
        or the JSON text a model wrote: ``preserve_recent_messages``, 10 by
        default, and ``custom_prompt``) by compacting the history now:
        ``{"text", "is_error", "compacted", "tokens_before",
        "tokens_after"}``; ``text`` is the tool's result. Push the call and
        that result after it, as for any tool."""
        if arguments is None:
            arguments = {}
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        try:
            json.loads(text)
        except ValueError:
            text = "{}"
        answer = json.loads(self._native.compact_history(text))
        if answer["compacted"]:
            self._messages = None
        self._flush()
        return answer

    def on_event(self, callback: Callable[[Dict[str, Any]], None]) -> "Session":
        """Calls ``callback`` with every engine event (``history_size``,
        ``history_compacted``, ...)."""
        self._callbacks.append(callback)
        return self

    def _flush(self) -> None:
        for text in self._native.take_events():
            event = json.loads(text)
            for cb in self._callbacks:
                cb(event)

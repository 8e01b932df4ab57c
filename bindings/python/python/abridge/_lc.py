"""LangChain messages to and from OpenAI message dicts (``langchain_core`` only)."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from typing import Any, Dict, List, Sequence

from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages


def to_dicts(messages: Sequence[BaseMessage]) -> List[Dict[str, Any]]:
    """LangChain messages as OpenAI message dicts."""
    return convert_to_openai_messages(list(messages))


def from_dicts(
    dicts: Sequence[Dict[str, Any]],
    original_dicts: Sequence[Dict[str, Any]],
    originals: Sequence[BaseMessage],
) -> List[BaseMessage]:
    """OpenAI dicts back to LangChain messages: each one equal to an original
    (in order) is that original object, the others (clipped results,
    briefings) become new messages."""
    index: Dict[str, deque] = defaultdict(deque)
    for i, d in enumerate(original_dicts):
        index[json.dumps(d, sort_keys=True)].append(i)
    out: List[BaseMessage] = []
    after = -1
    for d in dicts:
        slots = index.get(json.dumps(d, sort_keys=True))
        while slots and slots[0] <= after:
            slots.popleft()
        if slots:
            after = slots.popleft()
            out.append(originals[after])
        else:
            out.append(convert_to_messages([d])[0])
    return out

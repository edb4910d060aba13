"""JSON from outside (manifests, labels, sidecars, request bodies), parsed without a
traceback on hostile input: a document nested deeper than Python's parser recurses is a
``json.JSONDecodeError`` ("nested too deeply") like any other malformed JSON, so every reader's
existing error path reports it with its file and line."""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    """``json.loads``; a ``RecursionError`` (e.g. 5000 nested ``[``) becomes a
    ``json.JSONDecodeError`` at position 0."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None

"""Validate Realtime events against the official ``openai`` SDK's event models.

The SDK (a dev dependency) is the reference we did not write: GA events against
``openai.types.realtime.RealtimeClientEvent`` / ``RealtimeServerEvent``, beta events against
``openai.types.beta.realtime``'s unions, each through a pydantic ``TypeAdapter``. The SDK's
models accept unknown keys; ``check`` also refuses them (at any depth), so a misspelt field
fails instead of passing as an extra.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, get_args, get_origin

import pytest
from pydantic import BaseModel, TypeAdapter


@cache
def _union(dialect: str, side: str) -> Any:
    pytest.importorskip("openai", reason="the conformance reference is the openai SDK (dev extra)")
    if dialect == "ga":
        from openai.types import realtime as mod
    else:
        from openai.types.beta import realtime as mod  # type: ignore[no-redef]
    return mod.RealtimeClientEvent if side == "client" else mod.RealtimeServerEvent


@cache
def adapter(dialect: str, side: str) -> TypeAdapter[Any]:
    return TypeAdapter(_union(dialect, side))


def member_for(dialect: str, side: str, event_type: str) -> type[BaseModel] | None:
    """The union member whose ``type`` literal is ``event_type`` (for a readable error)."""
    union = _union(dialect, side)
    members = get_args(get_args(union)[0]) if get_origin(union) is Annotated else get_args(union)
    for m in members:
        field = getattr(m, "model_fields", {}).get("type")
        if field is not None and event_type in get_args(field.annotation):
            return m  # type: ignore[no-any-return]
    return None


def extras(value: Any, path: str = "") -> list[str]:
    """Paths of keys that no SDK model declares."""
    out: list[str] = []
    if isinstance(value, BaseModel):
        out += [f"{path}.{k}".lstrip(".") for k in (value.model_extra or {})]
        for name in type(value).model_fields:
            out += extras(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            out += extras(v, f"{path}[{i}]")
    return out


def check(dialect: str, side: str, event: dict[str, Any]) -> BaseModel:
    """The SDK model of ``event``; AssertionError (with the reason) if it does not conform."""
    try:
        model = adapter(dialect, side).validate_python(event)
    except Exception as exc:  # pydantic's ValidationError, reported with the event type
        member = member_for(dialect, side, str(event.get("type")))
        reason = f"no {dialect} {side} event has this type ({str(exc)[:300]})"
        if member is not None:
            try:
                member.model_validate(event)
            except Exception as inner:
                reason = f"{member.__name__}: {inner}"
        raise AssertionError(
            f"{dialect} {side} event {event.get('type')!r} does not validate: {reason[:2000]}"
        ) from None
    assert isinstance(model, BaseModel)
    assert getattr(model, "type", None) == event["type"], (model, event["type"])
    unknown = extras(model)
    assert not unknown, f"{dialect} {side} {event['type']}: fields the SDK does not know: {unknown}"
    return model

"""The Realtime server's clock against the client's: NTP-style bounds from request/answer pairs in the log (``estimate_server_offset``), combined into one offset with its uncertainty (``ClockEstimate``)."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voxassay.contracts.duplex.common import Problem
from voxassay.suites.duplex.evidence.realtime_records import (
    ONE_SIDED_WINDOW_NS,
    Record,
    _d,
    _n,
    _s,
    _warn,
    client_refs,
    ids_in,
)

__all__ = ["ClockEstimate", "estimate_server_offset"]


@dataclass(frozen=True)
class ClockEstimate:
    """Offset of the server clock against the client clock, with how it was obtained.

    ``offset_ns`` is added to server timestamps to put them on the client (session) clock,
    i.e. it is ``-(server - client)``. ``lower_ns``/``upper_ns`` bound ``server - client``.
    """

    offset_ns: int
    uncertainty_ns: int
    method: str
    n_upper: int = 0
    n_lower: int = 0
    lower_ns: int | None = None
    upper_ns: int | None = None
    consistent: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for ``stats`` and ``import.json``)."""
        return {
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "method": self.method,
            "n_upper": self.n_upper,
            "n_lower": self.n_lower,
            "server_minus_client_lower_ns": self.lower_ns,
            "server_minus_client_upper_ns": self.upper_ns,
            "consistent": self.consistent,
        }


_ORDER_PAIRS: dict[str, str] = {
    "response.created": "response.create",
    "input_audio_buffer.committed": "input_audio_buffer.commit",
    "session.updated": "session.update",
    "input_audio_buffer.cleared": "input_audio_buffer.clear",
    "output_audio_buffer.cleared": "output_audio_buffer.clear",
}


def estimate_server_offset(
    records: Sequence[Record], file: str = "", problems: list[Problem] | None = None
) -> ClockEstimate:
    """Offset of the server clock against the client clock (see the module docstring)."""
    upper: list[tuple[int, int, int]] = []  # (server - client, client line, server line)
    lower: list[tuple[int, int, int]] = []
    client = [r for r in records if r.side == "client"]
    server = [r for r in records if r.side == "server"]

    # ids the client made itself (naming them proves nothing about the server)
    client_made: set[str] = set()
    for rec in client:
        item = _d(rec.event.get("item"))
        if rec.kind == "conversation.item.create":
            if _s(item.get("id")):
                client_made.add(item["id"])
            if item.get("type") == "function_call" and _s(item.get("call_id")):
                client_made.add(item["call_id"])

    first_use: dict[str, Record] = {}
    for rec in server:
        for ident in ids_in(rec.event):
            if ident not in first_use or rec.ns < first_use[ident].ns:
                first_use[ident] = rec
    for rec in client:
        for ident in client_refs(rec):
            if ident in client_made or ident not in first_use:
                continue
            src = first_use[ident]
            lower.append((src.ns - rec.ns, rec.line, src.line))

    # exact answers, by id
    def pair(req: Record, ans: Record) -> None:
        upper.append((ans.ns - req.ns, req.line, ans.line))

    by_client_event_id: dict[str, Record] = {}
    dupes: set[str] = set()
    for rec in client:
        eid = _s(rec.event.get("event_id"))
        if eid:
            if eid in by_client_event_id:
                dupes.add(eid)
            by_client_event_id[eid] = rec
    answered_by_error: set[int] = set()
    answers: dict[tuple[str, ...], list[Record]] = defaultdict(list)
    for rec in server:
        ev = rec.event
        item = _d(ev.get("item"))
        if rec.kind == "error":
            ref = _s(_d(ev.get("error")).get("event_id"))
            if ref and ref in by_client_event_id and ref not in dupes:
                pair(by_client_event_id[ref], rec)
                answered_by_error.add(by_client_event_id[ref].line)
        elif rec.kind == "conversation.item.truncated":
            answers[("truncate", str(ev.get("item_id")), str(_n(ev.get("audio_end_ms"))))].append(
                rec
            )
        elif rec.kind in ("conversation.item.created", "conversation.item.added"):
            if _s(item.get("id")):
                answers[("create-id", item["id"])].append(rec)
            if item.get("type") == "function_call_output" and _s(item.get("call_id")):
                answers[("create-call", item["call_id"])].append(rec)
        elif rec.kind == "conversation.item.deleted":
            answers[("delete", str(ev.get("item_id")))].append(rec)
        elif rec.kind == "conversation.item.retrieved":
            answers[("retrieve", str(item.get("id")))].append(rec)
        elif rec.kind == "response.done":
            resp = _d(ev.get("response"))
            details = _d(resp.get("status_details"))
            if resp.get("status") == "cancelled" and details.get("reason") == "client_cancelled":
                answers[("cancel", str(resp.get("id")))].append(rec)

    def take(key: tuple[str, ...], req: Record) -> bool:
        for i, ans in enumerate(answers.get(key, [])):
            pair(req, ans)
            del answers[key][i]
            return True
        return False

    for rec in client:
        if rec.line in answered_by_error:
            continue
        ev = rec.event
        item = _d(ev.get("item"))
        if rec.kind == "conversation.item.truncate":
            take(("truncate", str(ev.get("item_id")), str(_n(ev.get("audio_end_ms")))), rec)
        elif rec.kind == "conversation.item.create":
            by_id = bool(_s(item.get("id"))) and take(("create-id", item["id"]), rec)
            if not by_id and item.get("type") == "function_call_output" and item.get("call_id"):
                take(("create-call", str(item["call_id"])), rec)
        elif rec.kind == "conversation.item.delete":
            take(("delete", str(ev.get("item_id"))), rec)
        elif rec.kind == "conversation.item.retrieve":
            take(("retrieve", str(ev.get("item_id"))), rec)
        elif rec.kind == "response.cancel" and _s(ev.get("response_id")):
            take(("cancel", ev["response_id"]), rec)

    # answers without ids, matched first in first out in log order
    vad_items: set[str] = {
        str(r.event.get("item_id"))
        for r in server
        if r.kind == "input_audio_buffer.speech_stopped" and r.event.get("item_id")
    }
    pending: dict[str, deque[tuple[Record, bool]]] = defaultdict(deque)
    by_metadata: dict[str, Record] = {}
    used_metadata: set[int] = set()
    for rec in records:
        if rec.line in answered_by_error:
            continue
        if rec.side == "client":
            if rec.kind in _ORDER_PAIRS.values():
                pending[rec.kind].append((rec, False))
                meta = _d(_d(rec.event.get("response")).get("metadata"))
                if rec.kind == "response.create" and meta:
                    by_metadata[json.dumps(meta, sort_keys=True)] = rec
            continue
        if (
            rec.kind == "input_audio_buffer.committed"
            and str(rec.event.get("item_id")) in vad_items
        ):
            # a server-VAD commit: not an answer, and it may start a response of its own
            pending["response.create"] = deque((r, True) for r, _ in pending["response.create"])
            continue
        request_kind = _ORDER_PAIRS.get(rec.kind)
        if request_kind is None:
            continue
        if rec.kind == "response.created":
            meta = _d(_d(rec.event.get("response")).get("metadata"))
            key = json.dumps(meta, sort_keys=True) if meta else None
            if key and key in by_metadata and by_metadata[key].line not in used_metadata:
                req = by_metadata[key]
                used_metadata.add(req.line)
                pending["response.create"] = deque(
                    (r, amb) for r, amb in pending["response.create"] if r.line != req.line
                )
                pair(req, rec)
                continue
        queue = pending[request_kind]
        while queue and queue[0][0].line in used_metadata:
            queue.popleft()
        if queue:
            req, ambiguous = queue.popleft()
            if not ambiguous:
                pair(req, rec)

    # log order as observation order: a client line after server lines was sent after they
    # arrived, so it bounds the offset from below too. Used only if the answers agree.
    seq_lower: list[tuple[int, int, int]] = []
    latest: Record | None = None
    for rec in records:
        if rec.side == "server":
            if latest is None or rec.ns >= latest.ns:
                latest = rec
        elif latest is not None:
            seq_lower.append((latest.ns - rec.ns, rec.line, latest.line))
    order_note = ""
    if seq_lower and upper:
        if max(seq_lower)[0] <= min(upper)[0]:
            lower += seq_lower
            order_note = (
                f"; log order read as observation order ({len(seq_lower)} client line(s) after "
                "server lines; consistent with the answers)"
            )
        else:
            order_note = "; log order is not observation order (it contradicts the answers)"
    return _combine(upper, lower, file, problems, order_note)


def _combine(
    upper: list[tuple[int, int, int]],
    lower: list[tuple[int, int, int]],
    file: str,
    problems: list[Problem] | None,
    note: str = "",
) -> ClockEstimate:
    w = ONE_SIDED_WINDOW_NS
    if upper and lower:
        hi = min(upper)
        lo = max(lower)
        mid = (hi[0] + lo[0]) // 2
        half = abs(hi[0] - lo[0]) // 2
        consistent = lo[0] <= hi[0]
        method = (
            f"NTP-style bounds: {len(upper)} server answer(s) to client requests give "
            f"server-client <= {hi[0] / 1e6:.3f} ms (lines {hi[1]}->{hi[2]}); {len(lower)} "
            f"client event(s) sent after server events give >= {lo[0] / 1e6:.3f} ms "
            f"(lines {lo[2]}->{lo[1]}); offset = midpoint, uncertainty = half the gap{note}"
        )
        if not consistent:
            method += " (the bounds cross: uncertainty is half the overlap)"
            if problems is not None:
                problems.append(
                    _warn(
                        file,
                        hi[2],
                        f"clock bounds cross: the answer on line {hi[2]} (to line {hi[1]}) "
                        f"puts the server at most {hi[0] / 1e6:.3f} ms ahead, the reaction on "
                        f"line {lo[1]} at least {lo[0] / 1e6:.3f} ms ahead; clocks drift or the "
                        "log mixes sources",
                    )
                )
        return ClockEstimate(-mid, half, method, len(upper), len(lower), lo[0], hi[0], consistent)
    if upper:
        hi = min(upper)
        method = (
            f"one-sided: {len(upper)} server answer(s) to client requests give server-client "
            f"<= {hi[0] / 1e6:.3f} ms (lines {hi[1]}->{hi[2]}); no reaction bounds it from "
            f"below, so the fastest answer is assumed to take 0..{w / 1e6:g} ms{note}"
        )
        mid = hi[0] - w // 2
        return ClockEstimate(-mid, w // 2, method, len(upper), 0, None, hi[0])
    if lower:
        lo = max(lower)
        method = (
            f"one-sided: {len(lower)} client event(s) naming server-made ids give "
            f"server-client >= {lo[0] / 1e6:.3f} ms (lines {lo[2]}->{lo[1]}); no answer bounds "
            f"it from above, so the quickest reaction is assumed to take 0..{w / 1e6:g} ms"
        )
        mid = lo[0] + w // 2
        return ClockEstimate(-mid, w // 2, method, 0, len(lower), lo[0], None)
    return ClockEstimate(
        0, 0, "assumed: no request/answer pairs in the log; server clock taken as the client's"
    )

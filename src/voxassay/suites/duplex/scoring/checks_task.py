"""Task checks of a session: goal completion, parameter consistency after corrections, tool choice and arguments, stale-result interception, delivery correctness and consistency across a reconnect (each ``check_*(ctx) -> TaskCheck``; the catalogue defines them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from voxassay.contracts.duplex.business import (
    META_KEY,
    CallStatus,
    ToolCall,
)
from voxassay.contracts.duplex.event import Event
from voxassay.contracts.duplex.scenario import Scenario, Tool
from voxassay.suites.duplex.scoring.task_context import (
    GO_ACTIONS,
    Onset,
    TaskCheck,
    TaskContext,
    TaskState,
    _na,
    _unscored,
    call_summary,
    is_correction,
    is_stop,
)
from voxassay.suites.duplex.scoring.values import (
    ISO_DATE,
    canonical_value,
    normalize_value,
    same_field,
    values_equal,
)

__all__ = [
    "CorrectedField",
    "check_delivery_correctness",
    "check_goal_completion",
    "check_parameter_consistency",
    "check_reconnect_consistency",
    "check_stale_results",
    "check_tool_choice",
    "corrected_fields",
]


def check_goal_completion(ctx: TaskContext) -> TaskCheck:
    """Goal completion: the final state holds every key of ``expected_final_state``.

    value = matched keys / expected keys (values compared after ``normalize_value``; a
    missing key fails); passed = every key matches. Applies when the truth names at least one
    key; unscored without ``final-state.json``. Session denominator: sessions whose scenario
    has a non-empty expected final state.
    """
    name = "goal_completion"
    expected = ctx.scenario.business_truth.expected_final_state
    if not expected:
        return _na(name, "the scenario's expected_final_state is empty")
    if ctx.final_state is None:
        return _unscored(name, "no final-state.json")
    mismatches: dict[str, dict[str, Any]] = {}
    for key, want in expected.items():
        found, got = _lookup(ctx.final_state, key)
        if not found:
            mismatches[key] = {"expected": want, "got": None, "missing": True}
        elif not values_equal(got, want):
            mismatches[key] = {"expected": want, "got": got, "missing": False}
    matched = len(expected) - len(mismatches)
    writes = [c for c in ctx.calls if ctx.standing(c)]
    related = [
        c for c in writes if any(same_field(k, a) for k in mismatches for a in c.arguments)
    ] or writes
    reason = (
        f"{matched}/{len(expected)} keys match"
        if not mismatches
        else "; ".join(
            f"{k}: missing"
            if m["missing"]
            else f"{k}: got {m['got']!r}, expected {m['expected']!r}"
            for k, m in mismatches.items()
        )
    )
    details: dict[str, Any] = {"mismatches": mismatches}
    if mismatches:
        details["calls"] = [call_summary(c) for c in related]
        details["expected_values"] = {k: m["expected"] for k, m in mismatches.items()}
        details["trigger"] = _goal_trigger(ctx)
    return TaskCheck(
        name,
        not mismatches,
        value=matched / len(expected),
        expected=expected,
        evidence=[c.call_id for c in related] if mismatches else [],
        reason=reason,
        details=details,
    )


def _goal_trigger(ctx: TaskContext) -> dict[str, Any] | None:
    """The user input the final state depends on most: the last stop, else the last
    correction, else the first request."""
    segs = ctx.user_segments()
    for pick, kind in ((is_stop, "stop"), (is_correction, "correction")):
        chosen = [s for s in segs if pick(s)]
        if chosen:
            return ctx.onset_of(chosen[-1], kind).to_dict()
    return ctx.onset_of(segs[0], "request").to_dict() if segs else None


def _lookup(state: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    if key in state:
        return True, state[key]
    cur: Any = state
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


@dataclass(frozen=True)
class CorrectedField:
    """A corrected task field, its latest value, where that came from, and when."""

    field: str
    value: Any
    source: Literal["scenario", "task.state"]
    onset: Onset | None
    task_id: str | None = None


def corrected_fields(ctx: TaskContext) -> list[CorrectedField]:
    """Fields the user corrected, with their latest value.

    From the scenario: when a user segment is a correction (intent ``correction`` or task
    action ``modify``), every key of ``expected_final_state`` holds the latest value (the
    truth is written after all corrections). From the ledger: a ``task.state`` field whose
    value changed between versions; its latest value is the one at the highest version. The
    scenario wins where both name the same field (the agent's own state may be wrong).
    """
    out: list[CorrectedField] = []
    corrections = [s for s in ctx.user_segments() if is_correction(s)]
    if corrections:
        onset = ctx.onset_of(corrections[-1], "correction")
        for key, value in ctx.scenario.business_truth.expected_final_state.items():
            out.append(CorrectedField(key, value, "scenario", onset))
    for task_id, lst in ctx.states.items():
        versioned = sorted(
            (s for s in lst if s.version is not None), key=lambda s: (s.version or 0, s.ns)
        )
        current: dict[str, tuple[Any, TaskState]] = {}
        changed: set[str] = set()
        for s in versioned:
            for key, value in s.fields.items():
                if key in current and not values_equal(current[key][0], value):
                    changed.add(key)
                if key not in current or not values_equal(current[key][0], value):
                    current[key] = (value, s)
        for key in sorted(changed):
            if any(same_field(key, c.field) for c in out if c.source == "scenario"):
                continue
            value, s = current[key]
            onset = Onset(
                kind="correction",
                ns=s.ns,
                source="task.state",
                utterance_id=s.utterance_id,
                event_id=s.event_id,
                task_id=task_id,
            )
            out.append(CorrectedField(key, value, "task.state", onset, task_id))
    return out


def check_parameter_consistency(ctx: TaskContext) -> TaskCheck:
    """Parameter consistency: corrected fields hold their latest value everywhere it lands.

    For each corrected field (``corrected_fields``): the final state's matching key (exact, or
    ``_``-prefixed like ``final_date`` ~ ``date``) and every matching argument of the
    committed writes that stand at the end, restricted to the last standing write per
    (task, tool) plus every standing write requested after the correction (an earlier write
    that a later one replaced is not counted). value = comparisons that differ from the
    latest value; passed = none differ. Applies when a field was corrected; unscored when
    nothing carries the field. Denominator: sessions with a correction.
    """
    name = "parameter_consistency"
    fields_ = corrected_fields(ctx)
    if not fields_:
        return _na(name, "no field was corrected (no correction segment, no task.state change)")
    if ctx.audit is None and ctx.final_state is None:
        return _unscored(name, "neither tool-audit.json nor final-state.json")
    standing = [c for c in ctx.calls if ctx.standing(c)]
    last_per: dict[tuple[str | None, str], ToolCall] = {}
    for c in sorted(standing, key=lambda c: (c.commit_ns, c.requested_ns)):
        last_per[(c.task_id, c.tool)] = c
    mismatches: list[dict[str, Any]] = []
    failing: dict[str, ToolCall] = {}
    compared = 0
    evidence: list[str] = []
    for f in fields_:
        if f.onset and f.onset.event_id:
            evidence.append(f.onset.event_id)
        if ctx.final_state is not None:
            state = ctx.final_state
            looked: list[tuple[str, bool, Any]] = [
                (k, True, state[k]) for k in state if same_field(k, f.field)
            ]
            if f.source == "scenario" and f.field not in state:
                # a dotted truth key (appointments.A1.date) is looked up by its path; a
                # missing truth key is a mismatch
                looked = [(f.field, *_lookup(state, f.field))]
            for k, present, got in looked:
                compared += 1
                if not present or not values_equal(got, f.value):
                    mismatches.append(
                        {
                            "field": f.field,
                            "where": f"final_state.{k}",
                            "got": got,
                            "expected": f.value,
                        }
                    )
        onset_ns = f.onset.ns if f.onset else None
        for c in standing:
            if f.task_id is not None and c.task_id not in (None, f.task_id):
                continue
            recent = onset_ns is not None and c.requested_ns >= onset_ns
            if last_per.get((c.task_id, c.tool)) is not c and not recent:
                continue
            for arg, got in c.arguments.items():
                if not same_field(arg, f.field):
                    continue
                compared += 1
                if not values_equal(got, f.value):
                    mismatches.append(
                        {
                            "field": f.field,
                            "where": f"call {c.call_id}.arguments.{arg}",
                            "got": got,
                            "expected": f.value,
                            "call_id": c.call_id,
                        }
                    )
                    failing[c.call_id] = c
    if compared == 0:
        return _unscored(
            name,
            "no final-state key and no committed argument carries the corrected field(s) "
            + ", ".join(f.field for f in fields_),
        )
    evidence += list(failing)
    trigger = next((f.onset for f in fields_ if f.onset is not None), None)
    return TaskCheck(
        name,
        not mismatches,
        value=len(mismatches),
        expected={f.field: f.value for f in fields_},
        evidence=evidence,
        reason=(
            f"{compared} place(s) hold the latest value"
            if not mismatches
            else "; ".join(
                f"{m['where']} = {m['got']!r}, latest is {m['expected']!r}" for m in mismatches
            )
        ),
        details={
            "mismatches": mismatches,
            "calls": [call_summary(c) for c in failing.values()],
            "expected_values": {f.field: f.value for f in fields_},
            "trigger": trigger.to_dict() if trigger else None,
            "sources": sorted({f.source for f in fields_}),
        },
    )


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _argument_problems(tool: Tool, args: Mapping[str, Any]) -> list[str]:
    """Arguments against the tool's schema: required keys, declared types, enums,
    ``format: date``, and unknown keys when ``additionalProperties`` is false."""
    schema = tool.arguments
    props = schema.get("properties") or {}
    out = [
        f"missing required argument {k!r}" for k in schema.get("required") or [] if k not in args
    ]
    for key, value in args.items():
        spec = props.get(key)
        if not isinstance(spec, Mapping):
            if schema.get("additionalProperties") is False:
                out.append(f"unexpected argument {key!r}")
            continue
        kinds = spec.get("type")
        kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
        if kinds and not any(_JSON_TYPES.get(k, lambda v: True)(value) for k in kinds):
            out.append(f"argument {key!r} is not {'/'.join(kinds)}")
        if "enum" in spec and value not in spec["enum"]:
            out.append(f"argument {key!r} = {value!r} is not one of {spec['enum']}")
        if (
            spec.get("format") == "date"
            and isinstance(value, str)
            and not ISO_DATE.match(value.strip())
        ):
            out.append(f"argument {key!r} = {value!r} is not an ISO date")
    return out


def _write_expected(sc: Scenario) -> bool:
    """The scenario expects a write to go through: allowed side effects exist and the last
    task action is keep/modify (or no action is labelled and a final state is expected)."""
    if not sc.business_truth.allowed_side_effects:
        return False
    actions = [s.expected_task_action for s in sc.segments if s.expected_task_action is not None]
    if actions:
        return actions[-1] in GO_ACTIONS
    return bool(sc.business_truth.expected_final_state)


def check_tool_choice(ctx: TaskContext, required_tools: Sequence[str] | None = None) -> TaskCheck:
    """Tool choice and arguments.

    Problems counted (value): a committed write to a tool outside ``allowed_side_effects``
    (compensating calls included); a call to a tool the scenario does not define (when it
    defines tools); arguments that break the tool's schema; a required tool never called
    successfully. Required tools: ``required_tools`` if given (each needs an ``ok`` call),
    else, when the scenario expects a write (``_write_expected``), at least one committed,
    non-compensating write to an allowed tool. passed = no problem. Applies when the scenario
    defines tools or the audit has calls; unscored without ``tool-audit.json``.
    """
    name = "tool_choice"
    sc = ctx.scenario
    if not sc.tools and not ctx.calls and not required_tools:
        return _na(name, "the scenario defines no tools and no call was made")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    allowed = set(sc.business_truth.allowed_side_effects)
    problems: list[str] = []
    failing: dict[str, ToolCall] = {}
    for c in ctx.calls:
        tool = ctx.tool(c.tool)
        if sc.tools and tool is None:
            problems.append(f"call {c.call_id}: tool {c.tool!r} is not in the scenario")
            failing[c.call_id] = c
        if c.is_write and c.tool not in allowed:
            problems.append(f"call {c.call_id}: committed write to {c.tool!r}, not allowed")
            failing[c.call_id] = c
        if tool is not None:
            for p in _argument_problems(tool, c.arguments):
                problems.append(f"call {c.call_id}: {p}")
                failing[c.call_id] = c
    required: list[str]
    if required_tools is not None:
        required = list(required_tools)
        for t in required:
            if not any(c.tool == t and c.status is CallStatus.OK for c in ctx.calls):
                problems.append(f"required tool {t!r} was never called successfully")
    elif _write_expected(sc):
        required = sorted(allowed)
        if not any(c.is_write and c.compensates is None and c.tool in allowed for c in ctx.calls):
            problems.append("no committed write to an allowed tool (" + ", ".join(required) + ")")
    else:
        required = []
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected={"allowed_side_effects": sorted(allowed), "required": required},
        evidence=list(failing),
        reason="; ".join(problems) or f"{len(ctx.calls)} call(s) to the right tools",
        details={"problems": problems, "calls": [call_summary(c) for c in failing.values()]},
    )


def check_stale_results(ctx: TaskContext) -> TaskCheck:
    """Stale-result interception: no result is announced after it was superseded.

    A delivery (``delivered_ns`` set) is stale when the call's ``task_version`` is below the
    task's latest version at delivery time (``TaskContext.version_at``), or when a scenario
    change of the task (correction, modify, cancel, compensate; taken as settled at the end
    of the user's speech) falls between the request and the delivery. value = stale
    deliveries; passed = value == 0. Applies when a result was delivered or a tool may go
    stale; unscored without ``tool-audit.json``.
    """
    name = "stale_result_interception"
    delivered = [c for c in ctx.calls if c.delivered_ns is not None]
    if not delivered and not any(t.may_go_stale for t in ctx.scenario.tools):
        return _na(name, "no result was delivered and no tool may go stale")
    if ctx.audit is None:
        return _unscored(name, "no tool-audit.json")
    changes = [o for o in ctx.changes() if o.settled_ns is not None]
    stale: dict[str, str] = {}
    trigger: Onset | None = None
    for c in delivered:
        at = c.delivered_ns or 0
        latest = ctx.version_at(c.task_id, at, c)
        if c.task_version is not None and latest is not None and c.task_version < latest:
            stale[c.call_id] = f"made for version {c.task_version}, delivered at version {latest}"
            newer = [
                s
                for s in ctx.states.get(c.task_id, [])
                if s.version is not None and s.version > c.task_version and s.ns <= at
            ]
            if newer and trigger is None:
                s = newer[0]
                trigger = Onset(
                    "change",
                    s.ns,
                    "task.state",
                    utterance_id=s.utterance_id,
                    event_id=s.event_id,
                    task_id=c.task_id,
                )
        for o in changes:
            if c.requested_ns < (o.settled_ns or 0) <= at:
                stale.setdefault(
                    c.call_id, f"requested before the user changed the task ({o.segment_id})"
                )
                if trigger is None or trigger.source == "task.state":
                    trigger = o
    calls = [c for c in delivered if c.call_id in stale]
    return TaskCheck(
        name,
        not stale,
        value=len(stale),
        expected=0,
        evidence=list(stale),
        reason="; ".join(f"{k}: {v}" for k, v in stale.items())
        or f"{len(delivered)} delivered result(s), none stale",
        details={
            "calls": [call_summary(c) for c in calls],
            "trigger": trigger.to_dict() if trigger else None,
        },
    )


def check_delivery_correctness(ctx: TaskContext) -> TaskCheck:
    """Delivery correctness: the last result announced for each task is the final version's.

    Per task with a delivery: the last delivered call must be of the task's final version
    (highest version seen in task.state or the audit), its result must equal (normalized) the
    result of the last ``ok`` call at that version, and it must have been requested after the
    user's last change of the task (scenario). value = tasks whose last announcement is wrong;
    passed = value == 0. Applies when some result was delivered.
    """
    name = "delivery_correctness"
    delivered = [c for c in ctx.calls if c.delivered_ns is not None]
    if not delivered:
        if ctx.audit is None:
            return _unscored(name, "no tool-audit.json")
        return _na(name, "no result was delivered")
    changes = [o for o in ctx.changes() if o.settled_ns is not None]
    last_change = max(changes, key=lambda o: o.settled_ns or 0) if changes else None
    by_task: dict[str | None, list[ToolCall]] = defaultdict(list)
    for c in delivered:
        by_task[c.task_id].append(c)
    problems: dict[str, str] = {}
    wrong: list[ToolCall] = []
    for task_id, lst in by_task.items():
        last = max(lst, key=lambda c: c.delivered_ns or 0)
        final_v = ctx.final_version(task_id)
        finals = [
            c
            for c in ctx.calls
            if c.task_id == task_id
            and c.status is CallStatus.OK
            and (final_v is None or c.task_version == final_v)
        ]
        final_call = max(finals, key=lambda c: c.commit_ns) if finals else None
        why = []
        if final_v is not None and last.task_version is not None and last.task_version < final_v:
            why.append(f"announced version {last.task_version}, final version is {final_v}")
        if (
            final_call is not None
            and final_call is not last
            and not values_equal(final_call.result, last.result)
        ):
            why.append(f"result differs from the final call {final_call.call_id}")
        if last_change is not None and last.requested_ns < (last_change.settled_ns or 0):
            why.append(f"requested before the user's last change ({last_change.segment_id})")
        if why:
            problems[f"task {task_id}"] = f"{last.call_id}: " + "; ".join(why)
            wrong.append(last)
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected=0,
        evidence=[c.call_id for c in wrong],
        reason="; ".join(f"{k}: {v}" for k, v in problems.items())
        or f"{len(by_task)} task(s) ended on the final result",
        details={
            "calls": [call_summary(c) for c in wrong],
            "trigger": last_change.to_dict() if last_change and wrong else None,
        },
    )


def check_reconnect_consistency(ctx: TaskContext) -> TaskCheck:
    """Consistency after reconnect: nothing lost, nothing replayed across a drop.

    For each ``session.disconnected`` followed by ``session.resumed`` (or
    ``session.connected``): (1) snapshots in ``data.state``, when both exist: every key
    that differs after the drop is explained by a write committed between the two events
    whose arguments or result hold that key with the new value; (2) ``task.state``: a task's
    first version after the resume is not below its last before the drop, and equal versions
    hold equal fields; (3) replays: a committed write requested after the drop that repeats
    (idempotency key, or task + tool + normalized arguments) a committed write requested
    before it. value = problems; passed = value == 0. Applies when a resumed drop exists;
    unscored when none of the three kinds of evidence is present.
    """
    name = "reconnect_consistency"
    ordered = sorted(ctx.events, key=ctx.t)
    windows: list[tuple[Event, Event]] = []
    for i, e in enumerate(ordered):
        if e.event_type != "session.disconnected":
            continue
        back = next(
            (
                r
                for r in ordered[i + 1 :]
                if r.event_type in ("session.resumed", "session.connected")
            ),
            None,
        )
        if back is not None:
            windows.append((e, back))
    if not windows:
        drops = any(e.event_type == "session.disconnected" for e in ordered)
        return _na(name, "disconnected and never resumed" if drops else "no reconnect")
    problems: list[str] = []
    failing: dict[str, ToolCall] = {}
    related: dict[str, dict[str, Any]] = {}
    evidence: list[str] = []
    judged = False
    for down, up in windows:
        t0, t1 = ctx.t(down), ctx.t(up)
        evidence += [down.event_id, up.event_id]
        before, after = down.data.get("state"), up.data.get("state")
        between = [c for c in ctx.calls if c.is_write and t0 <= c.commit_ns <= t1]
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            judged = True
            for key in sorted(set(before) | set(after)):
                if key == META_KEY:
                    continue
                if key in before and key in after and values_equal(before[key], after[key]):
                    continue
                if key not in after:
                    problems.append(f"{key!r} lost across the reconnect at {t1 / 1e6:.0f} ms")
                    continue
                if not any(_explains(c, key, after[key]) for c in between):
                    problems.append(
                        f"{key!r} changed across the reconnect ({before.get(key)!r} -> "
                        f"{after[key]!r}) without a write in between"
                    )
        for task_id, lst in ctx.states.items():
            pre = [s for s in lst if s.ns <= t0 and s.version is not None]
            post = [s for s in lst if s.ns >= t1 and s.version is not None]
            if not pre or not post:
                continue
            judged = True
            a, b = pre[-1], post[0]
            evidence += [a.event_id, b.event_id]
            if (b.version or 0) < (a.version or 0):
                problems.append(f"task {task_id} went back from version {a.version} to {b.version}")
            elif b.version == a.version and normalize_value(a.fields) != normalize_value(b.fields):
                problems.append(f"task {task_id} version {a.version} changed its fields")
        if ctx.audit is not None:
            judged = True
            writes = sorted((c for c in ctx.calls if c.is_write), key=lambda c: c.requested_ns)
            for b_call in writes:
                if b_call.requested_ns < t0:
                    continue
                for a_call in writes:
                    if a_call.requested_ns >= min(b_call.requested_ns, t1) or a_call is b_call:
                        continue
                    same_key = bool(a_call.idempotency_key) and (
                        a_call.idempotency_key == b_call.idempotency_key
                    )
                    same_effect = (
                        a_call.task_id,
                        a_call.tool,
                        canonical_value(a_call.arguments),
                    ) == (
                        b_call.task_id,
                        b_call.tool,
                        canonical_value(b_call.arguments),
                    )
                    if (same_key or same_effect) and b_call.call_id not in failing:
                        problems.append(
                            f"call {b_call.call_id} replays {a_call.call_id} across the reconnect"
                        )
                        failing[b_call.call_id] = b_call
                        related[b_call.call_id] = call_summary(a_call)
    if not judged:
        return _unscored(name, "no state snapshots, task.state versions or tool audit to compare")
    return TaskCheck(
        name,
        not problems,
        value=len(problems),
        expected=0,
        evidence=[*evidence, *failing],
        reason="; ".join(problems) or f"{len(windows)} reconnect(s) consistent",
        details={
            "calls": [call_summary(c) for c in failing.values()],
            "related": related,
            "windows": [[d.event_id, u.event_id] for d, u in windows],
            "problems": problems,
        },
    )


def _explains(call: ToolCall, key: str, value: Any) -> bool:
    for source in (call.arguments, call.result):
        if isinstance(source, Mapping):
            for k, v in source.items():
                if same_field(str(k), key) and values_equal(v, value):
                    return True
    return False

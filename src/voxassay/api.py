"""The Python API: what a notebook needs without a file on disk or the CLI.

``voxassay.wer`` scores texts with the same normalizers and counts as ``asr score``;
``voxassay.run`` runs a suite on items (a path in any manifest format, a list of dicts or
:class:`~voxassay.core.items.Item`) with systems (spec strings, or Python objects with the
capability's method, or plain callables); ``voxassay.load_run`` opens a run folder;
``voxassay.score_call`` scores one two-channel conversation with a voice agent.
See ``docs/api.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxassay.core.errors import InputError
from voxassay.core.items import Item
from voxassay.core.records import Record

if TYPE_CHECKING:
    from voxassay.suites.duplex.scoring.session_score import SessionScore

SUITES = ("asr", "su", "tts")


@dataclass(frozen=True)
class WerResult:
    """Corpus WER = (substitutions + deletions + insertions) / reference_words, pooled over
    all pairs after ``normalizer`` (its version string); ``wer`` is None when there are no
    reference words (not estimable), never 0."""

    wer: float | None
    substitutions: int
    deletions: int
    insertions: int
    reference_words: int
    normalizer: str
    pairs: int
    empty_references: int = 0
    """Pairs whose reference normalizes to nothing: kept out of the counts, as ``asr score``
    and the Open ASR Leaderboard keep them out."""


def wer(
    references: str | Sequence[str],
    hypotheses: str | Sequence[str],
    normalizer: str = "oal-en",
    merge_compounds: bool | None = None,
) -> WerResult:
    """Word error rate of ``hypotheses`` against ``references`` (one string each, or equal
    length lists), by ``asr score``'s rule: normalized (``oal-en``, ``whisper-en`` or ``raw``),
    pairs whose reference normalizes to nothing left out (counted in ``empty_references``),
    split/joined compounds equal unless ``raw`` (``merge_compounds`` overrides)."""
    from voxassay.suites.asr.wer import normalizer_version, score_text

    refs = [references] if isinstance(references, str) else list(references)
    hyps = [hypotheses] if isinstance(hypotheses, str) else list(hypotheses)
    if len(refs) != len(hyps):
        raise InputError(f"{len(refs)} references but {len(hyps)} hypotheses")
    totals = {"sub": 0, "del": 0, "ins": 0, "ref_words": 0}
    empty = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        counts = score_text(ref, hyp, normalizer, merge_compounds)
        if counts["empty_ref"]:
            empty += 1
            continue
        for key in totals:
            totals[key] += int(counts[key])
    n = totals["ref_words"]
    errors = totals["sub"] + totals["del"] + totals["ins"]
    return WerResult(
        wer=errors / n if n else None,
        substitutions=totals["sub"],
        deletions=totals["del"],
        insertions=totals["ins"],
        reference_words=n,
        normalizer=normalizer_version(normalizer),
        pairs=len(refs),
        empty_references=empty,
    )


@dataclass
class Run:
    """A run folder opened: its config and system info (``info``, run.json), the items, the
    records (one per item x system x repeat, failures included) and the report (report.json,
    rebuilt from the folder when it is missing)."""

    path: Path
    suite: str
    info: dict[str, Any]
    items: list[Item]
    records: list[Record]
    report: dict[str, Any] = field(repr=False)

    def ok(self, system: str | None = None) -> list[Record]:
        """The records with status ``ok`` (of one system when given)."""
        return [r for r in self.records if r.status == "ok" and system in (None, r.system)]


def load_run(path: str | Path) -> Run:
    """Open the run folder ``path`` (what every run command prints last)."""
    from voxassay.core.runstore import RunStore

    store = RunStore.open(path)
    report_path = store.path / "report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text(encoding="utf-8"))
    else:
        from voxassay.report import write_report

        write_report(store.path)
        report = json.loads(report_path.read_text(encoding="utf-8"))
    info = store.info()
    return Run(
        path=store.path,
        suite=str(info.get("suite", "")),
        info=info,
        items=store.items(),
        records=store.load_records().records,
        report=report,
    )


def _system_specs(systems: Any) -> tuple[list[str], bool]:
    """Spec strings for ``systems`` (strings, objects, or {name: spec-or-object}); objects
    are registered in this process (``object:NAME``). The flag says whether any was."""
    from voxassay.systems.in_process import register

    if isinstance(systems, str) or callable(systems) or _is_system_object(systems):
        systems = [systems]
    named: Iterable[tuple[str | None, Any]] = (
        systems.items() if isinstance(systems, Mapping) else ((None, s) for s in systems)
    )
    specs: list[str] = []
    in_process = False
    for i, (name, system) in enumerate(named):
        if isinstance(system, str):
            specs.append(f"{name}={system}" if name else system)
            continue
        label = name or getattr(system, "name", None) or getattr(system, "__name__", None)
        label = str(label or f"{type(system).__name__}-{i}")
        specs.append(register(system, label))
        in_process = True
    if not specs:
        raise InputError("name at least one system")
    return specs, in_process


def _is_system_object(obj: Any) -> bool:
    return any(hasattr(obj, m) for m in ("transcribe", "synthesize", "understand"))


def run(
    suite: str,
    items: str | Path | Iterable[Item | dict[str, Any]],
    systems: Any,
    out: str | Path = "runs",
    *,
    format: str | None = None,
    columns: dict[str, str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    **options: Any,
) -> Run:
    """Run ``suite`` (``asr``, ``su`` or ``tts``) and return the opened run.

    ``items``: a manifest path (any format; ``format``/``columns`` as on the command line),
    or a list of Item objects or manifest dicts (``{"audio_filepath", "text", ...}``); for
    ``tts`` a text-item file or ``"default"``. ``systems``: spec strings, Python objects
    (``transcribe(audio)``, ``synthesize(text, voice, instructions)``,
    ``understand(parts, prompt)``) or plain callables, or a dict naming each. ``options``
    go to the suite's runner (``normalizer``, ``workers``, ``timeout``, ``tasks`` for
    ``su``, ...). Failures are in the records, as with the CLI.
    """
    if suite not in SUITES:
        raise InputError(f"unknown suite {suite!r}; the API runs {', '.join(SUITES)}")
    specs, in_process = _system_specs(systems)
    if in_process:
        options["executor"] = "thread"  # the objects live in this process
    if suite == "tts":
        from voxassay.suites.tts.suite import run_tts

        if not isinstance(items, str | Path):
            raise InputError("tts items are a text-item file or a named set (e.g. 'default')")
        store = run_tts(specs, out, items=items, **options)
        return load_run(store.path)
    from voxassay.core.manifests import items_from

    source = items_from(items, format, columns).select(limit, sample, seed)
    if suite == "asr":
        from voxassay.suites.asr.suite import run_asr

        store = run_asr(source, specs, out, **options)
    else:
        from voxassay.suites.su.run import run_su

        tasks = options.pop("tasks", None)
        if not tasks:
            raise InputError("su needs tasks=[...] (e.g. ['emotion'])")
        store = run_su(source, tasks, specs, out, **options)
    return load_run(store.path)


def score_call(
    user: str | Path | Any,
    agent: str | Path | Any | None = None,
    *,
    sample_rate: int | None = None,
    user_channel: int = 0,
    labels: Sequence[Mapping[str, Any]] = (),
    detector: str = "silero",
) -> SessionScore:
    """One call with a voice agent scored as ``voxassay duplex score --stereo`` scores it.

    ``user``: a two-channel recording (``agent`` None; ``user_channel`` says which side is the
    user), or the user side as a file or as samples (then ``sample_rate``); ``agent``: the
    agent side likewise. ``labels``: expected turn actions (``start_s``, ``end_s``,
    ``expected_actions``). Returns the call's ``SessionScore``: its speech segments, and
    ``.analysis("call")`` with the turn-taking rates (k of n, each with its denominator) and
    latencies (censored where the agent never answered or never stopped).
    """
    import numpy as np

    from voxassay.core.audio import Audio, resample
    from voxassay.suites.duplex.scoring.session_score import SessionScore
    from voxassay.suites.duplex.scoring.stereo import (
        ANALYSIS_SR,
        CallInput,
        load_channels,
        segment_sides,
    )

    def side(x: Any, name: str) -> np.ndarray:
        if isinstance(x, str | Path):
            call = CallInput(id="call", user=str(x), agent=str(x))
            return load_channels(call)[0]
        if sample_rate is None:
            raise InputError(f"{name} is given as samples: sample_rate is needed")
        samples = np.asarray(x, dtype=np.float32)
        if samples.ndim != 1:
            raise InputError(f"{name} samples must be one channel, got shape {samples.shape}")
        return resample(Audio(samples, int(sample_rate)), ANALYSIS_SR).samples

    if agent is None:
        if not isinstance(user, str | Path):
            raise InputError("one argument must be a two-channel recording (a path)")
        u, a, _ = load_channels(CallInput(id="call", stereo=str(user), user_channel=user_channel))
    else:
        u, a = side(user, "user"), side(agent, "agent")
        n = max(len(u), len(a))
        u, a = np.pad(u, (0, n - len(u))), np.pad(a, (0, n - len(a)))
    output = segment_sides(u, a, ANALYSIS_SR, detector)
    output["labels"] = [dict(x) for x in labels]
    return SessionScore.model_validate(json.loads(json.dumps(output)))  # as a record holds it

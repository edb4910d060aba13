"""``voxassay study create``: items and questions in, a ready-to-serve study folder out.

Sources (``--from``, repeatable):

* ``items.jsonl``: one JSON object a line, ``id``, ``system``, and ``audio`` (a path,
  relative to the file's folder) or ``say`` (+ optional ``voice``, a synthesizer spec,
  default ``piper``) rendered now; optional ``text``/``context`` (shown to raters),
  ``group`` (items of one group from different systems form pairs) and ``gold``
  (``{eval_id: expected score}``: a gold item given to every rater).
* a run folder: duplex runs (``voxassay duplex run``): each session's ``input.wav`` and
  ``output.wav`` mixed to one file (or its ``mixed.wav``); sessions pair across systems by
  scenario and repeat. Other runs: records whose ``output`` names an audio file.

Every item gets ``raters_per_item`` raters with balanced loads; systems are spread over
raters and interleaved in each rater's randomized order; traps (degraded copies, expected
to be rated lowest) and gold items go to every rater at random positions after the first;
pair sides are balanced per item. Tokens: only SHA-256 hashes are stored, the links are
written once to ``invites.txt`` (mode 0600).
"""

from __future__ import annotations

import json
import math
import os
import random
import secrets
import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.errors import AudioError, InputError, ManifestError
from voxassay.study.format import (
    AUDIO_DIR,
    INVITES_FILE,
    Eval,
    HeadphoneTrial,
    Item,
    Questions,
    Stimulus,
    Study,
    load_questions,
    save_study,
)
from voxassay.study.store import StudyStore, hash_secret, utc_now

DEFAULT_BASE_URL = "http://127.0.0.1:8766"
TRAP_SYSTEM = "_trap"
GOLD_SYSTEM = "_gold"


@dataclass
class Source:
    """One stimulus before it is copied: a file, or samples made at create time."""

    key: str
    unit: str
    system: str
    context: str = ""
    gold: dict[str, float] | None = None
    path: Path | None = None
    samples: np.ndarray | None = None
    sr: int = 0
    session: str | None = None
    run: str | None = None
    origin: str = ""
    line: int = 0
    say: str | None = None
    voice: str | None = None
    written: Stimulus | None = field(default=None, repr=False)


@dataclass
class CreateResult:
    path: Path
    study: Study
    invites: dict[str, str]  # rater id (or "admin") -> link


# --- reading sources ------------------------------------------------------------------


def _read_items_jsonl(path: Path) -> list[Source]:
    from voxassay.core.items import read_json_objects

    seen: dict[str, int] = {}
    out: list[Source] = []
    rows, problems = read_json_objects(path)
    for lineno, obj in rows:
        ident, system = obj.get("id"), obj.get("system")
        if not isinstance(ident, str | int) or isinstance(ident, bool) or str(ident) == "":
            problems.append((lineno, "needs an 'id' (string)"))
            continue
        ident = str(ident)
        if ident in seen:
            problems.append((lineno, f"duplicate id {ident!r} (first on line {seen[ident]})"))
            continue
        seen[ident] = lineno
        if not isinstance(system, str) or not system.strip():
            problems.append((lineno, "needs a 'system' (string)"))
            continue
        if system.startswith("_"):
            problems.append((lineno, f"system names starting with '_' are reserved: {system!r}"))
            continue
        audio, say = obj.get("audio"), obj.get("say")
        if (audio is None) == (say is None):
            problems.append((lineno, "needs exactly one of 'audio' (path) or 'say' (text)"))
            continue
        context = obj.get("context", obj.get("text", ""))
        if not isinstance(context, str):
            problems.append((lineno, "'context'/'text' must be a string"))
            continue
        group = obj.get("group", ident)
        gold = obj.get("gold")
        if gold is not None and (
            not isinstance(gold, dict)
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in gold.values()
            )
        ):
            problems.append((lineno, "'gold' must map eval ids to numbers"))
            continue
        src = Source(
            key=ident,
            unit=str(group),
            system=system.strip(),
            context=context,
            gold={str(k): float(v) for k, v in gold.items()} if gold else None,
            origin=f"{path}:{lineno}",
            line=lineno,
        )
        if audio is not None:
            if not isinstance(audio, str):
                problems.append((lineno, "'audio' must be a path"))
                continue
            p = Path(audio)
            p = p if p.is_absolute() else path.parent / p
            if not p.is_file():
                problems.append((lineno, f"audio file not found: {p}"))
                continue
            src.path = p
            src.origin = str(p)
        else:
            voice = obj.get("voice", "piper")
            if not isinstance(say, str) or not say.strip() or not isinstance(voice, str):
                problems.append((lineno, "'say' must be non-empty text and 'voice' a spec"))
                continue
            src.say, src.voice = say, voice
        out.append(src)
    if problems:
        raise ManifestError(str(path), sorted(problems))
    if not out:
        raise InputError(f"{path}: no items")
    return out


def _synthesize(sources: list[Source]) -> None:
    """Render every ``say`` source with its synthesizer (built once per voice spec)."""
    from voxassay.core.registry import REGISTRY

    synths: dict[str, Any] = {}
    for s in sources:
        if s.say is None or s.voice is None:
            continue
        if s.voice not in synths:
            synth = REGISTRY.build("synthesize", s.voice)
            if hasattr(synth, "load"):
                synth.load()
            synths[s.voice] = synth
        audio = synths[s.voice].synthesize(s.say)
        s.samples = np.asarray(audio.samples, dtype=np.float32)[:, None]
        s.sr = int(audio.sr)
        s.origin = f"say:{s.voice}"


def _read_run(run_dir: Path) -> tuple[list[Source], dict[str, Any], list[str]]:
    """Stimuli of a run folder; (sources, source info, notes about skipped records)."""
    from voxassay.core.audio import load_audio, resample

    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"not a run folder (run.json unreadable): {run_dir}: {exc}") from None
    run_id = str(info.get("run_id") or run_dir.name)
    out: list[Source] = []
    notes: list[str] = []
    try:
        lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{run_dir}: no records.jsonl ({exc})") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            notes.append(f"{run_dir}/records.jsonl:{lineno}: unreadable line skipped")
            continue
        out_block = rec.get("output") or {}
        system = str(rec.get("system") or "")
        repeat = int(rec.get("repeat") or 0)
        scenario = (out_block.get("scenario") or {}).get("id") or rec.get("id")
        unit = f"{scenario}#{repeat}"
        src = Source(
            key=f"{run_id}/{rec.get('id')}#{repeat}/{system}",
            unit=unit,
            system=system,
            session=out_block.get("session_id"),
            run=run_id,
        )
        bundle = out_block.get("bundle")
        if bundle:
            bdir = run_dir / bundle
            inp, outp, mixed = bdir / "input.wav", bdir / "output.wav", bdir / "mixed.wav"
            try:
                if inp.is_file() and outp.is_file():
                    a_user, a_agent = load_audio(inp, sr=None), load_audio(outp, sr=None)
                    sr = a_agent.sr
                    user = resample(a_user, sr).samples
                    from voxassay.study.stimuli import mix_sides

                    src.samples, src.sr = mix_sides(user, a_agent.samples)[:, None], sr
                    src.origin = str(bdir)
                elif mixed.is_file():
                    src.path, src.origin = mixed, str(mixed)
                else:
                    notes.append(f"{bdir}: no input.wav/output.wav or mixed.wav; skipped")
                    continue
            except Exception as exc:  # unreadable audio is a note, not a crash
                notes.append(f"{bdir}: audio unreadable ({exc}); skipped")
                continue
        else:
            audio = out_block.get("audio_path") or out_block.get("audio")
            if not isinstance(audio, str):
                notes.append(f"{run_dir}/records.jsonl:{lineno}: no audio in record; skipped")
                continue
            p = Path(audio)
            p = p if p.is_absolute() else run_dir / p
            if not p.is_file():
                notes.append(f"{run_dir}/records.jsonl:{lineno}: {p} missing; skipped")
                continue
            src.path, src.origin = p, str(p)
            src.unit = str(rec.get("id"))
        out.append(src)
    if not out:
        raise InputError(f"{run_dir}: no record with usable audio ({len(notes)} skipped)")
    return out, {"kind": "run", "path": str(run_dir), "run_id": run_id, "n": len(out)}, notes


def read_sources(paths: Sequence[Path]) -> tuple[list[Source], list[dict[str, Any]], list[str]]:
    """All stimuli of the ``--from`` sources; a system name used by two sources is made
    unique with the run id (two runs of the same agent)."""
    sources: list[Source] = []
    infos: list[dict[str, Any]] = []
    notes: list[str] = []
    per_source: list[list[Source]] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            got, info, more = _read_run(p)
            notes += more
        elif p.is_file():
            got = _read_items_jsonl(p)
            info = {"kind": "items", "path": str(p), "n": len(got)}
        else:
            raise InputError(f"--from {p}: no such file or folder")
        per_source.append(got)
        infos.append(info)
    owners: dict[str, set[int]] = defaultdict(set)
    for i, got in enumerate(per_source):
        for s in got:
            owners[s.system].add(i)
    for i, got in enumerate(per_source):
        for s in got:
            if len(owners[s.system]) > 1:
                s.system = f"{s.system}@{s.run or infos[i].get('run_id') or i}"
        sources += got
    keys: dict[str, int] = {}
    for s in sources:
        keys[s.key] = keys.get(s.key, 0) + 1
    dupes = [k for k, n in keys.items() if n > 1]
    if dupes:
        raise InputError(f"the same item id comes from two sources: {dupes[:5]}")
    return sources, infos, notes


# --- building the design ---------------------------------------------------------------


def _opaque(prefix: str, used: set[str], nbytes: int = 6) -> str:
    while True:
        ident = f"{prefix}{secrets.token_hex(nbytes)}"
        if ident not in used:
            used.add(ident)
            return ident


def _write_source(s: Source, study_dir: Path, used: set[str]) -> Stimulus:
    from voxassay.study.stimuli import read_stimulus, write_stimulus

    if s.written is not None:
        return s.written
    if s.samples is None:
        assert s.path is not None
        try:
            s.samples, s.sr = read_stimulus(s.path)
        except AudioError as exc:
            raise InputError(str(exc)) from None
    name = f"{AUDIO_DIR}/{_opaque('', used, 8)}.wav"
    duration = write_stimulus(study_dir / name, s.samples, s.sr)
    s.written = Stimulus(
        system=s.system,
        audio=name,
        duration_s=round(duration, 3),
        source=s.origin or None,
        session=s.session,
        run=s.run,
    )
    return s.written


def _expectations(q: Questions, kind: str) -> dict[str, float]:
    """Trap expectations for evals of ``kind``: as given in ``gold.expect``, else the scale
    minimum (likert) or the clean side A (pairwise); ``null`` in the YAML leaves one out."""
    given = q.gold.expect or {}
    out: dict[str, float] = {}
    for e in q.evals:
        if e.kind != kind:
            continue
        if e.id not in given:
            out[e.id] = float(e.scale.min) if kind == "likert" else 1.0
        else:
            value = given[e.id]
            if value is not None:
                out[e.id] = float(value)
    return out


def _read_stimuli(sources: list[Source]) -> None:
    """Read every file stimulus before anything is written; every problem (missing,
    unreadable, empty, truncated, NaN samples) is listed with its source line."""
    from voxassay.study.stimuli import read_stimulus

    problems: dict[str, list[tuple[int, str]]] = {}
    for s in sources:
        if s.samples is not None or s.path is None:
            continue
        try:
            s.samples, s.sr = read_stimulus(s.path)
        except AudioError as exc:
            where = s.origin.rsplit(":", 1)[0] if s.origin else "sources"
            problems.setdefault(where, []).append((s.line, f"{s.key}: {exc}"))
    if problems:
        where, listed = next(iter(problems.items()))
        if len(problems) > 1:
            listed = [(ln, f"{w}:{ln}: {m}") for w, rows in problems.items() for ln, m in rows]
            where = "the sources"
        raise ManifestError(where, listed)


def _check_gold(q: Questions, sources: list[Source]) -> None:
    evals = {e.id: e for e in q.evals}
    problems: list[tuple[int, str]] = []
    for s in sources:
        for ev_id, value in (s.gold or {}).items():
            ev = evals.get(ev_id)
            line = s.line
            if ev is None:
                problems.append((line, f"{s.key}: gold names unknown eval {ev_id!r}"))
            elif ev.kind != "likert":
                problems.append((line, f"{s.key}: gold items are single stimuli (likert evals)"))
            elif not ev.valid_score(value):
                problems.append((line, f"{s.key}: gold {ev_id}={value} is not on the scale"))
    for ev_id, expected in (q.gold.expect or {}).items():
        if expected is not None and not evals[ev_id].valid_score(expected):
            raise InputError(f"gold.expect {ev_id}={expected} is not a valid answer of that eval")
    if problems:
        raise ManifestError("items", problems)


def _spread_systems(items: list[Item], rng: random.Random) -> list[Item]:
    """A random order in which the same system rarely comes twice in a row."""
    pool = items[:]
    rng.shuffle(pool)
    out: list[Item] = []
    while pool:
        last = (out[-1].system, out[-1].system_b) if out else None
        pick = next(
            (i for i, it in enumerate(pool) if (it.system, it.system_b) != last),
            0,
        )
        out.append(pool.pop(pick))
    return out


def assign(
    regular: list[Item], everyone: list[Item], n_raters: int, per_item: int, rng: random.Random
) -> list[list[Item]]:
    """Each regular item to ``per_item`` distinct raters (least loaded first, then the rater
    with fewest items of that system, then random); ``everyone`` items to all raters.
    Returns each rater's items in presentation order."""
    by_system: dict[tuple[str, str | None], list[Item]] = defaultdict(list)
    for it in regular:
        by_system[(it.system, it.system_b)].append(it)
    queues = [by_system[k] for k in sorted(by_system, key=lambda k: (k[0], k[1] or ""))]
    for q in queues:
        rng.shuffle(q)
    order: list[Item] = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop())
    loads = [0] * n_raters
    sys_count: list[dict[tuple[str, str | None], int]] = [defaultdict(int) for _ in loads]
    per_rater: list[list[Item]] = [[] for _ in range(n_raters)]
    for it in order:
        key = (it.system, it.system_b)
        ranked = sorted(range(n_raters), key=lambda r: (loads[r], sys_count[r][key], rng.random()))
        for r in ranked[:per_item]:
            loads[r] += 1
            sys_count[r][key] += 1
            per_rater[r].append(it)
    sequences = []
    for r in range(n_raters):
        seq = _spread_systems(per_rater[r], rng)
        for special in rng.sample(everyone, len(everyone)):
            seq.insert(rng.randint(1, max(1, len(seq))), special)
        sequences.append(seq)
    return sequences


def _headphone_trials(q: Questions, study_dir: Path, rng: random.Random, used: set[str]) -> None:
    from voxassay.study.stimuli import HP_SR, calibration_noise, headphone_trial, write_stimulus

    hc = q.headphone_check
    if not hc.enabled:
        hc.trials = []
        return
    trials = []
    for _ in range(hc.n_trials):
        quiet = rng.randint(1, 3)
        anti = rng.choice([p for p in (1, 2, 3) if p != quiet])
        name = f"{AUDIO_DIR}/{_opaque('', used, 8)}.wav"
        write_stimulus(study_dir / name, headphone_trial(quiet, anti), HP_SR)
        trials.append(HeadphoneTrial(id=_opaque("h", used, 4), audio=name, answer=quiet))
    hc.trials = trials
    name = f"{AUDIO_DIR}/{_opaque('', used, 8)}.wav"
    write_stimulus(study_dir / name, calibration_noise(rng.randint(0, 2**31)), HP_SR)
    hc.calibration_audio = name


def _write_invites(path: Path, links: dict[str, str], study_id: str, base_url: str) -> None:
    lines = [
        f"# voxassay study {study_id}: personal links. Only their hashes are stored: this file",
        "# is the only copy. Keep it private; send each rater their own line.",
        f"# If the server runs elsewhere, replace {base_url} with its address.",
    ]
    width = max(len(k) for k in links)
    lines += [f"{k.ljust(width)}  {v}" for k, v in links.items()]
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)


def create_study(
    sources_paths: Sequence[Path],
    questions_path: Path,
    out_parent: Path,
    *,
    raters_per_item: int | None = None,
    raters: int | None = None,
    seed: int = 0,
    base_url: str = DEFAULT_BASE_URL,
) -> CreateResult:
    """Build ``out_parent/<study_id>/`` (see the module docstring)."""
    from voxassay.core.runstore import new_run_id

    q = load_questions(questions_path)
    per_item = raters_per_item or q.raters_per_item or 3
    if per_item < 1:
        raise InputError("--raters-per-item must be at least 1")
    sources, infos, notes = read_sources(sources_paths)
    _check_gold(q, sources)
    _read_stimuli(sources)
    rng = random.Random(seed)
    likert = [e for e in q.evals if e.kind == "likert"]
    pairwise = [e for e in q.evals if e.kind == "pairwise"]
    regular_src = [s for s in sources if not s.gold]
    gold_src = [s for s in sources if s.gold]
    if not regular_src:
        raise InputError("no items to rate (only gold items)")
    base_url = base_url.rstrip("/")
    if not base_url.startswith(("http://", "https://")) or any(c.isspace() for c in base_url):
        raise InputError(f"--base-url must be an http(s) address, not {base_url!r}")

    study_id = new_run_id("study")
    out_parent = Path(out_parent)
    out_parent.mkdir(parents=True, exist_ok=True)
    final = out_parent / study_id
    tmp = out_parent / f".{study_id}.tmp"
    tmp.mkdir()
    try:
        _synthesize(sources)
        used: set[str] = set()
        regular: list[Item] = []
        special: list[Item] = []
        if likert:
            for s in sources:  # in order; gold items are set apart (every rater gets them)
                (special if s.gold else regular).append(
                    Item(
                        id=_opaque("i", used),
                        kind="single",
                        stimuli=[_write_source(s, tmp, used)],
                        context=s.context or q.context,
                        group=s.unit,
                        key=s.key,
                        gold=s.gold or None,
                    )
                )
        if gold_src and not likert:
            notes.append(f"{len(gold_src)} gold item(s) left out: gold items need a likert eval")
        if pairwise:
            regular += _pairs(regular_src, q, tmp, used, notes)
        if not regular:
            raise InputError(
                "no items: pairwise evals need the same group/scenario from >= 2 systems"
            )
        n_raters = (
            raters
            or q.raters
            or max(per_item, math.ceil(len(regular) * per_item / q.items_per_rater))
        )
        if n_raters < per_item:
            raise InputError(
                f"{n_raters} rater(s) cannot give each item {per_item} raters "
                "(--raters must be >= --raters-per-item)"
            )
        special += _traps(q, regular_src, tmp, used, rng)
        _headphone_trials(q, tmp, rng, used)
        sequences = assign(regular, special, n_raters, per_item, rng)

        study = Study(
            study_id=study_id,
            title=q.title,
            instructions=q.instructions,
            created_at=utc_now(),
            seed=seed,
            raters_per_item=per_item,
            n_raters=n_raters,
            evals=q.evals,
            items=regular + special,
            headphone_check=q.headphone_check,
            profile=q.profile,
            gold=q.gold,
            require_full_listen=q.require_full_listen,
            sources=infos,
            notes=notes,
        )
        save_study(tmp, study)
        links = _write_store(tmp, study, sequences, rng, base_url)
        _write_invites(tmp / INVITES_FILE, links, study_id, base_url)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CreateResult(path=final, study=study, invites=links)


def _pairs(
    sources: list[Source], q: Questions, study_dir: Path, used: set[str], notes: list[str]
) -> list[Item]:
    """A pair item per unit (group, scenario#repeat) and pair of systems in it."""
    system_order: dict[str, int] = {}
    by_unit: dict[str, list[Source]] = defaultdict(list)
    for s in sources:
        system_order.setdefault(s.system, len(system_order))
        by_unit[s.unit].append(s)
    out = []
    for unit, group in by_unit.items():
        firsts: dict[str, Source] = {}
        for s in group:
            firsts.setdefault(s.system, s)
        systems = sorted(firsts, key=system_order.__getitem__)
        if len(systems) < 2:
            notes.append(f"pairwise: {unit!r} has one system only ({systems[0]}); no pair")
            continue
        for i, a in enumerate(systems):
            for b in systems[i + 1 :]:
                sa, sb = firsts[a], firsts[b]
                out.append(
                    Item(
                        id=_opaque("p", used),
                        kind="pair",
                        stimuli=[
                            _write_source(sa, study_dir, used),
                            _write_source(sb, study_dir, used),
                        ],
                        context=sa.context or sb.context or q.context,
                        group=unit,
                        key=f"{sa.key} | {sb.key}",
                    )
                )
    return out


def _traps(
    q: Questions, sources: list[Source], study_dir: Path, used: set[str], rng: random.Random
) -> list[Item]:
    """``q.gold.traps`` degraded copies of random study stimuli (single and/or pair items)."""
    from voxassay.study.stimuli import degrade, write_stimulus

    n = min(q.gold.traps, len(sources))
    if n == 0:
        return []
    out = []
    kinds = {e.kind for e in q.evals}
    for s in rng.sample(sources, n):
        clean = _write_source(s, study_dir, used)
        assert s.samples is not None
        bad = degrade(s.samples, s.sr, rng.randint(0, 2**31))
        name = f"{AUDIO_DIR}/{_opaque('', used, 8)}.wav"
        duration = write_stimulus(study_dir / name, bad, s.sr)
        trap = Stimulus(
            system=TRAP_SYSTEM, audio=name, duration_s=round(duration, 3), source=f"trap of {s.key}"
        )
        if "likert" in kinds:
            out.append(
                Item(
                    id=_opaque("i", used),
                    kind="single",
                    stimuli=[trap],
                    context=s.context or q.context,
                    group=s.unit,
                    key=f"trap:{s.key}",
                    gold=_expectations(q, "likert") or None,
                    trap=True,
                )
            )
        if "pairwise" in kinds:
            out.append(
                Item(
                    id=_opaque("p", used),
                    kind="pair",
                    stimuli=[clean, trap],
                    context=s.context or q.context,
                    group=s.unit,
                    key=f"trap:{s.key}",
                    gold=_expectations(q, "pairwise") or None,
                    trap=True,
                )
            )
    return out


def _write_store(
    study_dir: Path,
    study: Study,
    sequences: list[list[Item]],
    rng: random.Random,
    base_url: str,
) -> dict[str, str]:
    """Raters (token hashes), assignments (opaque task ids, side flips) and the admin hash."""
    width = max(2, len(str(len(sequences))))
    rater_ids = [f"r{n + 1:0{width}d}" for n in range(len(sequences))]
    links: dict[str, str] = {}
    admin_secret = secrets.token_urlsafe(24)
    links["admin"] = f"{base_url}/a/admin.{admin_secret}"
    # balanced sides: each pair item's raters alternate flip, from a random start
    flips: dict[tuple[str, str], int] = {}
    holders: dict[str, list[str]] = defaultdict(list)
    for rid, seq in zip(rater_ids, sequences, strict=True):
        for it in seq:
            if it.kind == "pair":
                holders[it.id].append(rid)
    for item_id, rids in holders.items():
        start = rng.randint(0, 1)
        shuffled = rng.sample(rids, len(rids))
        for n, rid in enumerate(shuffled):
            flips[(rid, item_id)] = (start + n) % 2
    used: set[str] = set()
    store = StudyStore.for_study(study_dir)
    try:
        with store.transaction():
            store.set_meta("study_id", study.study_id)
            store.set_meta("admin_token_hash", hash_secret(admin_secret))
            for rid, seq in zip(rater_ids, sequences, strict=True):
                secret = secrets.token_urlsafe(24)
                store.add_rater(rid, hash_secret(secret))
                links[rid] = f"{base_url}/i/{rid}.{secret}"
                for pos, it in enumerate(seq):
                    store.add_assignment(
                        _opaque("t", used, 8), rid, it.id, pos, flips.get((rid, it.id), 0)
                    )
    finally:
        store.close()
    return links


def eval_summary(evals: list[Eval]) -> str:
    return ", ".join(f"{e.id} ({e.kind} {e.scale.min}-{e.scale.max})" for e in evals)

"""``voxeval study analyze``: rater-controlled system scores, reliability, rater QC, judges
vs humans and pairwise preferences from long-format ratings.

Input (the long format shared with ``study import``/export): CSV columns
``rater,item,system,eval,score`` required; optional ``timestamp`` (ISO 8601),
``response_ms``, ``gold_expected`` (known correct score of gold/trap items), ``dimension``,
``kind`` (``likert`` default or ``pairwise``) and ``system_b``. Pairwise rows: ``system`` is
side A, ``system_b`` side B; score 1 = A preferred, 0 = B, 0.5 = no preference.

Every row is checked; a bad row is counted with its line number and reason and skipped. A
rating given twice (same rater, item, systems and eval) keeps the later one (the newer
timestamp, else the later line) and is counted as a revision. Rows with ``gold_expected``
serve QC only: they are kept out of system scores and reliability.

What is computed per likert eval: plain MOS with t intervals, the REML crossed model
(:func:`voxeval.stats.raters.fit_crossed`) on raw scores and on within-rater z-scores
(z within rater *and eval*), Krippendorff's alpha (interval, ordinal; unit = item x
system) with bootstrap CIs, ICC. Dimensions combine their evals' z-scale rater-controlled
means with equal weights. Rater QC pools a rater's rows over evals after mapping each eval's
scale to 0..1.

The run folder (``OUT/study-<stamp>-<hex>/``) holds ``run.json`` (config), the ratings it
used (``ratings.csv``, ``judges.csv``) and ``report.json|md|html``; :func:`build_report`
recomputes the report from the folder alone.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import itertools
import json
import math
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxeval.core.errors import InputError
from voxeval.study.format import RATING_COLUMNS_OPTIONAL, RATING_COLUMNS_REQUIRED

METRICS_VERSION = "study-analysis-1"
SUITE = "study"
RATINGS_FILE = "ratings.csv"
JUDGES_FILE = "judges.csv"
REQUIRED = RATING_COLUMNS_REQUIRED
OPTIONAL = RATING_COLUMNS_OPTIONAL
KINDS = ("likert", "pairwise")
MAX_PROBLEMS_LISTED = 200
CHART_MAX_SYSTEMS = 60

Progress = Callable[[str], None] | None


# -- reading --------------------------------------------------------------------------------


@dataclass
class EvalMeta:
    """What the study says about an eval (or what the data implies without a study)."""

    id: str
    dimension: str
    kind: str = "likert"
    question: str = ""
    scale_min: float | None = None
    scale_max: float | None = None
    scale_inferred: bool = True
    gold_tolerance: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dimension": self.dimension,
            "kind": self.kind,
            "question": self.question,
            "scale": {"min": self.scale_min, "max": self.scale_max},
            "scale_inferred": self.scale_inferred,
        }


@dataclass
class Ratings:
    """Usable rows of a ratings CSV, column-wise (``line`` = line number in the file)."""

    rater: list[str] = field(default_factory=list)
    item: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    eval: list[str] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    timestamp: list[str] = field(default_factory=list)
    response_ms: list[float] = field(default_factory=list)
    gold: list[float] = field(default_factory=list)
    dimension: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    system_b: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.score)

    def take(self, keep: Sequence[int] | np.ndarray) -> Ratings:
        out = Ratings()
        for name in self.__dataclass_fields__:
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in keep])
        return out


@dataclass
class LoadedRatings:
    ratings: Ratings
    malformed: list[tuple[int, str]]
    rows_read: int
    revisions: int
    columns: list[str]
    revision_lines: list[tuple[int, int]] = field(default_factory=list)
    """``(line, earlier line)``: a repeated row (same rater, item, system, eval) and the row
    it was weighed against; the newer (timestamp, else the later line) is kept."""


def _parse_time(text: str) -> _dt.datetime:
    value = _dt.datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return value


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def load_ratings_csv(
    path: Path, evals: Mapping[str, EvalMeta] | None = None, *, label: str | None = None
) -> LoadedRatings:
    """Read a long-format ratings CSV (see the module docstring).

    ``evals`` (from ``study.json``) fixes each eval's kind and scale: rows of unknown evals,
    of another kind or off the scale are malformed then. Raises :class:`InputError` when the
    file cannot be read, lacks a required column, or has no usable row (messages name
    ``label``, default the path).
    """
    path = Path(path)
    name = label or str(path)
    try:
        fh = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read ratings {name}: {exc}") from None
    malformed: list[tuple[int, str]] = []
    rows: list[tuple[int, dict[str, str]]] = []
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(f"ratings file {name} is empty") from None
        except csv.Error as exc:
            raise InputError(f"ratings file {name}: unreadable header ({exc})") from None
        columns = [h.strip() for h in header]
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise InputError(
                f"ratings file {name} lacks required column(s) {', '.join(missing)} "
                f"(found: {', '.join(columns) or 'none'}; need {', '.join(REQUIRED)})"
            )
        index = {c: i for i, c in enumerate(columns) if c in REQUIRED + OPTIONAL}
        while True:
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                malformed.append((reader.line_num, f"CSV error: {exc}"))
                continue
            line = reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            if len(values) != len(columns):
                malformed.append((line, f"expected {len(columns)} fields, got {len(values)}"))
                continue
            if any("\udc80" <= ch <= "\udcff" for v in values for ch in v):
                malformed.append((line, "not UTF-8"))
                continue
            rows.append((line, {c: values[i].strip() for c, i in index.items()}))
    rows_read = len(rows) + len(malformed)
    ratings, more, revision_lines = _check_rows(rows, evals)
    malformed.extend(more)
    if evals is None:  # no study.json: a lone typo must not stretch the inferred scale
        ratings, stretched = _refuse_stretching(ratings)
        malformed.extend(stretched)
    malformed.sort()
    if not len(ratings):
        shown = "; ".join(f"line {ln}: {why}" for ln, why in malformed[:5])
        raise InputError(
            f"no usable ratings in {name} ({rows_read} data row(s), "
            f"{len(malformed)} malformed{': ' + shown if shown else ''})"
        )
    return LoadedRatings(
        ratings, malformed, rows_read, len(revision_lines), columns, revision_lines
    )


def _refuse_stretching(ratings: Ratings) -> tuple[Ratings, list[tuple[int, str]]]:
    """Rows of a likert eval whose score alone would stretch the scale inferred from the
    others (:func:`voxeval.study.format.infer_likert_scale`), as malformed rows."""
    from voxeval.study.format import infer_likert_scale, stretch_reason

    refused: dict[int, str] = {}
    for ev in sorted(set(ratings.eval)):
        idx = [i for i, e in enumerate(ratings.eval) if e == ev and ratings.kind[i] != "pairwise"]
        scale, out = infer_likert_scale([(ratings.line[i], ratings.score[i]) for i in idx])
        for line, score in out:
            refused[line] = stretch_reason(score, scale)
    if not refused:
        return ratings, []
    keep = [i for i, line in enumerate(ratings.line) if line not in refused]
    return ratings.take(keep), sorted(refused.items())


def _check_rows(
    rows: list[tuple[int, dict[str, str]]], evals: Mapping[str, EvalMeta] | None
) -> tuple[Ratings, list[tuple[int, str]], list[tuple[int, int]]]:
    bad: list[tuple[int, str]] = []
    kind_of: dict[str, str] = {e: m.kind for e, m in (evals or {}).items()}
    good: list[tuple[int, dict[str, Any]]] = []
    for line, r in rows:
        why = []
        for col in REQUIRED:
            if not r.get(col):
                why.append(f"empty {col}")
        score = math.nan
        if r.get("score"):
            try:
                score = _number(r["score"])
            except ValueError:
                why.append(f"score {r['score'][:40]!r} is not a number")
        kind = (r.get("kind") or "likert").lower()
        if kind not in KINDS:
            why.append(f"kind {r.get('kind', '')[:40]!r} is not likert or pairwise")
        ev = r.get("eval", "")
        if evals is not None and ev and ev not in evals:
            why.append(f"eval {ev[:40]!r} is not in study.json")
        elif ev and kind in KINDS:
            expected = kind_of.setdefault(ev, kind)
            if expected != kind:
                why.append(f"kind {kind} but eval {ev!r} is {expected}")
        system_b = r.get("system_b", "")
        if kind == "pairwise":
            if not system_b:
                why.append("pairwise row without system_b")
            elif system_b == r.get("system"):
                why.append("pairwise row compares a system with itself")
            if math.isfinite(score) and score not in (0.0, 0.5, 1.0):
                why.append(f"pairwise score {score:g} is not 0, 0.5 or 1")
        elif evals is not None and ev in evals and math.isfinite(score):
            meta = evals[ev]
            lo, hi = meta.scale_min, meta.scale_max
            if lo is not None and hi is not None and not lo <= score <= hi:
                why.append(f"score {score:g} outside the scale {lo:g}..{hi:g}")
        ms = math.nan
        if r.get("response_ms"):
            try:
                ms = _number(r["response_ms"])
                if ms < 0:
                    why.append("negative response_ms")
            except ValueError:
                why.append(f"response_ms {r['response_ms'][:40]!r} is not a number")
        gold = math.nan
        if r.get("gold_expected"):
            try:
                gold = _number(r["gold_expected"])
            except ValueError:
                why.append(f"gold_expected {r['gold_expected'][:40]!r} is not a number")
        stamp = r.get("timestamp", "")
        if stamp:
            try:
                _parse_time(stamp)
            except ValueError:
                why.append(f"timestamp {stamp[:40]!r} is not ISO 8601")
        if why:
            bad.append((line, "; ".join(why)))
            continue
        good.append(
            (
                line,
                {
                    "rater": r["rater"],
                    "item": r["item"],
                    "system": r["system"],
                    "eval": ev,
                    "score": score,
                    "timestamp": stamp,
                    "response_ms": ms,
                    "gold": gold,
                    "dimension": r.get("dimension", ""),
                    "kind": kind,
                    "system_b": system_b if kind == "pairwise" else "",
                },
            )
        )
    # revisions: keep the newest (timestamp, else later line) per key
    latest: dict[tuple[str, ...], tuple[int, dict[str, Any]]] = {}
    revisions: list[tuple[int, int]] = []
    for line, g in good:
        key = (g["rater"], g["item"], g["system"], g["system_b"], g["eval"])
        prev = latest.get(key)
        if prev is not None:
            revisions.append((line, prev[0]))
            older = (
                prev[1]["timestamp"]
                and g["timestamp"]
                and _parse_time(g["timestamp"]) < _parse_time(prev[1]["timestamp"])
            )
            if older:
                continue
        latest[key] = (line, g)
    out = Ratings()
    for line, g in sorted(latest.values(), key=lambda t: t[0]):
        for name in ("rater", "item", "system", "eval", "score", "timestamp", "response_ms"):
            getattr(out, name).append(g[name])
        out.gold.append(g["gold"])
        out.dimension.append(g["dimension"])
        out.kind.append(g["kind"])
        out.system_b.append(g["system_b"])
        out.line.append(line)
    return out, bad, revisions


def read_study_evals(study_dir: Path) -> dict[str, EvalMeta]:
    """``study.json``'s ``evals`` (id, dimension, kind, question, scale) and the gold
    tolerance (``gold.tolerance``; default 1 point for likert, 0 for pairwise)."""
    path = Path(study_dir) / "study.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"not a study folder (no study.json): {study_dir}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    evals = data.get("evals") if isinstance(data, dict) else None
    if not isinstance(evals, list) or not evals:
        raise InputError(f"{path} has no evals")
    tol = (data.get("gold") or {}).get("tolerance") if isinstance(data.get("gold"), dict) else None
    out: dict[str, EvalMeta] = {}
    for i, e in enumerate(evals):
        if not isinstance(e, dict) or not e.get("id"):
            raise InputError(f"{path}: evals[{i}] has no id")
        scale = e.get("scale") or {}
        kind = e.get("kind", "likert")
        out[str(e["id"])] = EvalMeta(
            id=str(e["id"]),
            dimension=str(e.get("dimension") or e["id"]),
            kind=kind if kind in KINDS else "likert",
            question=str(e.get("question", "")),
            scale_min=_maybe_float(scale.get("min")) if kind != "pairwise" else 0.0,
            scale_max=_maybe_float(scale.get("max")) if kind != "pairwise" else 1.0,
            scale_inferred=False,
            gold_tolerance=float(tol) if tol is not None else None,
        )
    return out


def _maybe_float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class JudgeRow:
    line: int
    item: str
    system: str
    target: str  # eval or dimension name
    score: float


def load_judges_csv(path: Path) -> tuple[list[JudgeRow], list[tuple[int, str]]]:
    """Judge scores: columns ``score``, ``item`` and/or ``system``, and ``eval`` or
    ``dimension``. Item rows (with ``system`` too when item ids repeat across systems) are
    compared per item; rows without ``item`` are system scores."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read judges {path}: {exc}") from None
    rows: list[JudgeRow] = []
    bad: list[tuple[int, str]] = []
    with fh:
        reader = csv.DictReader(fh)
        cols = [c.strip() for c in (reader.fieldnames or [])]
        reader.fieldnames = cols
        if "score" not in cols or not ({"item", "system"} & set(cols)):
            raise InputError(
                f"judges file {path} needs columns score, item and/or system, eval or dimension "
                f"(found: {', '.join(cols) or 'none'})"
            )
        if not ({"eval", "dimension"} & set(cols)):
            raise InputError(f"judges file {path} needs an eval or a dimension column")
        for r in reader:
            line = reader.line_num
            if None in r or any(v is None for v in r.values()):
                bad.append((line, "wrong number of fields"))
                continue
            item = (r.get("item") or "").strip()
            system = (r.get("system") or "").strip()
            target = (r.get("eval") or "").strip() or (r.get("dimension") or "").strip()
            if not item and not system:
                bad.append((line, "neither item nor system"))
                continue
            if not target:
                bad.append((line, "neither eval nor dimension"))
                continue
            try:
                score = _number(r.get("score") or "")
            except ValueError:
                bad.append((line, f"score {(r.get('score') or '')[:40]!r} is not a number"))
                continue
            rows.append(JudgeRow(line, item, system, target, score))
    return rows, bad


# -- analysis -------------------------------------------------------------------------------


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _eval_metas(ratings: Ratings, given: Mapping[str, EvalMeta] | None) -> dict[str, EvalMeta]:
    metas: dict[str, EvalMeta] = {}
    by_eval: dict[str, list[int]] = defaultdict(list)
    for i, ev in enumerate(ratings.eval):
        by_eval[ev].append(i)
    for ev, idx in by_eval.items():
        if given and ev in given:
            metas[ev] = given[ev]
            continue
        dims = Counter(ratings.dimension[i] for i in idx if ratings.dimension[i])
        kind = ratings.kind[idx[0]]
        scores = [ratings.score[i] for i in idx]
        metas[ev] = EvalMeta(
            id=ev,
            dimension=dims.most_common(1)[0][0] if dims else ev,
            kind=kind,
            scale_min=0.0 if kind == "pairwise" else float(min(scores)),
            scale_max=1.0 if kind == "pairwise" else float(max(scores)),
            scale_inferred=kind != "pairwise",
        )
    return dict(sorted(metas.items()))


def _unit_scale(meta: EvalMeta) -> tuple[float, float]:
    lo = meta.scale_min if meta.scale_min is not None else 0.0
    hi = meta.scale_max if meta.scale_max is not None else 1.0
    return lo, (hi - lo) if hi > lo else 1.0


def _qc(ratings: Ratings, metas: Mapping[str, EvalMeta], thresholds: Any) -> list[dict[str, Any]]:
    from voxeval.stats.agreement import rater_qc

    units, norm, gold, tol = [], [], [], []
    for i in range(len(ratings)):
        meta = metas[ratings.eval[i]]
        lo, span = _unit_scale(meta)
        units.append(
            f"{ratings.item[i]}\x1f{ratings.system[i]}\x1f{ratings.system_b[i]}\x1f{ratings.eval[i]}"
        )
        norm.append((ratings.score[i] - lo) / span)
        g = ratings.gold[i]
        gold.append((g - lo) / span if math.isfinite(g) else math.nan)
        t = meta.gold_tolerance
        if t is None:
            t = 0.0 if meta.kind == "pairwise" else 1.0
        tol.append(t / span)
    qcs = rater_qc(
        ratings.rater,
        units,
        norm,
        gold_expected=gold,
        response_ms=ratings.response_ms,
        gold_tolerance=tol,
        thresholds=thresholds,
    )
    out = []
    for q in qcs:
        d = q.as_dict()
        # report mean/sd on the 0..1 scale they were computed on
        d["mean_unit"] = d.pop("mean")
        d["sd_unit"] = d.pop("sd")
        out.append(d)
    return out


def _estimates(rows: Sequence[Any]) -> dict[str, dict[str, Any]]:
    return {str(e.system): e.as_dict() for e in rows}


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Competition ranks, best (highest) first: equal scores share a rank (1, 1, 3); a
    score that is not finite ranks after every finite one."""

    def key(k: str) -> float:
        return -scores[k] if math.isfinite(scores[k]) else math.inf

    keys = {k: key(k) for k in scores}
    return {k: 1 + sum(1 for other in keys.values() if other < v) for k, v in keys.items()}


def _likert_eval(
    ratings: Ratings, idx: list[int], meta: EvalMeta, seed: int, progress: Progress
) -> dict[str, Any]:
    from voxeval.stats.agreement import icc, krippendorff_alpha_ci
    from voxeval.stats.ranks import rank_agreement
    from voxeval.stats.raters import fit_crossed, plain_mos, rater_zscores

    y = np.array([ratings.score[i] for i in idx])
    rater = [ratings.rater[i] for i in idx]
    item = [ratings.item[i] for i in idx]
    system = [ratings.system[i] for i in idx]
    # an item id that several systems share is one stimulus per system
    unit = [f"{it}\x1f{s}" for it, s in zip(item, system, strict=True)]
    out: dict[str, Any] = {
        **meta.as_dict(),
        "n_ratings": len(idx),
        "n_raters": len(set(rater)),
        "n_items": len(set(unit)),
        "n_systems": len(set(system)),
    }
    mos = _estimates(plain_mos(y, system, method="t"))
    _say(progress, f"{meta.id}: crossed model (raw scores, {len(idx)} ratings)")
    fit = fit_crossed(y, system, rater, unit)
    raw = _estimates(fit.estimates())
    zs = rater_zscores(rater, y)
    zkeep = np.isfinite(zs.z)
    _say(progress, f"{meta.id}: crossed model (within-rater z-scores)")
    zfit = None
    zest: dict[str, dict[str, Any]] = {}
    if zkeep.sum() > len(set(np.asarray(system, dtype=object)[zkeep])):
        zfit = fit_crossed(
            zs.z[zkeep],
            np.asarray(system, dtype=object)[zkeep],
            np.asarray(rater, dtype=object)[zkeep],
            np.asarray(unit, dtype=object)[zkeep],
        )
        zest = _estimates(zfit.estimates())
    mos_means = {s: v["mean"] for s, v in mos.items()}
    raw_means = {s: v["mean"] for s, v in raw.items()}
    z_means = {s: v["mean"] for s, v in zest.items()}
    r_mos, r_raw, r_z = _ranks(mos_means), _ranks(raw_means), _ranks(z_means)
    # each system against the next one down the model's order (shared effects cancel)
    pos = {str(sname): j for j, sname in enumerate(fit.systems)}
    by_rank = sorted(raw_means, key=lambda k: r_raw[k])
    next_diff = {
        a: {"next": b, **fit.contrast(pos[a], pos[b])} for a, b in itertools.pairwise(by_rank)
    }
    systems = []
    for s in sorted(mos, key=lambda k: (r_z.get(k, 10**9), r_raw.get(k, 10**9), k)):
        systems.append(
            {
                "system": s,
                "n": mos[s]["n"],
                "mos": mos[s],
                "rater_controlled": raw.get(s),
                "rater_controlled_z": zest.get(s),
                "rank_mos": r_mos.get(s),
                "rank_model": r_raw.get(s),
                "rank_model_z": r_z.get(s),
                "diff_to_next": next_diff.get(s),
            }
        )
    out["systems"] = systems
    out["model"] = fit.summary()
    out["model_z"] = zfit.summary() if zfit else None
    out["z_excluded_raters"] = [{"rater": r, "reason": why} for r, why in zs.excluded.items()]
    out["rater_effects"] = _top_effects(fit.rater_effects)
    out["mos_vs_model"] = {
        "spearman": rank_agreement(mos_means, raw_means).spearman_rho,
        "kendall": rank_agreement(mos_means, raw_means).kendall_tau,
    }
    _say(progress, f"{meta.id}: reliability (alpha, ICC)")
    a_int = krippendorff_alpha_ci(unit, y, "interval", n_boot=500, seed=seed)
    a_ord = krippendorff_alpha_ci(unit, y, "ordinal", n_boot=500, seed=seed)
    out["reliability"] = {
        "alpha_interval": {"alpha": a_int[0], "ci_lo": a_int[1], "ci_hi": a_int[2]},
        "alpha_ordinal": {"alpha": a_ord[0], "ci_lo": a_ord[1], "ci_hi": a_ord[2]},
        "icc": icc(y, rater, unit),
        "unit": "item x system",
    }
    return out


def _top_effects(effects: Mapping[str, float], k: int = 5) -> dict[str, Any]:
    if not effects:
        return {}
    vals = np.array(list(effects.values()))
    ordered = sorted(effects.items(), key=lambda kv: kv[1])
    return {
        "sd": float(vals.std(ddof=1)) if vals.size > 1 else math.nan,
        "harshest": [{"rater": r, "effect": v} for r, v in ordered[:k]],
        "most_lenient": [{"rater": r, "effect": v} for r, v in ordered[::-1][:k]],
    }


def _pairwise_eval(ratings: Ratings, idx: list[int], meta: EvalMeta) -> dict[str, Any]:
    from voxeval.stats.agreement import bradley_terry, pairwise_preferences

    a = [ratings.system[i] for i in idx]
    b = [ratings.system_b[i] for i in idx]
    s = [ratings.score[i] for i in idx]
    return {
        **meta.as_dict(),
        "n_ratings": len(idx),
        "n_raters": len({ratings.rater[i] for i in idx}),
        "n_items": len({ratings.item[i] for i in idx}),
        "preferences": pairwise_preferences(a, b, s),
        "bradley_terry": bradley_terry(a, b, s),
    }


def _item_z_means(ratings: Ratings, idx: list[int]) -> dict[tuple[str, str], float]:
    """Mean within-rater z-score per (item, system) of one eval."""
    from voxeval.stats.raters import rater_zscores

    zs = rater_zscores([ratings.rater[i] for i in idx], [ratings.score[i] for i in idx])
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for k, i in enumerate(idx):
        if math.isfinite(zs.z[k]):
            acc[(ratings.item[i], ratings.system[i])].append(float(zs.z[k]))
    return {key: float(np.mean(v)) for key, v in acc.items()}


def _judges(
    judge_rows: list[JudgeRow],
    ratings: Ratings,
    likert: Mapping[str, list[int]],
    pairwise: Mapping[str, list[int]],
    metas: Mapping[str, EvalMeta],
    eval_reports: Mapping[str, dict[str, Any]],
    dimensions: Mapping[str, Any],
    seed: int,
) -> dict[str, Any]:
    """Judge vs human agreement per eval or dimension the judge scored."""
    from voxeval.stats.agreement import correlation_ci, win_rate_agreement

    targets = sorted({j.target for j in judge_rows})
    out: dict[str, Any] = {"targets": [], "unmatched_targets": []}
    dim_evals: dict[str, list[str]] = defaultdict(list)
    for ev, m in metas.items():
        dim_evals[m.dimension].append(ev)
    for target in targets:
        rows = [j for j in judge_rows if j.target == target]
        if target in metas:
            evs, level = [target], "eval"
        elif target in dim_evals:
            evs, level = dim_evals[target], "dimension"
        else:
            out["unmatched_targets"].append(target)
            continue
        entry: dict[str, Any] = {"target": target, "level": level, "evals": evs}
        lik = [e for e in evs if e in likert]
        # human item scores: mean within-rater z per (item, system), averaged over evals
        human_item: dict[tuple[str, str], list[float]] = defaultdict(list)
        for ev in lik:
            for key, v in _item_z_means(ratings, likert[ev]).items():
                human_item[key].append(v)
        h_item = {k: float(np.mean(v)) for k, v in human_item.items()}
        systems_of_item: dict[str, set[str]] = defaultdict(set)
        for it, s in h_item:
            systems_of_item[it].add(s)
        j_item: dict[tuple[str, str], float] = {}
        j_sys: dict[str, float] = {}
        for j in rows:
            if j.item:
                cands = [j.system] if j.system else sorted(systems_of_item.get(j.item, ()))
                if len(cands) == 1:
                    j_item[(j.item, cands[0])] = j.score
            else:
                j_sys[j.system] = j.score
        if j_item:
            keys = [k for k in j_item if k in h_item]
            entry["item_level"] = correlation_ci(
                [j_item[k] for k in keys], [h_item[k] for k in keys], seed=seed
            )
            if not j_sys:
                acc: dict[str, list[float]] = defaultdict(list)
                for (_, s), v in j_item.items():
                    acc[s].append(v)
                j_sys = {s: float(np.mean(v)) for s, v in acc.items()}
                entry["system_scores_from"] = "mean of the judge's item scores"
        # human system scores: z-scale rater-controlled means (eval) or the dimension score
        if level == "eval" and target in eval_reports and "systems" in eval_reports[target]:
            h_sys = {
                r["system"]: (r.get("rater_controlled_z") or r.get("rater_controlled") or {}).get(
                    "mean", math.nan
                )
                for r in eval_reports[target]["systems"]
            }
        elif level == "dimension" and target in dimensions:
            h_sys = dict(dimensions[target]["scores"])
        else:
            h_sys = {}
        if j_sys and h_sys:
            keys2 = [s for s in j_sys if s in h_sys]
            entry["system_level"] = correlation_ci(
                [j_sys[s] for s in keys2], [h_sys[s] for s in keys2], seed=seed
            )
        # pairwise: does the judge prefer the side the humans preferred?
        pw = [e for e in evs if e in pairwise]
        if pw:
            per_unit: dict[tuple[str, str, str], list[float]] = defaultdict(list)
            for ev in pw:
                for i in pairwise[ev]:
                    per_unit[(ratings.item[i], ratings.system[i], ratings.system_b[i])].append(
                        ratings.score[i]
                    )
            h_rate: list[float] = []
            j_diff: list[float] = []
            basis: Counter[str] = Counter()
            for (it, sa, sb), votes in per_unit.items():
                if (it, sa) in j_item and (it, sb) in j_item:
                    d = j_item[(it, sa)] - j_item[(it, sb)]
                    basis["item"] += 1
                elif sa in j_sys and sb in j_sys:
                    d = j_sys[sa] - j_sys[sb]
                    basis["system"] += 1
                else:
                    continue
                h_rate.append(float(np.mean(votes)))
                j_diff.append(d)
            entry["win_rate_agreement"] = {
                **win_rate_agreement(h_rate, j_diff),
                "judge_basis": dict(basis),
            }
        out["targets"].append(entry)
    return out


PROFILES_FILE = "profiles.json"


def _study_profiles(study_dir: Path) -> dict[str, dict[str, str]]:
    """Rater id -> profile answers of a study folder (raters without answers left out)."""
    if not (study_dir / "study.db").is_file():
        return {}
    from voxeval.study.store import StudyStore

    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        people = store.raters()
    finally:
        store.close()
    return {
        str(p["id"]): {str(k): str(v) for k, v in p["profile"].items()}
        for p in people
        if p.get("profile")
    }


def _screen(profiles: Mapping[str, Mapping[str, str]], rules: Mapping[str, str]) -> set[str]:
    """Raters whose profile answers every screening rule (FIELD = VALUE); a rater without a
    profile, or without that field, does not pass."""
    return {r for r, prof in profiles.items() if all(prof.get(k) == v for k, v in rules.items())}


def _demographics(
    profiles: Mapping[str, Mapping[str, str]] | None, raters: set[str]
) -> dict[str, Any] | None:
    """Counts per profile answer over the raters in the analysis (study folders only)."""
    if not profiles:
        return None
    fields: dict[str, Counter[str]] = defaultdict(Counter)
    answered = 0
    for rater, prof in profiles.items():
        if rater not in raters or not prof:
            continue
        answered += 1
        for k, v in prof.items():
            fields[k][str(v)] += 1
    if not answered:
        return None
    return {
        "raters_with_profile": answered,
        "raters": len(raters),
        "fields": {k: dict(sorted(c.items())) for k, c in sorted(fields.items())},
    }


def analyze(
    ratings: Ratings,
    evals: Mapping[str, EvalMeta] | None = None,
    *,
    exclude_flagged: bool = False,
    judges: list[JudgeRow] | None = None,
    seed: int = 0,
    progress: Progress = None,
    thresholds: Any = None,
) -> dict[str, Any]:
    """Every number of the study report from usable ratings (no I/O)."""
    from voxeval.stats.agreement import QCThresholds, dimension_scores, exclusion_effect
    from voxeval.stats.raters import fit_crossed

    th = thresholds or QCThresholds()
    metas = _eval_metas(ratings, evals)
    _say(progress, f"rater QC over {len(ratings)} ratings")
    qc = _qc(ratings, metas, th)
    flagged = {q["rater"]: q["flags"] for q in qc if q["flags"]}
    gold_rows = sum(1 for g in ratings.gold if math.isfinite(g))

    def split(r: Ratings) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        lik: dict[str, list[int]] = defaultdict(list)
        pw: dict[str, list[int]] = defaultdict(list)
        for i in range(len(r)):
            if math.isfinite(r.gold[i]):
                continue
            (pw if r.kind[i] == "pairwise" else lik)[r.eval[i]].append(i)
        return lik, pw

    all_lik, _ = split(ratings)
    # exclusion effect (always computed when someone is flagged; applied on request)
    effect: dict[str, Any] = {}
    if flagged:
        for ev, idx in sorted(all_lik.items()):
            kept = [i for i in idx if ratings.rater[i] not in flagged]
            if len(kept) < 3 or len(kept) == len(idx):
                continue
            _say(progress, f"{ev}: refit without {len(flagged)} flagged rater(s)")
            before = _fit_means(fit_crossed, ratings, idx)
            after = _fit_means(fit_crossed, ratings, kept)
            mos_b = _mos_means(ratings, idx)
            mos_a = _mos_means(ratings, kept)
            effect[ev] = {
                "ratings_removed": len(idx) - len(kept),
                "rater_controlled": exclusion_effect(before, after),
                "mos": exclusion_effect(mos_b, mos_a),
            }
    used = ratings
    if exclude_flagged and flagged:
        used = ratings.take([i for i in range(len(ratings)) if ratings.rater[i] not in flagged])
    likert, pairwise = split(used)
    eval_reports: dict[str, dict[str, Any]] = {}
    for ev, idx in sorted(likert.items()):
        if len(idx) < 3:
            eval_reports[ev] = {**metas[ev].as_dict(), "n_ratings": len(idx), "note": "too few"}
            continue
        eval_reports[ev] = _likert_eval(used, idx, metas[ev], seed, progress)
    pair_reports = {
        ev: _pairwise_eval(used, idx, metas[ev]) for ev, idx in sorted(pairwise.items())
    }
    # dimensions over the z-scale rater-controlled means (raw where z was impossible)
    eval_scores: dict[str, dict[str, float]] = {}
    for ev, rep in eval_reports.items():
        if "systems" not in rep:
            continue
        eval_scores[ev] = {
            r["system"]: (r.get("rater_controlled_z") or r.get("rater_controlled") or {}).get(
                "mean", math.nan
            )
            for r in rep["systems"]
        }
    dims = dimension_scores(eval_scores, {e: m.dimension for e, m in metas.items()})
    judge_report = None
    if judges is not None:
        _say(progress, "judges vs humans")
        judge_report = _judges(judges, used, likert, pairwise, metas, eval_reports, dims, seed)
    systems = _systems_block(eval_reports, dims, pair_reports)
    notes = []
    if gold_rows:
        notes.append(f"{gold_rows} gold/trap rating(s) used for QC only, not in system scores")
    inferred = [e for e, m in metas.items() if m.scale_inferred and m.kind == "likert"]
    if inferred:
        notes.append("scale inferred from the data (no study.json) for: " + ", ".join(inferred))
    if exclude_flagged and flagged:
        notes.append(f"{len(flagged)} flagged rater(s) excluded from every table")
    return {
        "counts": {
            "n_ratings": len(used),
            "n_raters": len(set(used.rater)),
            "n_items": len(set(used.item)),
            "n_systems": len(set(used.system) | {s for s in used.system_b if s}),
            "n_evals": len(metas),
        },
        "evals": [eval_reports[e] for e in sorted(eval_reports)],
        "pairwise": [pair_reports[e] for e in sorted(pair_reports)],
        "dimensions": dims,
        "rater_qc": {
            "thresholds": _asdict(th),
            "raters": qc,
            "flagged": [{"rater": r, "reasons": why} for r, why in sorted(flagged.items())],
            "n_flagged": len(flagged),
            "scores_mapped_to_unit_scale": True,
        },
        "exclusion": {
            "applied": bool(exclude_flagged and flagged),
            "excluded_raters": sorted(flagged) if exclude_flagged else [],
            "effect": effect,
        },
        "judges": judge_report,
        "systems": systems,
        "notes": notes,
    }


def _asdict(obj: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(obj)


def _fit_means(fit_crossed: Any, r: Ratings, idx: list[int]) -> dict[str, float]:
    fit = fit_crossed(
        [r.score[i] for i in idx],
        [r.system[i] for i in idx],
        [r.rater[i] for i in idx],
        [f"{r.item[i]}\x1f{r.system[i]}" for i in idx],
    )
    return {str(s): float(b) for s, b in zip(fit.systems, fit.beta, strict=True)}


def _mos_means(r: Ratings, idx: list[int]) -> dict[str, float]:
    acc: dict[str, list[float]] = defaultdict(list)
    for i in idx:
        acc[r.system[i]].append(r.score[i])
    return {s: float(np.mean(v)) for s, v in acc.items()}


def _systems_block(
    eval_reports: Mapping[str, dict[str, Any]],
    dims: Mapping[str, Any],
    pair_reports: Mapping[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """The shared ``systems`` list: per system an ``overall`` block and ``groups`` (one per
    eval: the raw-scale rater-controlled mean with its CI; one per dimension: the z-scale
    dimension score; one per pairwise eval: the Bradley-Terry log-strength with its CI)."""
    names: set[str] = set()
    for rep in eval_reports.values():
        names |= {r["system"] for r in rep.get("systems", [])}
    for rep in pair_reports.values():
        names |= {r["system"] for r in rep["bradley_terry"]["strengths"]}
    out = []
    for s in sorted(names):
        groups = []
        n_total = 0
        for ev, rep in sorted(eval_reports.items()):
            for r in rep.get("systems", []):
                if r["system"] != s:
                    continue
                rc = r.get("rater_controlled") or {}
                n_total += int(r["n"])
                groups.append(
                    {
                        "group": "eval",
                        "name": ev,
                        "mean": rc.get("mean"),
                        "ci_lo": rc.get("ci_lo"),
                        "ci_hi": rc.get("ci_hi"),
                        "mos": r["mos"]["mean"],
                        "z_mean": (r.get("rater_controlled_z") or {}).get("mean"),
                        "n": r["n"],
                    }
                )
        dim_scores = []
        for dim, d in sorted(dims.items()):
            if s in d["scores"]:
                dim_scores.append(d["scores"][s])
                groups.append(
                    {
                        "group": "dimension",
                        "name": dim,
                        "z_mean": d["scores"][s],
                        "ci_lo": None,
                        "ci_hi": None,
                        "n": None,
                    }
                )
        for ev, rep in sorted(pair_reports.items()):
            for r in rep["bradley_terry"]["strengths"]:
                if r["system"] == s:
                    groups.append(
                        {
                            "group": "pairwise",
                            "name": ev,
                            "log_strength": r["log_strength"],
                            "ci_lo": r["ci_lo"],
                            "ci_hi": r["ci_hi"],
                            "n": None,
                        }
                    )
        evals_of = [g for g in groups if g["group"] == "eval"]
        pairs_of = [g for g in groups if g["group"] == "pairwise"]
        if not evals_of and len(pairs_of) == 1:
            g = pairs_of[0]
            overall = {
                "score": g["log_strength"],
                "scale": "Bradley-Terry log-strength",
                "ci_lo": g["ci_lo"],
                "ci_hi": g["ci_hi"],
                "n": None,
            }
        elif len(evals_of) == 1:
            g = evals_of[0]
            overall = {
                "score": g["mean"],
                "scale": "raw (rater-controlled)",
                "ci_lo": g["ci_lo"],
                "ci_hi": g["ci_hi"],
                "n": g["n"],
            }
        else:
            overall = {
                "score": float(np.mean(dim_scores)) if dim_scores else None,
                "scale": "z (equal-weight mean of dimension scores)",
                "ci_lo": None,
                "ci_hi": None,
                "n": n_total,
            }
        out.append({"system": s, "overall": overall, "groups": groups})
    return out


# -- run folder -----------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_analysis(
    source: Path,
    out_parent: Path,
    *,
    exclude_flagged: bool = False,
    judges: Path | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    screen: Mapping[str, str] | None = None,
) -> Path:
    """Analyze a ratings CSV or a study folder into ``out_parent/<run_id>/`` and return it.

    ``screen`` (study folders only): keep the raters whose profile answers match every
    FIELD = VALUE rule; the profiles are snapshot into the run folder (``profiles.json``).

    A study folder's ratings come from ``voxeval.study.store.export_ratings_csv`` and its
    evals (kind, scale, dimension, question) from ``study.json``. The ratings used and the
    judge file are copied into the run folder, so :func:`build_report` needs nothing else.
    """
    from voxeval.core.runstore import RunStore, utc_now

    source = Path(source)
    if not source.exists():
        raise InputError(f"ratings source not found: {source}")
    study_dir = source if source.is_dir() else None
    evals: dict[str, EvalMeta] | None = None
    if study_dir is not None:
        evals = read_study_evals(study_dir)
    if judges is not None and not Path(judges).is_file():
        raise InputError(f"judges file not found: {judges}")
    if screen and study_dir is None:
        raise InputError("screening by rater profile needs a study folder (a CSV has no profiles)")
    profiles = _study_profiles(study_dir) if study_dir is not None else {}
    if screen and not _screen(profiles, screen):
        rules = ", ".join(f"{k}={v}" for k, v in screen.items())
        raise InputError(f"no rater of {study_dir} passes the screening {rules}")
    config = {
        "source": str(source.resolve()),
        "source_kind": "study_dir" if study_dir else "csv",
        "exclude_flagged": exclude_flagged,
        "screen": dict(screen or {}),
        "judges": str(Path(judges).resolve()) if judges else None,
        "seed": seed,
        "evals": {k: v.as_dict() | {"gold_tolerance": v.gold_tolerance} for k, v in evals.items()}
        if evals
        else None,
    }
    import tempfile

    with tempfile.TemporaryDirectory(prefix="voxeval-analysis-") as tmp:
        staged = Path(tmp) / RATINGS_FILE
        if study_dir is not None:
            _say(progress, f"exporting ratings of {study_dir}")
            try:
                from voxeval.study.store import export_ratings_csv
            except ImportError:
                fallback = study_dir / RATINGS_FILE
                if not fallback.is_file():
                    raise InputError(
                        f"cannot export {study_dir}: the study store is unavailable and the "
                        f"folder has no {RATINGS_FILE}"
                    ) from None
                shutil.copyfile(fallback, staged)
            else:
                export_ratings_csv(study_dir, staged)
        else:
            shutil.copyfile(source, staged)
        # read (and refuse) before a run folder exists, so bad input leaves nothing behind
        _say(progress, "reading ratings")
        label = f"{study_dir} (its export)" if study_dir is not None else str(source)
        loaded = load_ratings_csv(staged, evals, label=label)
        judge_rows = load_judges_csv(Path(judges)) if judges is not None else None
        store = RunStore.create(out_parent, SUITE, config, None)
        shutil.copyfile(staged, store.path / RATINGS_FILE)
        if profiles:
            (store.path / PROFILES_FILE).write_text(
                json.dumps(profiles, indent=1, sort_keys=True), encoding="utf-8"
            )
    if judges is not None:
        shutil.copyfile(judges, store.path / JUDGES_FILE)
    store.update_info(ratings_sha256=_sha256(store.path / RATINGS_FILE))
    report = build_report(store, progress=progress, _loaded=(loaded, judge_rows))
    write_report_files(store.path, report)
    store.update_info(ended_at=utc_now())
    return store.path


def build_report(
    store: Any,
    progress: Progress = None,
    _loaded: tuple[LoadedRatings, tuple[list[JudgeRow], list[tuple[int, str]]] | None]
    | None = None,
    **_: Any,
) -> dict[str, Any]:
    """The report of an analysis run folder, recomputed from its files (``ratings.csv``,
    ``judges.csv``, ``run.json``); ``_loaded`` passes what :func:`run_analysis` already
    read from those same files."""
    from voxeval.core.runstore import utc_now

    info = store.info()
    config = info.get("config", {})
    evals = None
    if config.get("evals"):
        evals = {}
        for k, v in config["evals"].items():
            scale = v.get("scale") or {}
            evals[k] = EvalMeta(
                id=k,
                dimension=v.get("dimension") or k,
                kind=v.get("kind", "likert"),
                question=v.get("question", ""),
                scale_min=scale.get("min"),
                scale_max=scale.get("max"),
                scale_inferred=bool(v.get("scale_inferred", False)),
                gold_tolerance=v.get("gold_tolerance"),
            )
    path = Path(store.path)
    judge_rows = None
    judge_bad: list[tuple[int, str]] = []
    if _loaded is not None:
        loaded, judged = _loaded
        if judged is not None:
            judge_rows, judge_bad = judged
    else:
        _say(progress, "reading ratings")
        loaded = load_ratings_csv(path / RATINGS_FILE, evals)
        if (path / JUDGES_FILE).is_file():
            judge_rows, judge_bad = load_judges_csv(path / JUDGES_FILE)
    profiles: dict[str, dict[str, str]] = {}
    if (path / PROFILES_FILE).is_file():
        profiles = json.loads((path / PROFILES_FILE).read_text(encoding="utf-8"))
    rules = dict(config.get("screen") or {})
    screening = None
    if rules:
        passed = _screen(profiles, rules)
        before = sorted(set(loaded.ratings.rater))
        keep = [i for i, r in enumerate(loaded.ratings.rater) if r in passed]
        screening = {
            "rules": rules,
            "definition": "kept: raters whose profile answers every FIELD = VALUE rule "
            "(no profile or no answer: not kept)",
            "raters_before": len(before),
            "raters_kept": len({loaded.ratings.rater[i] for i in keep}),
            "excluded_raters": [r for r in before if r not in passed],
            "ratings_removed": len(loaded.ratings) - len(keep),
        }
        loaded.ratings = loaded.ratings.take(keep)
    body = analyze(
        loaded.ratings,
        evals,
        exclude_flagged=bool(config.get("exclude_flagged")),
        judges=judge_rows,
        seed=int(config.get("seed", 0)),
        progress=progress,
    )
    body["demographics"] = _demographics(profiles, set(loaded.ratings.rater))
    body["screening"] = screening
    if screening is not None:
        body.setdefault("notes", []).append(
            f"screening {', '.join(f'{k}={v}' for k, v in rules.items())}: "
            f"{screening['raters_kept']} of {screening['raters_before']} raters kept"
        )
    if judge_rows is not None and body.get("judges") is not None:
        body["judges"]["malformed"] = [{"line": ln, "reason": why} for ln, why in judge_bad]
    return {
        "suite": SUITE,
        "metrics_version": METRICS_VERSION,
        "run_id": info.get("run_id", path.name),
        "generated_at": utc_now(),
        "source": {
            "path": config.get("source"),
            "kind": config.get("source_kind"),
            "sha256": info.get("ratings_sha256"),
            "rows_read": loaded.rows_read,
            "rows_used": len(loaded.ratings),
            "revisions_replaced": loaded.revisions,
            "revisions": [
                {"line": ln, "earlier_line": prev}
                for ln, prev in loaded.revision_lines[:MAX_PROBLEMS_LISTED]
            ],
            "malformed_count": len(loaded.malformed),
            "malformed": [
                {"line": ln, "reason": why} for ln, why in loaded.malformed[:MAX_PROBLEMS_LISTED]
            ],
        },
        "config": {k: v for k, v in config.items() if k != "evals"},
        **body,
    }


def write_report_files(run_dir: Path, report: dict[str, Any]) -> dict[str, Path]:
    from voxeval.report.writer import json_safe

    run_dir = Path(run_dir)
    safe = json_safe(report)
    paths = {
        "json": run_dir / "report.json",
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
    }
    paths["json"].write_text(json.dumps(safe, indent=2, ensure_ascii=False), encoding="utf-8")
    paths["md"].write_text(render_markdown(safe), encoding="utf-8")
    paths["html"].write_text(render_html(safe), encoding="utf-8")
    return paths


# -- rendering ------------------------------------------------------------------------------


def _ci(block: Mapping[str, Any] | None, digits: int = 3) -> str:
    from voxeval.report.html import fmt

    if not block:
        return "–"
    return f"{fmt(block.get('mean'), digits)} [{fmt(block.get('ci_lo'), digits)}, {fmt(block.get('ci_hi'), digits)}]"


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, int | float) else "?"


def _diff(block: Mapping[str, Any] | None) -> str:
    from voxeval.report.html import fmt

    if not block:
        return "–"
    return f"{fmt(block['diff'])} [{fmt(block['ci_lo'])}, {fmt(block['ci_hi'])}] vs {block['next']}"


def _sections(report: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Report content as (heading, [(kind, payload)]) where kind is ``p`` (text), ``table``
    ((headers, rows)) or ``chart`` (an SVG builder, HTML only)."""
    from voxeval.report.html import fmt

    out: list[tuple[str, list[tuple[str, Any]]]] = []
    src = report.get("source", {})
    c = report.get("counts", {})
    parts: list[tuple[str, Any]] = [
        (
            "p",
            f"{c.get('n_ratings')} ratings by {c.get('n_raters')} raters of {c.get('n_items')} "
            f"items from {c.get('n_systems')} systems, {c.get('n_evals')} eval(s). Source "
            f"{src.get('path')} ({src.get('kind')}): {src.get('rows_read')} data rows, "
            f"{src.get('malformed_count')} malformed, {src.get('revisions_replaced')} "
            f"revision(s) replaced.",
        )
    ]
    if src.get("malformed"):
        parts.append(
            (
                "table",
                (
                    ["line", "reason"],
                    [[m["line"], m["reason"]] for m in src["malformed"][:50]],
                ),
            )
        )
    for note in report.get("notes", []):
        parts.append(("p", note))
    out.append(("Data", parts))

    for ev in report.get("evals", []):
        parts = []
        if "systems" not in ev:
            parts.append(("p", f"{ev.get('n_ratings')} ratings: too few to analyze."))
            out.append((f"Eval {ev['id']}", parts))
            continue
        sc = ev.get("scale", {})
        parts.append(
            (
                "p",
                f"Dimension {ev.get('dimension')}; scale {_num(sc.get('min'))}..{_num(sc.get('max'))}"
                f"{' (inferred)' if ev.get('scale_inferred') else ''}; {ev['n_ratings']} ratings, "
                f"{ev['n_raters']} raters, {ev['n_items']} items. "
                + (f"Question: {ev['question']}" if ev.get("question") else ""),
            )
        )
        rows = [
            [
                r["system"],
                r["n"],
                _ci(r["mos"]),
                _ci(r.get("rater_controlled")),
                _ci(r.get("rater_controlled_z")),
                r.get("rank_mos"),
                r.get("rank_model"),
                r.get("rank_model_z"),
                _diff(r.get("diff_to_next")),
            ]
            for r in ev["systems"]
        ]
        parts.append(
            (
                "table",
                (
                    [
                        "system",
                        "n",
                        "MOS [95% t CI]",
                        "rater-controlled [95% CI]",
                        "rater-controlled z [95% CI]",
                        "rank MOS",
                        "rank model",
                        "rank model z",
                        "minus next in model order [95% CI]",
                    ],
                    rows,
                ),
            )
        )
        parts.append(("chart", ("eval", ev)))
        m, mz = ev.get("model") or {}, ev.get("model_z") or {}
        vc, vcz = m.get("variance_components", {}), mz.get("variance_components", {})
        parts.append(
            (
                "table",
                (
                    [
                        "model",
                        "var rater",
                        "var item",
                        "var residual",
                        "iterations",
                        "converged",
                        "seconds",
                    ],
                    [
                        [
                            "raw",
                            vc.get("rater"),
                            vc.get("item"),
                            vc.get("residual"),
                            m.get("iterations"),
                            m.get("converged"),
                            m.get("seconds"),
                        ],
                        [
                            "z",
                            vcz.get("rater"),
                            vcz.get("item"),
                            vcz.get("residual"),
                            mz.get("iterations"),
                            mz.get("converged"),
                            mz.get("seconds"),
                        ],
                    ],
                ),
            )
        )
        if m.get("variance_note"):
            parts.append(("p", f"Variance components: {m['variance_note']}."))
        mv = ev.get("mos_vs_model", {})
        parts.append(
            (
                "p",
                f"MOS vs rater-controlled order: Spearman {fmt(mv.get('spearman'))}, Kendall "
                f"{fmt(mv.get('kendall'))}. Model: {m.get('model')}. Its CIs are Wald (normal) "
                f"intervals that include rater and item sampling (they generalize to new "
                f"raters and items, so they are wider than the MOS t intervals, which treat "
                f"ratings as independent); the difference to the next system cancels the "
                f"shared rater and item effects and is the one to read for ranking.",
            )
        )
        if ev.get("z_excluded_raters"):
            parts.append(
                (
                    "p",
                    "Not z-scorable (left out of the z model): "
                    + ", ".join(
                        f"{x['rater']} ({x['reason']})" for x in ev["z_excluded_raters"][:30]
                    ),
                )
            )
        rel = ev.get("reliability", {})
        icc_ = rel.get("icc", {})
        ai, ao = rel.get("alpha_interval", {}), rel.get("alpha_ordinal", {})
        parts.append(
            (
                "table",
                (
                    ["reliability (unit = item x system)", "value", "95% CI"],
                    [
                        [
                            "Krippendorff alpha, interval",
                            ai.get("alpha"),
                            f"[{fmt(ai.get('ci_lo'))}, {fmt(ai.get('ci_hi'))}]",
                        ],
                        [
                            "Krippendorff alpha, ordinal",
                            ao.get("alpha"),
                            f"[{fmt(ao.get('ci_lo'))}, {fmt(ao.get('ci_hi'))}]",
                        ],
                        ["ICC(1) one-way", icc_.get("icc1"), "–"],
                        ["ICC(2,1) absolute, single", icc_.get("icc2_1"), "–"],
                        [
                            f"ICC(2,k) mean of k={fmt(icc_.get('k_harmonic'), 2)}",
                            icc_.get("icc2_k"),
                            "–",
                        ],
                        ["ICC(3,1) consistency, single", icc_.get("icc3_1"), "–"],
                    ],
                ),
            )
        )
        if icc_.get("note"):
            parts.append(("p", f"ICC: {icc_['note']}."))
        out.append((f"Eval {ev['id']}", parts))

    dims = report.get("dimensions") or {}
    if dims:
        parts = [
            (
                "p",
                "Dimension score = equal-weight mean of its evals' z-scale rater-controlled "
                "means. Membership: Spearman between each eval's and its dimension's system "
                "order, passed at >= 0.30 (leave-one-out: the dimension without that eval).",
            )
        ]
        rows = []
        for dim, d in sorted(dims.items()):
            for mem in d["membership"]:
                rows.append(
                    [
                        dim,
                        mem["eval"],
                        mem["spearman"],
                        mem["spearman_leave_one_out"],
                        "pass" if mem["passed"] else "FAIL",
                    ]
                )
        parts.append(("table", (["dimension", "eval", "Spearman", "Spearman LOO", "check"], rows)))
        names = sorted({s for d in dims.values() for s in d["scores"]})
        parts.append(
            (
                "table",
                (
                    ["system", *sorted(dims)],
                    [[s, *[dims[d]["scores"].get(s) for d in sorted(dims)]] for s in names],
                ),
            )
        )
        parts.append(("chart", ("dims", dims)))
        out.append(("Dimensions", parts))

    for pw in report.get("pairwise", []):
        parts = [
            (
                "p",
                f"{pw['n_ratings']} preferences by {pw['n_raters']} raters over "
                f"{pw['n_items']} items. Rate = (wins + ties/2) / n for the first system, "
                f"Wilson 95% CI.",
            )
        ]
        parts.append(
            (
                "table",
                (
                    [
                        "first",
                        "second",
                        "n",
                        "wins first",
                        "wins second",
                        "ties",
                        "rate first",
                        "95% CI",
                    ],
                    [
                        [
                            p["first"],
                            p["second"],
                            p["n"],
                            p["wins_first"],
                            p["wins_second"],
                            p["ties"],
                            p["rate_first"],
                            f"[{fmt(p['ci_lo'])}, {fmt(p['ci_hi'])}]",
                        ]
                        for p in pw["preferences"]
                    ],
                ),
            )
        )
        bt = pw["bradley_terry"]
        parts.append(("p", f"Bradley-Terry: {bt['model']}; converged {bt['converged']}."))
        parts.append(
            (
                "table",
                (
                    ["system", "log-strength", "SE", "95% CI", "P(beats average)"],
                    [
                        [
                            s["system"],
                            s["log_strength"],
                            s["se"],
                            f"[{fmt(s['ci_lo'])}, {fmt(s['ci_hi'])}]",
                            s["win_prob_vs_avg"],
                        ]
                        for s in bt["strengths"]
                    ],
                ),
            )
        )
        out.append((f"Pairwise {pw['id']}", parts))

    qc = report.get("rater_qc", {})
    if qc:
        th = qc.get("thresholds", {})
        parts = [
            (
                "p",
                f"{qc.get('n_flagged')} of {len(qc.get('raters', []))} raters flagged. Scores "
                f"mapped to 0..1 per eval scale. Rules: gold accuracy < "
                f"{fmt(th.get('gold_min_accuracy'), 2)}; Spearman with leave-one-out consensus < "
                f"{fmt(th.get('consensus_min_rho'), 2)} (>= {th.get('consensus_min_n')} rated "
                f"units); one score in >= {fmt(th.get('straight_mode_share'), 2)} of >= "
                f"{th.get('straight_min_n')} ratings; > {fmt(th.get('fast_max_share'), 2)} of "
                f"ratings under {th.get('fast_ms')} ms.",
            )
        ]
        raters = sorted(qc.get("raters", []), key=lambda q: (not q["flags"], str(q["rater"])))
        parts.append(
            (
                "table",
                (
                    [
                        "rater",
                        "n",
                        "gold",
                        "consensus rho",
                        "consensus r",
                        "mode share",
                        "fast share",
                        "flags",
                    ],
                    [
                        [
                            q["rater"],
                            q["n"],
                            f"{q['gold_correct']}/{q['gold_n']}" if q["gold_n"] else "–",
                            q["consensus_spearman"],
                            q["consensus_pearson"],
                            q["mode_share"],
                            q["fast_share"],
                            "; ".join(q["flags"]) or "",
                        ]
                        for q in raters
                    ],
                ),
            )
        )
        out.append(("Rater QC", parts))

    ex = report.get("exclusion", {})
    if ex.get("effect"):
        parts = [
            (
                "p",
                "What leaving out the flagged raters changes"
                + (
                    " (applied to every table above)."
                    if ex.get("applied")
                    else " (not applied; use --exclude-flagged)."
                ),
            )
        ]
        for ev, e in sorted(ex["effect"].items()):
            rc = e["rater_controlled"]
            parts.append(
                (
                    "p",
                    f"{ev}: {e['ratings_removed']} ratings removed; rater-controlled order "
                    f"Spearman before/after {fmt(rc['spearman'])}, largest rank move "
                    f"{rc['max_rank_change']}, largest change {fmt(rc['max_abs_change'])}; MOS "
                    f"order Spearman {fmt(e['mos']['spearman'])}.",
                )
            )
            parts.append(
                (
                    "table",
                    (
                        ["system", "before", "after", "change", "rank before", "rank after"],
                        [
                            [
                                r["system"],
                                r["before"],
                                r["after"],
                                r["change"],
                                r["rank_before"],
                                r["rank_after"],
                            ]
                            for r in rc["systems"]
                        ],
                    ),
                )
            )
        out.append(("Exclusion effect", parts))

    jd = report.get("judges")
    if jd:
        rows = []
        for t in jd.get("targets", []):
            il, sl, wr = t.get("item_level"), t.get("system_level"), t.get("win_rate_agreement")
            rows.append(
                [
                    t["target"],
                    t["level"],
                    f"{fmt(il['spearman'])} [{fmt(il['ci_lo'])}, {fmt(il['ci_hi'])}] n={il['n']}"
                    if il
                    else "–",
                    f"{fmt(sl['spearman'])} [{fmt(sl['ci_lo'])}, {fmt(sl['ci_hi'])}] n={sl['n']}"
                    if sl
                    else "–",
                    f"{fmt(wr['agreement'])} [{fmt(wr['ci_lo'])}, {fmt(wr['ci_hi'])}] n={wr['n']}"
                    if wr
                    else "–",
                ]
            )
        parts = [
            (
                "p",
                "Spearman between judge and human scores with 95% bootstrap CIs. Human item "
                "score: mean within-rater z-score; system score: z-scale rater-controlled mean "
                "(eval) or dimension score. Win-rate agreement: share of pairwise comparisons "
                "where the judge prefers the side the humans preferred (Wilson CI).",
            ),
            (
                "table",
                (
                    ["target", "level", "item-level rho", "system-level rho", "win-rate agreement"],
                    rows,
                ),
            ),
        ]
        if jd.get("unmatched_targets"):
            parts.append(
                (
                    "p",
                    "Judge targets with no human eval or dimension: "
                    + ", ".join(jd["unmatched_targets"]),
                )
            )
        if jd.get("malformed"):
            parts.append(("p", f"{len(jd['malformed'])} malformed judge row(s) skipped."))
        out.append(("Judges vs humans", parts))

    demo = report.get("demographics")
    if demo:
        rows = [[k, v, n] for k, counts in demo["fields"].items() for v, n in counts.items()]
        out.append(
            (
                "Raters",
                [
                    (
                        "p",
                        f"{demo['raters_with_profile']} of {demo['raters']} raters answered the profile.",
                    ),
                    ("table", (["field", "answer", "raters"], rows)),
                ],
            )
        )
    return out


def render_markdown(report: Mapping[str, Any]) -> str:
    from voxeval.report.markdown import md_table

    lines = [f"# Rating study analysis ({report.get('run_id', '')})", ""]
    for heading, parts in _sections(report):
        lines += [f"## {heading}", ""]
        for kind, payload in parts:
            if kind == "p":
                lines += [str(payload), ""]
            elif kind == "table":
                lines += [md_table(*payload)]
    return "\n".join(lines)


def render_html(report: Mapping[str, Any], store: Any = None) -> str:
    from voxeval.report.html import esc, page, table

    body = []
    for heading, parts in _sections(report):
        body.append(f"<h2>{esc(heading)}</h2>")
        for kind, payload in parts:
            if kind == "p":
                body.append(f"<p>{esc(payload)}</p>")
            elif kind == "table":
                body.append(table(*payload))
            elif kind == "chart":
                body.append(_chart(*payload))
    return page(f"Rating study analysis {report.get('run_id', '')}", "".join(body))


def _chart(what: str, data: Mapping[str, Any]) -> str:
    from voxeval.report.html import bar_chart

    if what == "eval":
        systems = data["systems"][:CHART_MAX_SYSTEMS]
        note = (
            f"<p class='muted'>Chart: the first {CHART_MAX_SYSTEMS} of {len(data['systems'])} "
            f"systems (model order).</p>"
            if len(data["systems"]) > CHART_MAX_SYSTEMS
            else ""
        )
        sc = data.get("scale") or {}
        svg = ""
        if sc.get("min") is not None and sc["min"] >= 0:

            def tri(b: Mapping[str, Any] | None) -> tuple[float | None, float | None, float | None]:
                return (b["mean"], b["ci_lo"], b["ci_hi"]) if b else (None, None, None)

            svg = bar_chart(
                [r["system"] for r in systems],
                [
                    ("MOS", [tri(r["mos"]) for r in systems]),
                    ("rater-controlled", [tri(r.get("rater_controlled")) for r in systems]),
                ],
                title=f"{data['id']}: MOS vs rater-controlled mean (95% CI)",
                x_label="score",
            )
        zrows = [
            (r["system"], r["rater_controlled_z"]) for r in systems if r.get("rater_controlled_z")
        ]
        svg += dot_plot(
            [s for s, _ in zrows],
            [(b["mean"], b["ci_lo"], b["ci_hi"]) for _, b in zrows],
            title=f"{data['id']}: rater-controlled mean on the within-rater z scale (95% CI)",
        )
        return note + svg
    if what == "dims":
        names = sorted({s for d in data.values() for s in d["scores"]})[:CHART_MAX_SYSTEMS]
        parts = []
        for dim, d in sorted(data.items()):
            pts = [(d["scores"].get(s), None, None) for s in names]
            parts.append(dot_plot(names, pts, title=f"dimension {dim} (z scale)"))
        return "".join(parts)
    return ""


def dot_plot(
    categories: Sequence[str],
    points: Sequence[tuple[float | None, float | None, float | None]],
    *,
    title: str = "",
    width: int = 760,
) -> str:
    """Horizontal dots with CI whiskers on a signed axis (inline SVG; zero marked)."""
    from voxeval.report.html import esc

    row_h, left, right, top = 16, 170, 30, 26 if title else 8
    height = top + row_h * len(categories) + 30
    vals = [
        v
        for p in points
        for v in p
        if v is not None and isinstance(v, float | int) and math.isfinite(v)
    ]
    lo = min([*vals, 0.0]) if vals else -1.0
    hi = max([*vals, 0.0]) if vals else 1.0
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * (v - lo) / (hi - lo)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-size='11'>"
    ]
    if title:
        parts.append(f"<text x='{left}' y='16' font-weight='bold'>{esc(title)}</text>")
    axis_y = top + row_h * len(categories)
    parts.append(
        f"<line x1='{x(0):.1f}' x2='{x(0):.1f}' y1='{top}' y2='{axis_y}' stroke='#bbb' stroke-dasharray='3,3'/>"
    )
    for i, (cat, (v, a, b)) in enumerate(zip(categories, points, strict=True)):
        yc = top + i * row_h + row_h / 2
        parts.append(f"<text x='{left - 6}' y='{yc + 4:.1f}' text-anchor='end'>{esc(cat)}</text>")
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
            parts.append(
                f"<line x1='{x(a):.1f}' x2='{x(b):.1f}' y1='{yc:.1f}' y2='{yc:.1f}' stroke='#222'/>"
            )
        if v is not None and math.isfinite(v):
            parts.append(
                f"<circle cx='{x(v):.1f}' cy='{yc:.1f}' r='3.5' fill='#3366cc'><title>{esc(cat)}: {v:.4f}</title></circle>"
            )
    parts.append(
        f"<line x1='{left}' x2='{left + plot_w}' y1='{axis_y}' y2='{axis_y}' stroke='#999'/>"
    )
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        parts.append(
            f"<text x='{x(v):.1f}' y='{axis_y + 14}' text-anchor='middle' fill='#555'>{v:.2f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)

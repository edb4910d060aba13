"""``voxassay study analyze``: rater-controlled system scores, reliability, rater QC, judges
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
(:func:`voxassay.stats.raters.fit_crossed`) on raw scores and on within-rater z-scores
(z within rater *and eval*), Krippendorff's alpha (interval, ordinal; unit = item x
system) with bootstrap CIs, ICC. Dimensions combine their evals' z-scale rater-controlled
means with equal weights. Rater QC pools a rater's rows over evals after mapping each eval's
scale to 0..1.

The run folder (``OUT/study-<stamp>-<hex>/``) holds ``run.json`` (config), the ratings it
used (``ratings.csv``, ``judges.csv``) and ``report.json|md|html``; :func:`build_report`
recomputes the report from the folder alone.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.study.ratings import (
    EvalMeta,
    JudgeRow,
    Progress,
    Ratings,
)

METRICS_VERSION = "study-analysis-1"
SUITE = "study"


# -- reading --------------------------------------------------------------------------------


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
    from voxassay.stats.agreement import rater_qc

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
    from voxassay.stats.agreement import icc, krippendorff_alpha_ci
    from voxassay.stats.ranks import rank_agreement
    from voxassay.stats.raters import fit_crossed, plain_mos, rater_zscores

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
    from voxassay.stats.agreement import bradley_terry, pairwise_preferences

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
    from voxassay.stats.raters import rater_zscores

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
    from voxassay.stats.agreement import correlation_ci, win_rate_agreement

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


def study_profiles(study_dir: Path) -> dict[str, dict[str, str]]:
    """Rater id -> profile answers of a study folder (raters without answers left out)."""
    if not (study_dir / "study.db").is_file():
        return {}
    from voxassay.study.store import StudyStore

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
    from voxassay.stats.agreement import QCThresholds, dimension_scores, exclusion_effect
    from voxassay.stats.raters import fit_crossed

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


# -- rendering ------------------------------------------------------------------------------

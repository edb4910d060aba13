"""Pieces the TTS report shares: constants, eval definitions, what a system says about
itself, and the per-system scorer of evals and dimensions (``report.py`` assembles them)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.core.items import Item
from voxassay.core.records import Record
from voxassay.suites.tts import profile as pf
from voxassay.suites.tts.items import DIMENSIONS

REPORT_VERSION = "tts-report-1"
DIMENSION_ORDER = DIMENSIONS
"""The seven dimensions in the order reports show them (the item sets' order)."""
HUMAN_FILE = "human.json"
VALIDATION_FILE = "validation.json"
# A system "follows" instructions only if the share of expected directions met can exceed
# one half (a change in a random direction meets an expected direction about half the time).
FOLLOWS_SHARE = 0.5
TOP_K = 5
WORST_ITEMS = 5

MEASURE_LABELS = {
    "dnsmos": "DNSMOS quality",
    "speaker": "speaker similarity",
    "longform_speaker": "long-form speaker similarity",
    "longform_drift": "long-form drift",
    "asr": "ASR round trip",
    "round_trip": "ASR round trip",
    "prosody": "prosody features",
    "artifacts": "artifact detectors",
    "rate": "speaking rate",
    "judge": "judge",
}
"""Readable names of ``output.unavailable`` keys."""

PRIMARY_MEASURE = {
    "critical_accuracy": ("asr", "round_trip"),
    "intelligibility": ("asr", "round_trip"),
    "prosody_following": ("prosody",),
    "identity": ("speaker",),
    "longform_stability": ("longform_speaker", "speaker"),
    "quality": ("dnsmos",),
}
"""Which ``output.unavailable`` entries explain a missing primary metric."""

ARTIFACT_RULES: dict[str, tuple[str, str, float]] = {
    "clipping": ("clipping_fraction", ">", 0.001),
    "dropouts": ("dropout_count", ">=", 1.0),
    "long_silence": ("longest_silence_s", ">", 2.0),
    "dc_offset": ("dc_offset", "abs>", 0.01),
    "narrow_band": ("bandwidth_hz", "<", 4000.0),
}
"""An item has the artifact when ``metric OP threshold`` (rates over items with the metric)."""


# -- helpers ---------------------------------------------------------------------------------


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    if not path.exists():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path.name} could not be read: {exc}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _eval_defs(
    config: Mapping[str, Any], items: Sequence[Item]
) -> tuple[dict[str, dict[str, Any]], str]:
    """``{eval: {dimension, title, question, scale, automatic, primary}}`` and its source."""
    present: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        present[str(it.labels.get("eval") or "unlabelled")].append(it)
    raw = config.get("evals")
    source = "run.json"
    defs: dict[str, dict[str, Any]] = {}
    if isinstance(raw, list):
        raw = {str(e.get("id")): e for e in raw if isinstance(e, dict)}
    if isinstance(raw, dict) and raw:
        defs = {str(k): dict(v) for k, v in raw.items() if isinstance(v, dict)}
    else:
        try:
            from voxassay.suites.tts.items import load_item_set

            evs, _ = load_item_set("default")
            for k, e in evs.items():
                defs[k] = {
                    "dimension": e.dimension,
                    "title": e.title,
                    "question": e.question,
                    "scale": e.scale,
                    "automatic": list(e.automatic),
                    "primary": e.primary,
                }
            source = "installed item sets (run.json names no evals)"
        except Exception:  # the item module is optional here: fall back to inference
            defs = {}
            source = "inferred from the items (run.json names no evals)"
    out: dict[str, dict[str, Any]] = {}
    for ev, its in present.items():
        d = dict(defs.get(ev) or {})
        dim = str(d.get("dimension") or its[0].labels.get("dimension") or "unlabelled")
        if ev not in defs:
            metas = [{**it.labels, **it.meta} for it in its]
            d["primary"] = pf.infer_primary(dim, metas)
            if source == "run.json":
                source = "run.json (some evals inferred)"
        d["dimension"] = dim
        d.setdefault("title", ev.replace("_", " "))
        d.setdefault("question", None)
        d.setdefault("automatic", [d["primary"]] if d.get("primary") else [])
        d["id"] = ev
        d["n_items"] = len(its)
        d["humans_only"] = not d.get("primary")
        out[ev] = d
    return out, source


def _describe(info: Mapping[str, Any], spec: str, recs: Sequence[Record]) -> dict[str, Any]:
    """The adapter's ``describe()`` from run.json (systems/<spec>/describe, or config voices),
    else from the first record that carries ``output.system_info``."""
    sysinfo = (info.get("systems") or {}).get(spec) or {}
    d = sysinfo.get("describe") if isinstance(sysinfo, dict) else None
    if not isinstance(d, dict):
        voices = (info.get("config") or {}).get("voices") or {}
        d = voices.get(spec) if isinstance(voices, dict) else None
    if not isinstance(d, dict):
        for r in recs:
            si = r.output.get("system_info")
            if isinstance(si, dict):
                d = si
                break
    return d if isinstance(d, dict) else {}


def accepts_instructions(describe: Mapping[str, Any]) -> bool | None:
    """What the adapter said: ``describe()['instructions']`` (or ``accepts_instructions``)
    False or a text starting with "ignored"/"not" -> False; True or other text -> True;
    absent -> None (unknown)."""
    for key in ("accepts_instructions", "instructions"):
        if key not in describe:
            continue
        v = describe[key]
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            low = v.strip().lower()
            return not low.startswith(("ignored", "not ", "no ", "unsupported", "none"))
    return None


# -- scoring one system ----------------------------------------------------------------------


class _SystemScorer:
    """Per-item primary scores, contrast outcomes and identity cosines of one system."""

    def __init__(
        self,
        spec: str,
        recs: Sequence[Record],
        items: Mapping[str, Item],
        evals: Mapping[str, dict[str, Any]],
    ) -> None:
        self.spec = spec
        self.items = items
        self.evals = evals
        self.recs = [r for r in recs if r.id in items]
        self.by_key = {(r.id, r.repeat): r for r in self.recs}
        self.anchor_of: dict[str, str] = {}
        groups: dict[str, list[Item]] = defaultdict(list)
        for it in items.values():
            g = it.labels.get("group")
            if g is not None and it.labels.get("dimension") == "identity_stress":
                groups[str(g)].append(it)
        for its in groups.values():
            anchors = [
                it.id
                for it in its
                if str(it.labels.get("condition", "")).lower() == pf.NEUTRAL_CONDITION
            ]
            if len(anchors) == 1:
                for it in its:
                    self.anchor_of[it.id] = anchors[0]
        self.units: dict[str, list[pf.Unit]] = defaultdict(list)
        self.skips: dict[str, list[pf.Skip]] = defaultdict(list)
        self.contrasts: dict[tuple[str, int], pf.ContrastOutcome] = {}
        self.cosines: dict[tuple[str, int], float] = {}
        self._score_all()

    def partner(self, item_id: str, repeat: int) -> Record | None:
        return self.by_key.get((item_id, repeat)) or self.by_key.get((item_id, 0))

    def _why_missing(self, rec: Record, primary: str, base: str) -> str:
        unav = rec.output.get("unavailable") or {}
        for key in PRIMARY_MEASURE.get(primary, ()):
            if isinstance(unav, dict) and unav.get(key):
                return f"{MEASURE_LABELS.get(key, key)} unavailable: {unav[key]}"
        return base

    def _contrast(self, rec: Record, item: Item) -> pf.ContrastOutcome | str | None:
        c = item.meta.get("contrast")
        if not isinstance(c, dict) or not c.get("reference"):
            return None
        ref_id = str(c["reference"])
        ref = self.partner(ref_id, rec.repeat)
        if ref is None:
            return f"neutral partner {ref_id} has no record"
        if ref.status != "ok":
            kind = (ref.error or {}).get("kind", ref.status)
            return f"neutral partner {ref_id} failed ({kind})"
        expect = c.get("expect") or {}
        if not isinstance(expect, dict) or not expect:
            return "contrast names no expected direction"
        return pf.contrast_outcome(expect, rec.metrics, ref.metrics)

    def _cosine(self, rec: Record, item: Item) -> float | str | None:
        anchor = self.anchor_of.get(item.id)
        if anchor is None:
            if item.labels.get("group") is not None:
                return f"group {item.labels.get('group')} has no single neutral anchor"
            return "item has no identity group"
        if anchor == item.id:
            return None
        ref = self.partner(anchor, rec.repeat)
        if ref is None:
            return f"anchor {anchor} has no record"
        if ref.status != "ok":
            return f"anchor {anchor} failed ({(ref.error or {}).get('kind', ref.status)})"
        a, b = rec.output.get("embedding"), ref.output.get("embedding")
        if not a or not b:
            unav = rec.output.get("unavailable") or ref.output.get("unavailable") or {}
            if isinstance(unav, dict) and unav.get("speaker"):
                return f"speaker similarity unavailable: {unav['speaker']}"
            return "no speaker embedding"
        cos = pf.cosine(a, b)
        return cos if cos is not None else "speaker embedding is empty or zero"

    def _score_all(self) -> None:
        for rec in self.recs:
            if rec.status != "ok":
                continue
            item = self.items[rec.id]
            ev = str(item.labels.get("eval") or "unlabelled")
            primary = self.evals.get(ev, {}).get("primary")
            oc = self._contrast(rec, item)
            if isinstance(oc, pf.ContrastOutcome):
                self.contrasts[(rec.id, rec.repeat)] = oc
            cos = self._cosine(rec, item) if rec.id in self.anchor_of else None
            if isinstance(cos, float):
                self.cosines[(rec.id, rec.repeat)] = cos
            if not primary:
                continue
            if primary == "prosody_following":
                if oc is None:
                    self.skips[ev].append(
                        pf.Skip(rec.id, "reference", "neutral partner (no contrast)")
                    )
                    continue
                if isinstance(oc, str):
                    self.skips[ev].append(pf.Skip(rec.id, "unscored", oc))
                    continue
                res = pf.item_score(primary, rec.metrics, contrast=oc)
            elif primary == "identity":
                if rec.id not in self.anchor_of:
                    cos = self._cosine(rec, item)
                if cos is None:
                    self.skips[ev].append(pf.Skip(rec.id, "reference", "identity anchor"))
                    continue
                if isinstance(cos, str):
                    self.skips[ev].append(pf.Skip(rec.id, "unscored", cos))
                    continue
                res = pf.item_score(primary, rec.metrics, anchor_cosine=cos)
            else:
                res = pf.item_score(primary, rec.metrics)
            if isinstance(res, str):
                reason = self._why_missing(rec, primary, res)
                self.skips[ev].append(pf.Skip(rec.id, "unscored", reason))
            else:
                self.units[ev].append(pf.Unit(rec.id, res[0], res[1]))


# -- raw metrics -----------------------------------------------------------------------------

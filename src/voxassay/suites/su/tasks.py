"""The six SU evals, their task families, and the emotion vocabularies.

Families group the evals that share one kind of manifest item:

- ``emotion``: one clip, ``labels.emotion`` is the truth -> eval ``emotion``;
- ``emotion_compare``: two clips, ``labels.truth`` is ``A`` or ``B`` (which clip expresses
  ``labels.target_emotion`` more strongly) -> ``emotion_compare_segmented`` (two audio
  inputs) and ``emotion_compare_merged`` (one input, clips joined by a separator);
- ``speaker_match``: two clips, ``labels.truth`` is ``same`` or ``different`` ->
  ``speaker_match_segmented`` and ``speaker_match_merged``;
- ``synthetic_detection``: one clip, ``labels.synthetic`` is true or false -> eval
  ``synthetic_detection`` (a 1-5 humanlikeness rating; positive class = human).

Vocabulary scoring accepts exact labels and the synonyms declared here, nothing else
(case, surrounding punctuation and spacing are ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from voxassay.core.errors import InputError

__all__ = [
    "EVALS",
    "FAMILIES",
    "SHORTHANDS",
    "VOCABULARIES",
    "EvalSpec",
    "Vocabulary",
    "expand_tasks",
    "get_vocabulary",
]


@dataclass(frozen=True)
class EvalSpec:
    """One eval: its family, how its clips reach the model, and what the answer is."""

    name: str
    family: str
    variant: str  # "single" | "segmented" | "merged"
    answer: str  # "label" | "side" | "same_different" | "rating"
    n_clips: int
    title: str


EVALS: dict[str, EvalSpec] = {
    e.name: e
    for e in (
        EvalSpec("emotion", "emotion", "single", "label", 1, "Emotion recognition"),
        EvalSpec(
            "emotion_compare_segmented",
            "emotion_compare",
            "segmented",
            "side",
            2,
            "Relative emotion comparison (two inputs)",
        ),
        EvalSpec(
            "emotion_compare_merged",
            "emotion_compare",
            "merged",
            "side",
            2,
            "Relative emotion comparison (one merged input)",
        ),
        EvalSpec(
            "speaker_match_segmented",
            "speaker_match",
            "segmented",
            "same_different",
            2,
            "Speaker match (two inputs)",
        ),
        EvalSpec(
            "speaker_match_merged",
            "speaker_match",
            "merged",
            "same_different",
            2,
            "Speaker match (one merged input)",
        ),
        EvalSpec(
            "synthetic_detection",
            "synthetic_detection",
            "single",
            "rating",
            1,
            "Synthetic speech detection (humanlikeness 1-5)",
        ),
    )
}

FAMILIES: dict[str, tuple[str, ...]] = {}
for _e in EVALS.values():
    FAMILIES.setdefault(_e.family, ())
    FAMILIES[_e.family] = (*FAMILIES[_e.family], _e.name)

SHORTHANDS: dict[str, tuple[str, ...]] = {
    "speaker_match": FAMILIES["speaker_match"],
    "emotion_compare": FAMILIES["emotion_compare"],
}
"""``--task speaker_match`` runs both variants on the same pairs (a paired comparison)."""


def expand_tasks(names: list[str] | tuple[str, ...]) -> list[str]:
    """Eval names from CLI task names (shorthands expanded, order kept, duplicates dropped)."""
    out: list[str] = []
    for name in names:
        key = name.strip().replace("-", "_")
        if key in SHORTHANDS:
            expanded: tuple[str, ...] = SHORTHANDS[key]
        elif key in EVALS:
            expanded = (key,)
        else:
            import difflib

            known = [*EVALS, *SHORTHANDS]
            near = difflib.get_close_matches(key, known, n=2, cutoff=0.5)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise InputError(f"unknown SU task {name!r}.{hint} Known: {', '.join(known)}.")
        for e in expanded:
            if e not in out:
                out.append(e)
    if not out:
        raise InputError("no SU task given")
    return out


def _norm(text: str) -> str:
    """Lower case, hyphens/underscores as spaces, outer punctuation and spacing removed."""
    t = text.lower().replace("_", " ").replace("-", " ")
    t = re.sub(r"\s+", " ", t)
    return t.strip(" \t\n\r.,;:!?\"'`*()[]{}").strip()


@dataclass(frozen=True)
class Vocabulary:
    """A closed label set with declared synonyms (``synonym -> label``)."""

    name: str
    labels: tuple[str, ...]
    synonyms: dict[str, str] = field(default_factory=dict)

    def lookup(self, text: str) -> str | None:
        """The label ``text`` names exactly (label or declared synonym), else None."""
        key = _norm(text)
        # "surprise (negative)" may be written "surprise negative" or "surprise, negative"
        key_flat = re.sub(r"[(),]", " ", key)
        key_flat = re.sub(r"\s+", " ", key_flat).strip()
        for candidate in (key, key_flat):
            if candidate in self._table():
                return self._table()[candidate]
        return None

    def _table(self) -> dict[str, str]:
        table: dict[str, str] = {}
        for label in self.labels:
            n = _norm(label)
            table[n] = label
            flat = re.sub(r"\s+", " ", re.sub(r"[(),]", " ", n)).strip()
            table[flat] = label
        for syn, label in self.synonyms.items():
            table[_norm(syn)] = label
        return table

    def terms(self) -> list[tuple[str, str]]:
        """Every (surface form, label), longest surface first (for lenient search)."""
        pairs = sorted(self._table().items(), key=lambda kv: (-len(kv[0]), kv[0]))
        return pairs

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "labels": list(self.labels), "synonyms": dict(self.synonyms)}


CREMA_D_6 = Vocabulary(
    "crema-d-6",
    ("anger", "disgust", "fear", "happiness", "neutral", "sadness"),
    {
        "angry": "anger",
        "disgusted": "disgust",
        "fearful": "fear",
        "afraid": "fear",
        "scared": "fear",
        "happy": "happiness",
        "neutrality": "neutral",
        "no emotion": "neutral",
        "sad": "sadness",
    },
)
"""CREMA-D's six intended emotions (file codes ANG, DIS, FEA, HAP, NEU, SAD)."""

CREMA_D_CODES = {
    "ANG": "anger",
    "DIS": "disgust",
    "FEA": "fear",
    "HAP": "happiness",
    "NEU": "neutral",
    "SAD": "sadness",
    # single-letter vote codes of tabulatedVotes.csv
    "A": "anger",
    "D": "disgust",
    "F": "fear",
    "H": "happiness",
    "N": "neutral",
    "S": "sadness",
}

EMOTION_48_LABELS = (
    "admiration",
    "adoration",
    "aesthetic appreciation",
    "amusement",
    "anger",
    "anxiety",
    "awe",
    "awkwardness",
    "boredom",
    "calmness",
    "concentration",
    "confusion",
    "contemplation",
    "contempt",
    "contentment",
    "craving",
    "desire",
    "determination",
    "disappointment",
    "disgust",
    "distress",
    "doubt",
    "ecstasy",
    "embarrassment",
    "empathic pain",
    "entrancement",
    "envy",
    "excitement",
    "fear",
    "guilt",
    "horror",
    "interest",
    "joy",
    "love",
    "nostalgia",
    "pain",
    "pride",
    "realization",
    "relief",
    "romance",
    "sadness",
    "satisfaction",
    "shame",
    "surprise (negative)",
    "surprise (positive)",
    "sympathy",
    "tiredness",
    "triumph",
)

EMOTION_48 = Vocabulary(
    "emotion-48",
    EMOTION_48_LABELS,
    {
        "angry": "anger",
        "anxious": "anxiety",
        "amused": "amusement",
        "awkward": "awkwardness",
        "bored": "boredom",
        "calm": "calmness",
        "confused": "confusion",
        "contemplative": "contemplation",
        "contemptuous": "contempt",
        "content": "contentment",
        "determined": "determination",
        "disappointed": "disappointment",
        "disgusted": "disgust",
        "distressed": "distress",
        "doubtful": "doubt",
        "embarrassed": "embarrassment",
        "empathetic pain": "empathic pain",
        "entranced": "entrancement",
        "envious": "envy",
        "excited": "excitement",
        "afraid": "fear",
        "fearful": "fear",
        "scared": "fear",
        "guilty": "guilt",
        "horrified": "horror",
        "interested": "interest",
        "joyful": "joy",
        "nostalgic": "nostalgia",
        "proud": "pride",
        "realisation": "realization",
        "relieved": "relief",
        "romantic": "romance",
        "sad": "sadness",
        "satisfied": "satisfaction",
        "ashamed": "shame",
        "negative surprise": "surprise (negative)",
        "positive surprise": "surprise (positive)",
        "sympathetic": "sympathy",
        "tired": "tiredness",
        "triumphant": "triumph",
    },
)
"""The 48-label vocabulary (the RW-Voice-EQ emotion set); synonyms are adjective forms and
word-order variants only, declared here so that scoring never guesses."""

VOCABULARIES: dict[str, Vocabulary] = {v.name: v for v in (CREMA_D_6, EMOTION_48)}


def get_vocabulary(name: str) -> Vocabulary:
    """A built-in vocabulary by name (``crema-d-6``, ``emotion-48``), or a ``.json`` /
    ``.yaml`` file holding ``{name, labels: [...], synonyms: {synonym: label}}``."""
    if name in VOCABULARIES:
        return VOCABULARIES[name]
    if name.endswith((".json", ".yaml", ".yml")):
        return _vocabulary_file(name)
    raise InputError(
        f"unknown emotion vocabulary {name!r}; known: {', '.join(sorted(VOCABULARIES))} "
        "or a .json/.yaml file"
    )


def _vocabulary_file(path: str) -> Vocabulary:
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InputError(f"vocabulary file not found: {p}")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            from voxassay.core import yamlload

            data = yamlload.safe_load(text)
    except Exception as exc:
        raise InputError(f"vocabulary file {p} is not valid: {exc}") from None
    labels = data.get("labels") if isinstance(data, dict) else None
    synonyms = (data.get("synonyms") or {}) if isinstance(data, dict) else {}
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise InputError(f"vocabulary file {p} needs 'labels': a non-empty list of strings")
    if not isinstance(synonyms, dict) or any(v not in labels for v in synonyms.values()):
        raise InputError(f"vocabulary file {p}: every synonym must map to one of its labels")
    return Vocabulary(str(data.get("name") or p.stem), tuple(labels), dict(synonyms))

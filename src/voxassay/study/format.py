"""The study format: evals (questions), items (stimuli behind opaque ids), gold and trap items,
the headphone check and the rater profile.

A study folder holds ``study.json`` (this module's :class:`Study`), ``audio/`` (stimuli under
opaque names), ``study.db`` (the store, see :mod:`voxassay.study.store`) and, right after
``study create``, ``invites.txt`` (mode 0600). ``study.json`` names systems and source paths:
it is for the admin and the analysis, never served to raters.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from voxassay.core import jsonio
from voxassay.core.errors import InputError

RATING_COLUMNS_REQUIRED = ("rater", "item", "system", "eval", "score")
RATING_COLUMNS_OPTIONAL = (
    "timestamp",
    "response_ms",
    "gold_expected",
    "dimension",
    "kind",
    "system_b",
)
RATING_COLUMNS = RATING_COLUMNS_REQUIRED + RATING_COLUMNS_OPTIONAL
"""The long ratings format (export, import, analysis): one row per rating. Pairwise rows:
``system`` is side A, ``system_b`` side B, score 1 = A preferred, 0 = B, 0.5 = no preference."""

STUDY_FORMAT = "voxassay-study/1"
STUDY_FILE = "study.json"
DB_FILE = "study.db"
AUDIO_DIR = "audio"
INVITES_FILE = "invites.txt"

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"  # evals and profile fields we define
FREE_ID = r"^[^\x00-\x1f\x7f]{1,300}$"  # ids that may come from imported data
PREFER_NOT = "prefer not to say"

DEFAULT_PROFILE_FIELDS: list[dict[str, Any]] = [
    {
        "id": "age_band",
        "label": "Your age",
        "options": ["18-24", "25-34", "35-44", "45-54", "55-64", "65 or older"],
    },
    {
        "id": "language_background",
        "label": "The study's language is your",
        "options": ["first language", "second language (fluent)", "second language (learning)"],
    },
    {
        "id": "hearing",
        "label": "Your hearing",
        "options": [
            "no known hearing problems",
            "some hearing difficulty",
            "hearing aid or implant",
        ],
    },
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scale(_Model):
    """Answer range. Likert: integer points ``min..max`` with optional labels per point.
    Pairwise: always ``0..1`` (1 = A preferred, 0 = B, 0.5 = no preference)."""

    min: int = 1
    max: int = 5
    labels: dict[int, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Scale:
        if self.max <= self.min:
            raise ValueError(f"scale max ({self.max}) must be above min ({self.min})")
        if self.max - self.min > 100:
            raise ValueError("a scale may have at most 101 points")
        bad = [k for k in self.labels if not self.min <= k <= self.max]
        if bad:
            raise ValueError(f"labels for points outside {self.min}..{self.max}: {bad}")
        return self


class Eval(_Model):
    """One question: ``kind`` likert (one stimulus) or pairwise (A vs B)."""

    id: str = Field(pattern=FREE_ID)
    dimension: str = Field(min_length=1, max_length=300)
    kind: Literal["likert", "pairwise"] = "likert"
    question: str = Field(min_length=1, max_length=2000)
    scale: Scale = Field(default_factory=Scale)
    ties: bool = True  # pairwise: offer "no preference"

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") == "pairwise":
            data = dict(data)
            scale = data.get("scale") or {}
            if scale and (scale.get("min", 0), scale.get("max", 1)) != (0, 1):
                raise ValueError("a pairwise eval's scale is fixed at min 0, max 1")
            data["scale"] = {"min": 0, "max": 1}
        if isinstance(data, dict) and not data.get("dimension") and data.get("id"):
            data = {**data, "dimension": data["id"]}
        return data

    def valid_score(self, score: float) -> bool:
        """Likert: an integer point of the scale; pairwise: 0, 1 or (with ties) 0.5."""
        if self.kind == "pairwise":
            return score in (0.0, 1.0) or (self.ties and score == 0.5)
        return float(score).is_integer() and self.scale.min <= score <= self.scale.max


class Stimulus(_Model):
    """One audio file of an item. ``system`` and ``source`` are never shown to raters."""

    system: str
    audio: str  # path relative to the study folder (audio/<opaque>.wav)
    duration_s: float = 0.0
    source: str | None = None  # where it came from (file, bundle), admin only
    session: str | None = None  # duplex session id
    run: str | None = None  # run id


class Item(_Model):
    """A rated unit: ``single`` (one stimulus, likert evals) or ``pair`` (A, B: pairwise evals).

    ``gold`` maps eval id to the expected score (gold items and generated traps); pairwise
    expectations are in canonical terms (stimuli[0] is A).
    """

    id: str = Field(pattern=FREE_ID)
    kind: Literal["single", "pair"]
    stimuli: list[Stimulus] = Field(min_length=1, max_length=2)
    context: str = ""
    group: str | None = None
    key: str | None = None  # the source item's id or unit (scenario#repeat)
    gold: dict[str, float] | None = None
    trap: bool = False

    @model_validator(mode="after")
    def _check(self) -> Item:
        want = 1 if self.kind == "single" else 2
        if len(self.stimuli) != want:
            raise ValueError(f"a {self.kind} item needs {want} stimulus/stimuli")
        return self

    @property
    def system(self) -> str:
        return self.stimuli[0].system

    @property
    def system_b(self) -> str | None:
        return self.stimuli[1].system if self.kind == "pair" else None

    @property
    def eval_kind(self) -> str:
        return "likert" if self.kind == "single" else "pairwise"


class HeadphoneTrial(_Model):
    """Three tones; ``answer`` (1-3) is the one that is really quieter."""

    id: str
    audio: str
    answer: int = Field(ge=1, le=3)


class HeadphoneCheck(_Model):
    """Antiphase screening (three 200 Hz tones, one 6 dB quieter, one in antiphase)."""

    enabled: bool = True
    trials: list[HeadphoneTrial] = Field(default_factory=list)
    n_trials: int = Field(default=6, ge=1, le=20)
    pass_min: int = Field(default=5, ge=1)
    attempts: int = Field(default=2, ge=1, le=10)
    required: bool = True  # a rater who fails every attempt cannot go on
    calibration_audio: str | None = None


class ProfileField(_Model):
    id: str = Field(pattern=ID_PATTERN)
    label: str
    options: list[str] = Field(min_length=1)


class Profile(_Model):
    """Optional rater questionnaire (demographics for the report and screening)."""

    enabled: bool = True
    required: bool = False
    fields: list[ProfileField] = Field(
        default_factory=lambda: [ProfileField(**f) for f in DEFAULT_PROFILE_FIELDS]
    )


class GoldConfig(_Model):
    """Generated traps (degraded copies of study stimuli, given to every rater).

    ``expect`` maps eval id to the expected score; an eval left out gets the default (the
    scale minimum for likert, the clean side A for pairwise), ``null`` means no expectation
    (its trap ratings then carry no ``gold_expected`` and count as system ``_trap``).
    ``tolerance``: distance from the expectation that still counts as correct (default:
    1 point for likert, 0 for pairwise).
    """

    traps: int = Field(default=2, ge=0, le=50)
    expect: dict[str, float | None] | None = None
    tolerance: float | None = Field(default=None, ge=0)


class Questions(_Model):
    """The ``--questions`` YAML of ``study create``."""

    title: str = "Listening study"
    instructions: str = (
        "Please use headphones in a quiet room. Listen to each recording to the end, "
        "then answer the questions. There are no right or wrong answers."
    )
    context: str = ""  # shown with every item that has no context of its own
    evals: list[Eval] = Field(min_length=1)
    raters_per_item: int | None = Field(default=None, ge=1, le=1000)
    raters: int | None = Field(default=None, ge=1, le=100_000)
    items_per_rater: int = Field(default=50, ge=1, le=10_000)
    gold: GoldConfig = Field(default_factory=GoldConfig)
    headphone_check: HeadphoneCheck = Field(default_factory=HeadphoneCheck)
    profile: Profile = Field(default_factory=Profile)
    require_full_listen: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key in ("headphone_check", "profile"):
                if isinstance(data.get(key), bool):
                    data[key] = {"enabled": data[key]}
            if data.get("gold") is False:
                data["gold"] = {"traps": 0}
        return data

    @model_validator(mode="after")
    def _check(self) -> Questions:
        ids = [e.id for e in self.evals]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        odd = [i for i in ids if not re.match(ID_PATTERN, i)]
        if odd:
            raise ValueError(f"eval ids must be letters, digits and _.:- (max 64): {odd}")
        if dupes:
            raise ValueError(f"duplicate eval ids: {dupes}")
        unknown = sorted(set(self.gold.expect or {}) - set(ids))
        if unknown:
            raise ValueError(f"gold.expect names unknown evals: {unknown}")
        hc = self.headphone_check
        if hc.pass_min > hc.n_trials:
            raise ValueError("headphone_check.pass_min exceeds n_trials")
        return self


class Study(_Model):
    """``study.json``: the whole design. ``evals`` is read by the analysis as is."""

    format: str = STUDY_FORMAT
    study_id: str
    title: str
    instructions: str
    created_at: str
    seed: int | None = None
    raters_per_item: int
    n_raters: int
    evals: list[Eval]
    items: list[Item]
    headphone_check: HeadphoneCheck = Field(default_factory=lambda: HeadphoneCheck(enabled=False))
    profile: Profile = Field(default_factory=lambda: Profile(enabled=False))
    gold: GoldConfig = Field(default_factory=GoldConfig)
    require_full_listen: bool = True
    sources: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def eval_by_id(self) -> dict[str, Eval]:
        return {e.id: e for e in self.evals}

    def item_by_id(self) -> dict[str, Item]:
        return {i.id: i for i in self.items}

    def evals_for(self, item: Item) -> list[Eval]:
        """The evals a rater answers for ``item`` (likert for single, pairwise for pairs)."""
        return [e for e in self.evals if e.kind == item.eval_kind]

    def tolerance(self, ev: Eval) -> float:
        if self.gold.tolerance is not None:
            return self.gold.tolerance
        return 0.0 if ev.kind == "pairwise" else 1.0


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``field.path: message``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(top)"
        lines.append(f"  {loc}: {err.get('msg')}")
    return "\n".join(lines)


def load_questions(path: Path) -> Questions:
    """Read and validate the questions YAML; ``InputError`` lists every problem."""
    import yaml

    from voxassay.core import yamlload

    try:
        data = yamlload.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"questions file not found: {path}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read questions {path}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"questions {path}: expected a mapping with 'evals'")
    try:
        return Questions.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"invalid questions {path}:\n{format_validation_error(exc)}") from None


def load_study(study_dir: Path) -> Study:
    """Read ``STUDY_DIR/study.json``; ``InputError`` when it is missing or invalid."""
    path = Path(study_dir) / STUDY_FILE
    try:
        data = jsonio.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"not a study folder (no {STUDY_FILE}): {study_dir}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        return Study.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"invalid {path}:\n{format_validation_error(exc)}") from None


def save_study(study_dir: Path, study: Study) -> Path:
    """Write ``study.json`` atomically (temp file, fsync, rename)."""
    path = Path(study_dir) / STUDY_FILE
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(study.model_dump_json(indent=1, exclude_none=False))
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


MAX_INFERRED_POINTS = 101
"""An inferred likert scale may have at most this many points (0..100)."""


def infer_likert_scale(
    scores: list[tuple[int, float]],
) -> tuple[tuple[int, int], list[tuple[int, float]]]:
    """The likert scale (min, max) of the whole-number scores of ``(line, score)`` rows, and
    the rows refused because one row alone would stretch it: an extreme value held by a
    single row that more than doubles the width of what the other rows span (a 55 among
    1..5; among identical scores, one more than 10 away), or any value that makes the scale
    wider than ``MAX_INFERRED_POINTS``. (1, 5) when no row has a whole score."""
    whole = sorted((row for row in scores if float(row[1]).is_integer()), key=lambda r: r[1])
    refused: list[tuple[int, float]] = []
    while len(whole) >= 3:
        width = whole[-1][1] - whole[0][1]
        inner_lo = whole[1][1] - whole[0][1]  # what dropping the lowest row saves
        inner_hi = whole[-1][1] - whole[-2][1]
        rest = width - max(inner_lo, inner_hi)
        lone = (rest > 0 and width > 2 * rest) or (rest == 0 and width > 10)
        if not (lone or width + 1 > MAX_INFERRED_POINTS):
            break
        refused.append(whole.pop(-1 if inner_hi >= inner_lo else 0))
    if not whole:
        return (1, 5), refused
    lo, hi = int(whole[0][1]), int(whole[-1][1])
    if hi - lo + 1 > MAX_INFERRED_POINTS:
        return (1, 5), refused + whole
    return (lo, hi if hi > lo else lo + 1), refused


def stretch_reason(score: float, scale: tuple[int, int]) -> str:
    return (
        f"score {score:g} alone would stretch the likert scale inferred from the other rows "
        f"({scale[0]}..{scale[1]}); a typo? give the scale (--scale MIN,MAX or study.json)"
    )

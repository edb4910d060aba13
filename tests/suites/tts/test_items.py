"""The shipped TTS item sets and the loader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from voxassay.core.errors import InputError, ManifestError
from voxassay.suites.tts.items import (
    CONTRAST_FEATURES,
    DIMENSIONS,
    FINGERPRINTS,
    SCORES,
    TTS_ITEMS_VERSION,
    TTSItem,
    eval_table,
    items_fingerprint,
    load_item_set,
    to_item,
)

EVALS = {
    "performance": [
        "audiobook",
        "sports_commentary",
        "standup_comedy",
        "news",
        "customer_support",
        "childrens_story",
    ],
    "expressiveness": [
        "emotion_from_text",
        "emotion_instructed",
        "pragmatic_subtext",
        "sarcasm",
        "emotion_transitions",
    ],
    "identity_stress": ["across_emotions", "whisper_shout", "physical_states", "register_shifts"],
    "linguistic": ["code_switching", "loanwords_names", "heteronyms"],
    "critical_content": [
        "drug_doses",
        "alphanumeric_codes",
        "phone_numbers",
        "dates",
        "amounts",
        "addresses",
        "structured_data",
    ],
    "long_form": ["multi_paragraph"],
    "audio_quality": ["general_quality"],
}


@pytest.fixture(scope="module")
def default() -> tuple[dict, list[TTSItem]]:
    return load_item_set("default")


def test_dimensions_and_evals(default: tuple[dict, list[TTSItem]]) -> None:
    evals, _ = default
    assert list(DIMENSIONS) == list(EVALS)
    assert {d: [e.id for e in evals.values() if e.dimension == d] for d in DIMENSIONS} == EVALS
    for ev in evals.values():
        assert ev.question.strip() and ev.title.strip() and ev.description.strip()
        assert ev.scale == {"min": 1, "max": 5}
        assert set(ev.automatic) <= set(SCORES)
        assert (ev.primary is None) == (not ev.automatic)


def test_no_item_problems_and_unique_ids(default: tuple[dict, list[TTSItem]]) -> None:
    _, items = default
    assert [(it.id, it.problem) for it in items if it.problem] == []
    assert len({it.id for it in items}) == len(items)
    assert all(it.text.strip() for it in items)


def test_counts_per_eval(default: tuple[dict, list[TTSItem]]) -> None:
    evals, items = default
    rows = {r["id"]: r for r in eval_table("default")}
    for ev in evals.values():
        its = [it for it in items if it.eval == ev.id]
        if ev.automatic:
            assert rows[ev.id]["n_scored"] >= 20, ev.id
            assert len(its) >= 20
        else:
            assert len(its) >= 8, ev.id
    assert rows["audiobook"]["n_scored"] == 20 and rows["audiobook"]["n_items"] == 40


def test_contrasts_reference_neutral_partners(default: tuple[dict, list[TTSItem]]) -> None:
    evals, items = default
    by_id = {it.id: it for it in items}
    n = 0
    for it in items:
        if ev_primary(evals, it) == "prosody_following" and not _neutral(it):
            assert it.contrast is not None, it.id
        if it.contrast is None:
            continue
        n += 1
        ref = by_id[it.contrast["reference"]]
        assert _neutral(ref) and ref.contrast is None and ref.eval == it.eval
        assert ref.instructions is None
        assert it.contrast["expect"]
        for feat, direction in it.contrast["expect"].items():
            assert feat in CONTRAST_FEATURES and direction in ("up", "down")
        # same or nearly the same words: lengths within 40 %
        a, b = len(it.text.split()), len(ref.text.split())
        assert abs(a - b) <= 0.4 * max(a, b), it.id
    assert n >= 6 * 20 + 40


def test_expected_directions_follow_speech_science(default: tuple[dict, list[TTSItem]]) -> None:
    _, items = default
    for it in items:
        if not it.contrast:
            continue
        emo = it.labels.get("emotion")
        exp = it.contrast["expect"]
        if emo in ("anger", "joy", "excitement"):
            assert exp == {"f0_median": "up", "f0_range": "up", "energy": "up", "rate": "up"}
        if emo in ("sadness", "tiredness"):
            assert set(exp.values()) == {"down"}
        if emo == "whisper":
            assert exp["energy"] == "down"
        if emo == "shout":
            assert exp["energy"] == "up" and exp["f0_median"] == "up"
        if it.labels.get("role") == "sports_commentary":
            assert exp["rate"] == "up" and exp["energy"] == "up"


def test_role_and_instructed_items_have_instructions(
    default: tuple[dict, list[TTSItem]],
) -> None:
    _, items = default
    for it in items:
        if it.dimension == "performance" and it.labels["role"] != "neutral":
            assert it.instructions and it.instructions.startswith(("Read", "Perform", "Speak"))
        if it.eval == "emotion_from_text":
            assert it.instructions is None
        if it.eval == "emotion_instructed" and it.contrast:
            assert it.instructions and it.instructions.lower().startswith(
                ("say", "whisper", "shout")
            )


def test_identity_groups(default: tuple[dict, list[TTSItem]]) -> None:
    _, items = default
    groups: dict[str, list[TTSItem]] = {}
    for it in items:
        if it.dimension == "identity_stress":
            groups.setdefault(it.labels["group"], []).append(it)
    for gid, members in groups.items():
        anchors = [m for m in members if m.labels["condition"] == "neutral"]
        assert len(anchors) == 1, gid
        assert anchors[0].instructions is None
        assert len({m.eval for m in members}) == 1
        for m in members:
            if m is not anchors[0]:
                assert m.instructions
    non_anchor = Counter(
        it.eval
        for it in items
        if it.dimension == "identity_stress" and it.labels["condition"] != "neutral"
    )
    assert all(non_anchor[e] >= 20 for e in EVALS["identity_stress"]), non_anchor


def test_critical_and_linguistic_items(default: tuple[dict, list[TTSItem]]) -> None:
    _, items = default
    for it in items:
        for tok in it.critical_tokens:
            assert tok in it.text, (it.id, tok)
        if it.dimension == "critical_content" or it.eval == "loanwords_names":
            assert it.critical_tokens, it.id
        if it.eval == "heteronyms":
            assert it.labels["heteronym"] in it.text.lower() and it.labels["sense"]
    senses = Counter(it.labels["heteronym"] for it in items if it.eval == "heteronyms")
    for word in ("lead", "read", "live", "tear", "wind", "bass", "record", "object", "minute"):
        assert senses[word] >= 2


def test_long_form_passages(default: tuple[dict, list[TTSItem]]) -> None:
    _, items = default
    passages = [it for it in items if it.dimension == "long_form"]
    assert len(passages) >= 20
    for it in passages:
        assert it.segments and 3 <= len(it.segments) <= 5
        assert it.text == "\n\n".join(it.segments)
        lo, hi = (40, 100) if it.labels.get("length") == "short" else (120, 300)
        assert lo <= len(it.text.split()) <= hi, it.id
    # one short passage, for the quick demo; the quick set's long-form item is that one
    assert [it.id for it in passages if it.labels.get("length") == "short"] == ["long-00"]
    _, quick = load_item_set("quick")
    assert [it.id for it in quick if it.dimension == "long_form"] == ["long-00"]


def test_demo_subset_is_small_and_closed(default: tuple[dict, list[TTSItem]]) -> None:
    evals, demo = load_item_set("demo")
    ids = {it.id for it in demo}
    default_ids = {it.id for it in default[1]}
    assert ids <= default_ids
    assert sum(len(it.text.split()) for it in demo) < 2500
    by_id = {it.id: it for it in default[1]}
    for it in demo:
        if it.contrast:
            assert it.contrast["reference"] in ids, it.id
        if it.dimension == "identity_stress":
            anchors = [
                o.id
                for o in by_id.values()
                if o.labels.get("group") == it.labels["group"]
                and o.labels["condition"] == "neutral"
            ]
            assert anchors[0] in ids
    for ev in evals.values():
        its = [it for it in demo if it.eval == ev.id]
        scored = [
            it
            for it in its
            if (ev.primary != "prosody_following" or it.contrast)
            and (ev.primary != "identity" or it.labels.get("condition") != "neutral")
        ]
        if ev.automatic:
            # one per performance role, two per other eval, one long-form passage
            assert len(scored) >= (1 if ev.dimension in ("performance", "long_form") else 2), ev.id
    assert [it.id for it in demo if it.dimension == "long_form"] == ["long-00", "long-01"]
    assert len(demo) <= 60  # three demo systems in a few minutes


def test_version_fingerprint_pinned() -> None:
    assert FINGERPRINTS[TTS_ITEMS_VERSION] == items_fingerprint(), (
        "shipped item content changed: bump TTS_ITEMS_VERSION and record the new fingerprint"
    )


def test_only_filters_and_pulls_dependencies() -> None:
    evals, items = load_item_set("default", only=["sports_commentary"])
    assert {it.eval for it in items} == {"sports_commentary"} and set(evals) == {
        "sports_commentary"
    }
    _, items = load_item_set("default", only=["critical_content"])
    assert len(items) == 140
    _, items = load_item_set("default", only=["sport-0[12]"])
    assert {it.id for it in items} == {
        "sport-01",
        "sport-02",
        "sport-01-neutral",
        "sport-02-neutral",
    }
    _, items = load_item_set("demo", only=["id-06-whisper"])
    assert {it.id for it in items} == {"id-06-whisper", "id-06-neutral"}
    with pytest.raises(InputError, match="sports_commentary"):
        load_item_set("default", only=["sport_commentary"])


def test_unknown_set_name_lists_choices() -> None:
    with pytest.raises(InputError, match="default, demo"):
        load_item_set("defualt")


def test_set_file_errors_have_lines(tmp_path: Path) -> None:
    f = tmp_path / "mine.txt"
    f.write_text("# mine\ndose-01\neval:drug_dose\nnope-99\ndimension:long_form\n")
    with pytest.raises(ManifestError) as exc:
        load_item_set(str(f))
    msg = str(exc.value)
    assert f"{f}:3" in msg and "drug_dose" in msg and f"{f}:4" in msg
    f.write_text("dose-01\neval:dates\n")
    _, items = load_item_set(str(f))
    assert [it.id for it in items][:2] == ["dose-01", "date-01"] and len(items) == 21


def test_yaml_file_duplicate_ids_and_problems(tmp_path: Path) -> None:
    f = tmp_path / "own.yaml"
    f.write_text(
        "dimension: critical_content\n"
        "evals:\n"
        "  - id: my_codes\n"
        "    title: My codes\n"
        "    question: Are the codes right?\n"
        "    automatic: [critical_accuracy]\n"
        "    primary: critical_accuracy\n"
        "items:\n"
        "  - id: a\n"
        "    eval: my_codes\n"
        "    text: Code XY12.\n"
        "    critical_tokens: [XY12]\n"
        "  - id: a\n"
        "    eval: drug_doses\n"
        "    text: Take 5 mg.\n"
        "    critical_tokens: [50 mg]\n"
    )
    with pytest.raises(InputError) as exc:
        load_item_set(str(f))
    assert f"{f}:9" in str(exc.value) and f"{f}:13" in str(exc.value)
    f.write_text(f.read_text().replace("  - id: a\n    eval: drug", "  - id: b\n    eval: drug"))
    evals, items = load_item_set(str(f))
    assert set(evals) == {"my_codes", "drug_doses"}
    assert items[0].problem is None
    assert "not a substring" in (items[1].problem or "")
    assert to_item(items[1]).problem == items[1].problem


def test_yaml_structural_errors_with_lines(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "items:\n  - id: x\n    eval: dates\n    text: ok\n  - id: y\n    eval: datez\n    text: t\n"
    )
    with pytest.raises(ManifestError) as exc:
        load_item_set(str(f))
    assert f"{f}:5" in str(exc.value) and "dates" in str(exc.value)
    f.write_text("items: [\n")
    with pytest.raises(ManifestError, match="not valid YAML"):
        load_item_set(str(f))


def test_jsonl_manifest_round_trip_and_checks(tmp_path: Path) -> None:
    _, demo = load_item_set("demo", only=["etext-01", "id-01-joy"])
    f = tmp_path / "items.jsonl"
    f.write_text("".join(json.dumps(to_item(it).to_dict()) + "\n" for it in demo))
    evals, items = load_item_set(str(f))
    assert [it.to_dict() for it in items] == [it.to_dict() for it in demo]
    assert "emotion_from_text" in evals
    # a contrast whose partner is missing, and an identity group without its anchor
    lines = [json.dumps(it.to_dict()) for it in demo if not it.id.endswith("neutral")]
    f.write_text("\n".join(lines) + "\n")
    _, items = load_item_set(str(f))
    problems = {it.id: it.problem for it in items}
    assert "not in the set" in (problems["etext-01"] or "")
    assert "0 neutral anchors" in (problems["id-01-joy"] or "")
    f.write_text(lines[0] + "\n" + lines[0] + "\n")
    with pytest.raises(InputError, match=rf"{f.name}:2.*{f.name}:1"):
        load_item_set(str(f))


def test_to_item_shape() -> None:
    _, items = load_item_set("default", only=["dose-01", "long-01"])
    core = {it.id: to_item(it) for it in items}
    d = core["dose-01"]
    assert d.text == "Take atorvastatin 40 mg once a day in the evening."
    assert d.labels == {"dimension": "critical_content", "eval": "drug_doses"}
    assert d.meta["critical_tokens"] == ["atorvastatin 40 mg"]
    assert set(d.meta) == {"instructions", "critical_tokens", "contrast", "segments"}
    assert core["long-01"].meta["segments"] and core["long-01"].labels["eval"] == "multi_paragraph"


def ev_primary(evals: dict, it: TTSItem) -> str | None:
    return evals[it.eval].primary


def _neutral(it: TTSItem) -> bool:
    return it.labels.get("emotion") == "neutral" or it.labels.get("role") == "neutral"

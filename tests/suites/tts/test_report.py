"""The TTS report rebuilt from a hand-made run folder; every number checked by hand."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from voxassay.core.items import Item
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import RunStore
from voxassay.report.writer import json_safe
from voxassay.stats.intervals import wilson_interval
from voxassay.suites.tts.report import build_report
from voxassay.suites.tts.views import render_html, render_markdown

EVALS = {
    "drug_doses": {"dimension": "critical_content", "primary": "critical_accuracy",
                   "question": "Were the doses right?", "automatic": ["critical_accuracy"]},
    "heteronyms": {"dimension": "linguistic", "primary": "intelligibility",
                   "question": "Was it read right?", "automatic": ["intelligibility"]},
    "emotion_instructed": {"dimension": "expressiveness", "primary": "prosody_following",
                           "question": "Did it sound as asked?", "automatic": ["prosody_following"]},
    "whisper_shout": {"dimension": "identity_stress", "primary": "identity",
                      "question": "Same voice?", "automatic": ["identity"]},
    "multi_paragraph": {"dimension": "long_form", "primary": "longform_stability",
                        "question": "Stable voice?", "automatic": ["longform_stability"]},
    "general_quality": {"dimension": "audio_quality", "primary": "quality",
                        "question": "How clean?", "automatic": ["quality"]},
    "audiobook": {"dimension": "performance", "primary": None,
                  "question": "Would you listen to this audiobook?", "automatic": []},
}  # fmt: skip

NEUTRAL = {"f0_median_st": 10.0, "f0_range_st": 5.0, "energy_db": -20.0, "rate_sps": 4.0,
           "pause_ratio": 0.1}  # fmt: skip
ANCHOR = [1.0, 0.0, 0.0]
SPEAKER_REASON = "resemblyzer not installed"


def _item(iid: str, ev: str, text: str = "some text", **kw: Any) -> Item:
    labels = {"dimension": EVALS[ev]["dimension"], "eval": ev, **kw.pop("labels", {})}
    meta = {
        "instructions": kw.pop("instructions", None),
        "critical_tokens": kw.pop("critical_tokens", []),
        "contrast": kw.pop("contrast", None),
        "segments": None,
    }
    return Item(id=iid, text=text, labels=labels, meta=meta)


ITEMS = [
    _item("c1", "drug_doses", "Take 40 mg.", critical_tokens=["40 mg"]),
    _item("c2", "drug_doses", "Code AB79XQ2."),
    _item("c3", "drug_doses", "Dial 5."),
    _item("l1", "heteronyms"),
    _item("l2", "heteronyms"),
    _item("n1", "emotion_instructed", labels={"emotion": "neutral"}),
    _item("e1", "emotion_instructed", labels={"emotion": "happy"}, instructions="Sound happy.",
          contrast={"reference": "n1", "expect": {"f0_median": "up", "energy": "up"}}),
    _item("e2", "emotion_instructed", labels={"emotion": "sad"}, instructions="Sound sad.",
          contrast={"reference": "n1", "expect": {"rate": "down"}}),
    _item("a1", "whisper_shout", labels={"group": "g1", "condition": "neutral"}),
    _item("s1", "whisper_shout", labels={"group": "g1", "condition": "whisper"}),
    _item("s2", "whisper_shout", labels={"group": "g1", "condition": "shout"}),
    _item("lf1", "multi_paragraph"),
    _item("q1", "general_quality"),
    _item("q2", "general_quality"),
    _item("p1", "audiobook"),
]  # fmt: skip


def _rec(system: str, iid: str, metrics: dict[str, float], **output: Any) -> Record:
    return Record(
        id=iid,
        system=system,
        metrics=metrics,
        output={"audio_path": f"audio/{system}/{iid}.wav", "asr_text": f"heard {iid}", **output},
        timing={"compute_s": 0.5, "audio_s": 2.0},
    )


def _system(
    name: str,
    crit: dict[str, tuple[int, int]],
    wer: dict[str, int],
    emo: dict[str, dict[str, float]],
    emb: dict[str, list[float]] | None,
    lf_min: float | None,
    dns: dict[str, float],
) -> list[Record]:
    recs = []
    for iid, (ok, tot) in crit.items():
        recs.append(
            _rec(
                name,
                iid,
                {"critical_ok": ok, "critical_total": tot, "wer_errors": tot - ok,
                 "wer_words": 5, "cer_errors": 2 * (tot - ok), "cer_chars": 20},
                critical=[{"token": f"tok{k}", "ok": k < ok, "heard": "x"} for k in range(tot)],
            )
        )  # fmt: skip
    for iid, errors in wer.items():
        recs.append(_rec(name, iid, {"wer_errors": errors, "wer_words": 10}))
    recs.append(_rec(name, "n1", dict(NEUTRAL), instructions_sent=False))
    for iid, change in emo.items():
        recs.append(_rec(name, iid, {**NEUTRAL, **change}, instructions_sent=False))
    for iid in ("a1", "s1", "s2"):
        if emb is None:
            recs.append(_rec(name, iid, {}, unavailable={"speaker": SPEAKER_REASON}))
        else:
            recs.append(_rec(name, iid, {}, embedding=emb[iid]))
    if lf_min is None:
        recs.append(_rec(name, "lf1", {}, unavailable={"longform_speaker": SPEAKER_REASON}))
    else:
        recs.append(
            _rec(name, "lf1", {"longform_sim_min": lf_min, "longform_sim_mean": 0.9,
                               "longform_rate_drift": 0.1, "longform_loudness_drift_db": 1.5})
        )  # fmt: skip
    for iid, ovrl in dns.items():
        recs.append(
            _rec(name, iid, {"dnsmos_ovrl": ovrl, "clipping_fraction": 0.01 if iid == "q1" else 0,
                             "rate_ok": 1.0 if iid == "q1" else 0.0})
        )  # fmt: skip
    recs.append(_rec(name, "p1", {"wer_errors": 0, "wer_words": 4}))
    return recs


def records(judge: bool = True) -> list[Record]:
    a = _system(
        "sysA",
        {"c1": (2, 2), "c2": (1, 3), "c3": (0, 1)},
        {"l1": 1, "l2": 12},
        {"e1": {"f0_median_st": 11.0, "energy_db": -19.5}, "e2": {"rate_sps": 3.6}},
        {"a1": ANCHOR, "s1": [0.8, 0.6, 0.0], "s2": [-1.0, 0.0, 0.0]},
        0.7,
        {"q1": 3.0, "q2": 4.2},
    )
    b = _system(
        "sysB",
        {"c1": (2, 2), "c2": (3, 3)},
        {"l1": 0, "l2": 5},
        {"e1": {}, "e2": {}},
        None,
        None,
        {"q1": 2.0, "q2": 2.2},
    )
    b.append(error_record("c3", "sysB", 0, "synthesis_failed", "engine crashed"))
    c = _system(
        "sysC",
        {"c1": (1, 2), "c2": (0, 3), "c3": (1, 1)},
        {"l1": 2, "l2": 3},
        {"e1": {"f0_median_st": 11.0, "energy_db": -18.0}, "e2": {"rate_sps": 4.4}},
        {"a1": ANCHOR, "s1": [0.6, 0.8, 0.0], "s2": [0.0, 1.0, 0.0]},
        0.9,
        {"q1": 5.0, "q2": 1.0},
    )
    if judge:
        for r in a:
            if r.id == "p1":
                r.output["judge"] = {"spec": "fake", "score": 4.0, "status": "ok", "raw": "4"}
            if r.id == "q1":
                r.output["judge"] = {"spec": "fake", "score": None, "status": "unparseable",
                                     "raw": "great"}  # fmt: skip
    return a + b + c


def make_run(tmp_path: Path, recs: list[Record], systems: list[str]) -> RunStore:
    config = {
        "items": "test",
        "items_version": "t1",
        "systems": systems,
        "metrics_version": "tts-metrics-test",
        "evals": EVALS,
        "judge": None,
    }
    store = RunStore.create(tmp_path, "tts", config, ITEMS)
    info = store.info()
    info["systems"] = {
        "sysA": {"describe": {"instructions": "sent as a style prompt"}},
        "sysB": {"describe": {"instructions": "ignored: no instruction control"}},
    }
    store.write_info(info)
    store.append_many(recs)
    store.close()
    return store


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ttsrun")
    store = make_run(tmp, records(), ["sysA", "sysB", "sysC"])
    wav = store.path / "audio" / "sysA" / "c2.wav"
    wav.parent.mkdir(parents=True)
    if shutil.which("espeak-ng"):
        subprocess.run(["espeak-ng", "-w", str(wav), "Code A B 7 9"], check=True, timeout=30)
    return store, build_report(store, n_boot=300)


def _sys(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["systems"] if s["system"] == name)


def _group(s: dict[str, Any], group: str, name: str) -> dict[str, Any]:
    return next(g for g in s["groups"] if g["group"] == group and g["name"] == name)


def test_eval_and_dimension_scores_by_hand(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run
    a, b, c = (_sys(rep, s) for s in ("sysA", "sysB", "sysC"))
    # critical content: corpus ratio (2 + 1 + 0) / (2 + 3 + 1)
    g = _group(a, "eval", "drug_doses")
    assert g["score"] == pytest.approx(3 / 6) and g["n"] == 3
    assert g["ci_lo"] <= g["score"] <= g["ci_hi"]
    assert g["raw"]["critical_accuracy"]["value"] == pytest.approx(0.5)
    assert (g["raw"]["critical_accuracy"]["ci_lo"], g["raw"]["critical_accuracy"]["ci_hi"]) == (
        wilson_interval(3, 6)
    )
    # corpus WER (1 + 2 + 1) / 15 and CER (2 + 4 + 2) / 60 of the critical items
    assert g["raw"]["wer"]["value"] == pytest.approx(3 / 15)
    assert g["raw"]["cer"]["value"] == pytest.approx(6 / 60)
    # intelligibility: mean of 1 - 1/10 and 1 - min(1, 12/10)
    assert _group(a, "eval", "heteronyms")["score"] == pytest.approx((0.9 + 0.0) / 2)
    # prosody: e1 meets f0 (+1 st) but not energy (+0.5 dB), e2 meets rate (-10 %)
    assert _group(a, "eval", "emotion_instructed")["score"] == pytest.approx((0.5 + 1.0) / 2)
    assert _group(a, "eval", "emotion_instructed")["n_reference"] == 1
    # identity: cos 0.8 and max(0, -1)
    assert _group(a, "eval", "whisper_shout")["score"] == pytest.approx(0.4)
    assert _group(a, "eval", "multi_paragraph")["score"] == pytest.approx(0.7)
    # quality: ((3 - 1) / 4 + (4.2 - 1) / 4) / 2
    assert _group(a, "eval", "general_quality")["score"] == pytest.approx((0.5 + 0.8) / 2)
    q = _group(a, "eval", "general_quality")["raw"]
    assert q["dnsmos_ovrl"]["value"] == pytest.approx(3.6)
    assert q["artifacts"]["clipping"]["value"] == pytest.approx(0.5)
    assert q["rate_ok"]["value"] == pytest.approx(0.5)
    # dimension = its one automatic eval here
    assert _group(a, "dimension", "critical_content")["score"] == pytest.approx(0.5)
    # sysB: its error on c3 is counted, not scored: (2 + 3) / (2 + 3)
    gb = _group(b, "eval", "drug_doses")
    assert gb["score"] == pytest.approx(1.0) and gb["n"] == 2 and gb["n_error"] == 1
    assert _group(b, "eval", "heteronyms")["score"] == pytest.approx(0.75)
    assert _group(b, "eval", "emotion_instructed")["score"] == pytest.approx(0.0)
    assert _group(c, "eval", "drug_doses")["score"] == pytest.approx(2 / 6)
    assert _group(c, "eval", "emotion_instructed")["score"] == pytest.approx(0.5)
    assert _group(c, "eval", "whisper_shout")["score"] == pytest.approx(0.3)
    # humans-only eval has no score
    ga = _group(a, "eval", "audiobook")
    assert ga["humans_only"] and ga["score"] is None


def test_errors_counted_and_unavailable_reported(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run
    b = _sys(rep, "sysB")
    o = b["overall"]
    assert o["n_error"] == 1 and o["errors_by_kind"] == {"synthesis_failed": 1}
    assert o["n_records"] == 15 and o["n_ok"] == 14
    # identity (s1, s2) and long form unscored with the speaker reason; a1 is a reference
    gi = _group(b, "eval", "whisper_shout")
    assert gi["n"] == 0 and gi["n_unscored"] == 2 and gi["n_reference"] == 1
    assert math.isnan(gi["score"])
    assert all(SPEAKER_REASON in r for r in gi["unscored_reasons"])
    assert o["n_unscored"] == 3
    assert any(
        st.startswith("speaker similarity unavailable (3/14 items)") and SPEAKER_REASON in st
        for st in o["unavailable_statements"]
    )
    md = render_markdown(json_safe(rep))
    assert "speaker similarity unavailable (3/14 items): resemblyzer not installed" in md
    assert "synthesis_failed: 1" in md


def test_instruction_statements(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run
    a, b, c = (_sys(rep, s)["instructions"] for s in ("sysA", "sysB", "sysC"))
    assert b["ignores_instructions"] and not a["ignores_instructions"]
    assert not c["ignores_instructions"]
    assert "this system ignores style instructions" in b["statement"]
    assert "this system ignores style instructions" not in a["statement"]
    assert b["accepts_instructions"] is False and a["accepts_instructions"] is True
    assert c["accepts_instructions"] is None
    assert a["met"] == 2 and a["expected"] == 3
    assert (a["ci_lo"], a["ci_hi"]) == wilson_interval(2, 3)
    assert a["features"]["energy"]["mean_abs_change"] == pytest.approx(0.5)
    assert a["features"]["rate"]["met"] == 1
    md = render_markdown(json_safe(rep))
    html = render_html(json_safe(rep), None)
    for text in (md, html):
        assert "sysB: this system ignores style instructions" in text
        assert "sysA: this system ignores" not in text


def test_profile_paired_and_leadership(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run
    prof = rep["profile"]
    assert prof["dimensions"] == [
        "expressiveness",
        "identity_stress",
        "linguistic",
        "critical_content",
        "long_form",
        "audio_quality",
    ]
    assert prof["matrix"]["sysC"]["linguistic"]["score"] == pytest.approx(0.75)
    assert [h["eval"] for h in prof["humans_only"]] == ["audiobook"]
    # paired on the same items: c3 failed for sysB, so drug_doses pairs c1, c2 only
    p = next(
        x
        for x in rep["paired"]
        if x["a"] == "sysA"
        and x["b"] == "sysB"
        and x["group"] == "eval"
        and x["name"] == "drug_doses"
    )
    assert p["n"] == 2 and p["a_score"] == pytest.approx(3 / 5) and p["diff"] == pytest.approx(-0.4)
    assert p["ci_lo"] <= p["diff"] <= p["ci_hi"]
    pd = next(
        x
        for x in rep["paired"]
        if x["a"] == "sysA"
        and x["b"] == "sysB"
        and x["group"] == "dimension"
        and x["name"] == "linguistic"
    )
    assert pd["diff"] == pytest.approx(0.45 - 0.75)
    # correlation across 3 systems; critical ranks (2,3,1) vs audio quality (3,1,2): -0.5
    corr = rep["leadership"]["correlation"]
    assert corr["status"] == "ok"
    dims = corr["dimensions"]
    rho = corr["matrix"][dims.index("critical_content")][dims.index("audio_quality")]["rho"]
    assert rho == pytest.approx(-0.5)
    rho2 = corr["matrix"][dims.index("critical_content")][dims.index("linguistic")]["rho"]
    assert rho2 == pytest.approx(0.0, abs=1e-12)
    tops = rep["leadership"]["top_k"]
    assert set(tops["linguistic"]["top"]) == {"sysA", "sysB", "sysC"}  # <= 5 systems: all in
    assert tops["identity_stress"]["ranked"] == ["sysA", "sysC"]  # sysB has no score
    # two or three items per eval give wide CIs: sysC's overlaps the best everywhere a leader
    # can be named; long form has one item per system: no interval, so no leader (a one-item
    # "interval" used to make the higher point the leader)
    assert tops["long_form"]["leaders"] == []
    assert all("sysC" in t["leaders"] for d, t in tops.items() if d != "long_form")
    statement = rep["leadership"]["statement"]
    assert statement.startswith("sysA, sysC lead(s) or tie(s) for first")
    assert "long_form: no leader" in statement


def test_lead_statement() -> None:
    from voxassay.suites.tts.report import lead_statement

    tops = {
        "x": {"ranked": ["A", "B"], "leaders": ["A"]},
        "y": {"ranked": ["B", "A"], "leaders": ["B"]},
    }
    st = lead_statement(["A", "B"], tops)
    assert (
        st == "No system leads everywhere. Leaders (tied by CI overlap) per dimension: x: A; y: B."
    )
    tops["y"]["leaders"] = ["B", "A"]
    assert lead_statement(["A", "B"], tops).startswith("A lead(s) or tie(s)")
    assert lead_statement(["A"], tops).startswith("One system only")
    # a dimension where nobody can lead (one item, or all at 0) is said, never a tie of all
    tops["z"] = {"ranked": ["A", "B"], "leaders": []}
    st = lead_statement(["A", "B"], tops)
    assert st.startswith("A lead(s) or tie(s)") and "z: no leader" in st
    for t in tops.values():
        t["leaders"] = []
    assert lead_statement(["A", "B"], tops).startswith("No dimension has a leader")


def test_no_overall_score_anywhere(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run

    def keys(obj: Any) -> list[str]:
        if isinstance(obj, dict):
            return [k for k, v in obj.items() for k in [k, *keys(v)]]
        if isinstance(obj, list):
            return [k for v in obj for k in keys(v)]
        return []

    assert not [k for k in keys(rep) if "overall" in k.lower() and k != "overall"]
    for s in rep["systems"]:
        assert not {"score", "mean", "value"} & set(s["overall"])
    assert rep["suite"] == "tts" and rep["metrics_version"] == "tts-metrics-test"


def test_html_heatmap_players_and_judge(run: tuple[RunStore, dict[str, Any]]) -> None:
    store, rep = run
    html = render_html(json_safe(rep), store)
    assert "style='background:hsl(" in html  # the profile table, shaded by score
    # the worst critical item of sysA is c3 (0/1), then c2 (1/3) with its real audio
    worst = [w for w in _sys(rep, "sysA")["worst_items"] if w["kind"] == "critical"]
    assert [w["id"] for w in worst] == ["c3", "c2"]
    assert worst[1]["asr_text"] == "heard c2" and worst[1]["score"] == pytest.approx(1 / 3)
    if shutil.which("espeak-ng"):
        assert "data:audio/ogg; codecs=opus;base64," in html
    assert "audio file not found" in html  # c3's audio is missing: said, not a crash
    contrast = [w for w in _sys(rep, "sysB")["worst_items"] if w["kind"] == "contrast"]
    assert {w["id"] for w in contrast} == {"e1", "e2"}
    j = _sys(rep, "sysA")["judge"]
    assert j["available"] and j["unparseable"] == 1
    ev = {e["eval"]: e for e in j["evals"]}
    assert ev["audiobook"]["mean"] == 4.0 and ev["audiobook"]["n"] == 1
    assert not _sys(rep, "sysB")["judge"]["available"]
    assert "No judge was available" in render_markdown(json_safe(rep))


def test_identity_and_longform_blocks(run: tuple[RunStore, dict[str, Any]]) -> None:
    _, rep = run
    conds = {r["condition"]: r for r in _sys(rep, "sysA")["identity"]["conditions"]}
    assert conds["whisper"]["cosine"] == pytest.approx(0.8)
    assert conds["shout"]["cosine"] == pytest.approx(-1.0)  # raw cosine, not clipped
    lf = _sys(rep, "sysA")["long_form"]
    assert lf["items"][0]["longform_sim_min"] == 0.7
    assert lf["means"]["longform_rate_drift"]["mean"] == pytest.approx(0.1)


def test_identical_rebuild_and_human_validation_files(tmp_path: Path) -> None:
    recs = [r for r in records(judge=False) if r.system != "sysC"]
    store = make_run(tmp_path, recs, ["sysA", "sysB"])
    r1 = json_safe(build_report(store, n_boot=200))
    r2 = json_safe(build_report(RunStore.open(store.path), n_boot=200))
    r1.pop("generated_at")
    r2.pop("generated_at")
    assert json.dumps(r1, sort_keys=True) == json.dumps(r2, sort_keys=True)
    assert r1["leadership"]["correlation"]["status"] == "too_few_systems"
    assert "No judge was available" in " ".join(r1["notes"])
    md = render_markdown(r1)
    assert "Not read: 2 system(s)" in md
    human = {
        "source": "study-x",
        "evals": {
            "audiobook": {
                "dimension": "performance",
                "systems": {"sysA": {"mean": 3.75, "ci_lo": 3.5, "ci_hi": 4.0, "n": 30}},
                "judge_agreement": {"spearman": 0.42, "ci_lo": 0.1, "ci_hi": 0.7, "n": 30},
            }
        },
    }
    (store.path / "human.json").write_text(json.dumps(human))
    (store.path / "validation.json").write_text("{not json")
    r3 = json_safe(build_report(store, n_boot=200))
    assert r3["profile"]["humans_only"][0]["human"]["systems"]["sysA"]["mean"] == 3.75
    assert any("validation.json could not be read" in n for n in r3["notes"])
    md3 = render_markdown(r3)
    assert "sysA: 3.750 [3.500, 4.000]" in md3 and "0.420" in md3
    html3 = render_html(r3, store)
    assert "sysA: 3.750 [3.500, 4.000]" in html3


def test_no_leader_at_zero_or_from_one_item() -> None:
    """top_k: the best at 0.000 leads nothing; a best without an interval (one item) leads
    nothing; a one-item dimension score has no interval (issue 32)."""
    from voxassay.suites.tts.profile import Unit, dimension_score, top_k

    zero = {
        "A": {"score": 0.0, "ci_lo": 0.0, "ci_hi": 0.0},
        "B": {"score": 0.0, "ci_lo": 0.0, "ci_hi": 0.0},
    }
    assert top_k(zero)["leaders"] == []
    one = {"A": {"score": 0.9, "ci_lo": math.nan, "ci_hi": math.nan}, "B": {"score": 0.7}}
    assert top_k(one)["leaders"] == []
    d = dimension_score({"e": [Unit("i1", 0.5, 1.0)]})
    assert d["score"] == 0.5 and math.isnan(d["ci_lo"]) and math.isnan(d["ci_hi"])

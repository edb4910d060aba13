"""Every system spec is checked before any work starts (issue 14, part 1): a typo, a
credential in a URL, a bad harness key or a missing extra is exit 2 with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_manifest
from voxassay.cli.main import main
from voxassay.core.errors import BackendUnavailable, SpecError
from voxassay.core.registry import REGISTRY, BackendInfo, Registry
from voxassay.core.specs import HARNESS_OPTIONS, is_harness_option, parse_spec


def _manifest(tmp_path: Path) -> Path:
    return make_manifest(tmp_path / "m.jsonl", limit=2)


def _exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    code = exc.value.code
    return int(code) if code is not None else 0


@pytest.mark.parametrize(
    ("command", "spec", "needle"),
    [
        ("asr", "faster-whisper?beam_sise=5", "faster-whisper transcribe option(s) beam_sise"),
        ("asr", "openai-compat:http://127.0.0.1:9/v1?modle=x", "modle"),
        ("asr", "pocketsphinx?no_such_key=1", "no_such_key"),
        ("asr", "faster-whisper?num_cpus=two", "num_cpus='two'"),
        ("asr", "faster-whisper?num_gpus=-1", "num_gpus=-1.0"),
        ("tts", "piper?lenght_scale=1.1", "lenght_scale"),
    ],
)
def test_a_bad_spec_is_exit_2_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, spec: str, needle: str
) -> None:
    out = tmp_path / "runs"
    if command == "asr":
        argv = ["asr", "run", "-m", str(_manifest(tmp_path)), "-s", spec, "--out", str(out)]
    else:
        argv = ["tts", "run", "--system", spec, "--out", str(out), "--no-progress"]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err
    assert not out.exists()  # no half run folder


def test_credentials_in_a_spec_url_are_refused_without_repeating_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    spec = "openai-compat:http://bob:hunter2@127.0.0.1:9/v1?model=x"
    argv = ["asr", "run", "-m", str(_manifest(tmp_path)), "-s", spec, "--out", str(out)]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "credentials" in err and "environment" in err
    assert "hunter2" not in err and "bob" not in err
    assert not out.exists()
    for raw in (
        "ws://u:p@127.0.0.1:1/v1",
        "realtime:wss://token@host/x",
        "python:m:f?u=http://a@b",
    ):
        with pytest.raises(SpecError, match="credentials"):
            parse_spec(raw)
    # an @ that is not in a URL's authority is not a credential
    assert parse_spec("python:pkg.mod:make?tag=a@b").options == {"tag": "a@b"}


def test_harness_keys_are_accepted_by_every_backend_without_declaring_them() -> None:
    assert set(HARNESS_OPTIONS) == {"name", "num_cpus", "num_gpus", "route", "turn"}
    assert is_harness_option("turn_pass_env") and not is_harness_option("environment")
    keys = "name=fw&num_cpus=2&num_gpus=0&route=relay&turn=t1&turn_user_env=TURN_USER"
    for capability, spec in [
        ("transcribe", f"faster-whisper?{keys}"),
        ("transcribe", f"mock:fixed?text=hi&{keys}"),
        ("synthesize", f"espeak-ng:en-us?{keys}"),
        ("duplex", f"echo?{keys}"),
        ("duplex", f"realtime:ws://127.0.0.1:9/v1?turn_detection=manual&{keys}"),
    ]:
        assert REGISTRY.check(capability, spec).options["num_cpus"] == "2"
    # in a bare URL the harness's keys are taken out, never sent to the server
    link = REGISTRY.build("duplex", f"ws://127.0.0.1:9/v1?model=m&turn_detection=manual&{keys}")
    assert link.url == "ws://127.0.0.1:9/v1?model=m" and link.options == {"turn": "manual"}
    # a backend's own unknown key is still refused beside them
    with pytest.raises(SpecError, match="beam_sise"):
        REGISTRY.check("transcribe", f"faster-whisper?beam_sise=2&{keys}")


def test_a_missing_extra_is_exit_2_with_the_pip_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = Registry()
    registry.register_backend(
        BackendInfo(
            "needs-extra",
            ("transcribe",),
            "voxassay.systems.mock:build",
            requires=("voxassay_module_that_is_not_installed",),
            extra="needs-extra",
        )
    )
    with pytest.raises(BackendUnavailable, match=r"pip install 'voxassay\[needs-extra\]'"):
        registry.check("transcribe", "needs-extra")
    monkeypatch.setattr(REGISTRY, "_backends", {**REGISTRY._backends, **registry._backends})
    out = tmp_path / "runs"
    argv = ["asr", "run", "-m", str(_manifest(tmp_path)), "-s", "needs-extra", "--out", str(out)]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "pip install 'voxassay[needs-extra]'" in err and "Traceback" not in err
    assert not out.exists()


def test_a_good_spec_still_runs(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    table = {json.loads(line)["id"]: "x" for line in manifest.read_text().splitlines()}
    out = tmp_path / "runs"
    spec = "mock:fixed?text=hello&name=m&num_cpus=1"
    argv = ["asr", "run", "-m", str(manifest), "-s", spec, "--out", str(out)]
    assert _exit_code(argv) == 0
    (run,) = out.iterdir()
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == len(table) and {r["status"] for r in records} == {"ok"}


# --------------------------------------------------------------------------- failures


def _run(tmp_path: Path, *args: str) -> int:
    """``asr run`` on four real recordings into ``tmp_path/runs``; the exit code."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    manifest = make_manifest(tmp_path / "m4.jsonl", limit=4)
    out = tmp_path / "runs"
    return _exit_code(
        ["asr", "run", "-m", str(manifest), "--out", str(out), "--no-progress", *args]
    )


@pytest.mark.live  # a connection to a closed port on 127.0.0.1
def test_a_system_that_fails_every_item_exits_1_with_its_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = "openai-compat:http://127.0.0.1:9/v1?model=x&retries=0&timeout=5"
    code = _run(tmp_path, "-s", spec, "-s", "mock:fixed?text=hello")
    cap = capsys.readouterr()
    assert code == 1
    assert f"{spec}: 4/4 failed: system_load: " in cap.err and "Connection refused" in cap.err
    assert "mock:fixed?text=hello:" not in cap.err  # a system with no failure prints nothing
    assert "exit 1: a system failed every item" in cap.err
    # the run folder is still written and is the last stdout line
    (run,) = (tmp_path / "runs").iterdir()
    assert cap.out.strip().splitlines()[-1] == str(run)
    assert (run / "report.json").exists()


def test_partial_failures_exit_0_with_the_summary_unless_beyond_max_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = "mock:fixed?text=hello&fail_every=3"  # the load's warm-up call is call 1
    code = _run(tmp_path / "a", "-s", spec)
    err = capsys.readouterr().err
    assert code == 0
    (line,) = [x for x in err.splitlines() if x.startswith(f"{spec}:")]
    assert line.startswith(f"{spec}: 1/4 failed: system: RuntimeError: mock failure")
    assert _run(tmp_path / "b", "-s", spec, "--max-failures", "0.25") == 0  # 1/4 is not > 0.25
    capsys.readouterr()
    assert _run(tmp_path / "c", "-s", spec, "--max-failures", "0.2") == 1
    assert "more than 0.2 of its items" in capsys.readouterr().err
    assert _run(tmp_path / "d", "-s", spec, "--max-failures", "1.5") == 2
    assert not (tmp_path / "d" / "runs").exists()


def test_the_failure_rule_counts_no_unscored_record() -> None:
    from voxassay.core.failures import tally
    from voxassay.core.records import Record, error_record

    recs = [
        Record("a", "s", 0),
        error_record("b", "s", 0, "timeout", "hung", status="timeout"),
        error_record("c", "s", 0, "reference", "no text", status="unscored"),
        error_record("d", "s", 0, "parse", "junk\nmore", status="unparseable"),
        error_record("e", "s", 0, "parse", "junk", status="unparseable"),
        error_record("f", "t", 0, "x", "only unscored", status="unscored"),
    ]
    (s, t) = tally(recs)
    assert (s.attempted, s.failed, s.rate) == (4, 3, 0.75)
    assert s.reasons.most_common(1) == [("parse: junk", 2)]
    assert s.fails(None) is False and s.fails(0.7) is True and s.fails(0.75) is False
    assert (t.attempted, t.failed, t.rate, t.fails(0.0)) == (0, 0, None, False)


# --------------------------------------------------------------------------- option tables


@pytest.mark.parametrize(
    ("capability", "spec"),
    [
        ("transcribe", "faster-whisper"),
        ("transcribe", "mock:fixed?text=x"),
        ("transcribe", "openai-compat:http://127.0.0.1:9/v1"),
        ("synthesize", "openai-compat:http://127.0.0.1:9/v1"),
        ("understand", "openai-compat:http://127.0.0.1:9/v1"),
        ("synthesize", "piper"),
        ("synthesize", "espeak-ng:en-us"),
        ("duplex", "reference:careful"),
        ("duplex", "realtime:ws://127.0.0.1:9/v1"),
        ("duplex", "echo"),
        ("duplex", "energy"),
        ("understand", "dnsmos-human"),
        ("understand", "resemblyzer"),
    ],
)
def test_every_backend_refuses_a_key_outside_its_table(capability: str, spec: str) -> None:
    info = REGISTRY.backend(capability, parse_spec(spec).backend)
    if info.missing():
        pytest.skip(f"{info.name} is not installed here ({info.install_hint()})")
    REGISTRY.check(capability, spec)  # the spec itself is fine
    sep = "&" if "?" in spec else "?"
    with pytest.raises(SpecError, match="zz_typo"):
        REGISTRY.check(capability, f"{spec}{sep}zz_typo=1")
    # a key of the table for another capability is refused too
    others = {o.name for o in info.options} - {o.name for o in info.options_for(capability)}
    for key in sorted(others)[:1]:
        with pytest.raises(SpecError, match=key):
            REGISTRY.check(capability, f"{spec}{sep}{key}=1")


def test_no_backend_gives_a_harness_key_another_meaning() -> None:
    for info in REGISTRY.backends():
        for o in info.options:
            assert o.name not in HARNESS_OPTIONS, (info.name, o.name)
            assert o.kind in ("str", "int", "float", "bool"), (info.name, o.name)
            assert o.help, (info.name, o.name)


def test_ls_backend_prints_its_option_table(capsys: pytest.CaptureFixture[str]) -> None:
    main_code = _exit_code(["ls", "piper"])
    out = capsys.readouterr().out
    assert main_code == 0
    info = REGISTRY.backend("synthesize", "piper")
    for o in info.options:
        assert o.name in out
    assert "harness keys" in out and "num_cpus" in out and "*_env" in out
    assert _exit_code(["ls", "pythn"]) == 2
    assert "Did you mean python" in capsys.readouterr().err


# --------------------------------------------------------------------------- python: specs


@pytest.mark.live  # runs the installed `voxassay` command in a fresh process
def test_python_specs_import_from_the_current_directory(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "my_engine.py").write_text(
        "def make(word='hello'):\n    return lambda audio, sample_rate: word\n"
    )
    manifest = make_manifest(tmp_path / "m.jsonl", limit=2)
    exe = str(Path(sys.executable).parent / "voxassay")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}

    def run(spec: str) -> subprocess.CompletedProcess[str]:
        argv = [exe, "asr", "run", "-m", str(manifest), "-s", spec, "--out", "runs"]
        argv.append("--no-progress")
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)

    ok = run("python:my_engine:make?word=yes")
    assert ok.returncode == 0, ok.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert {r["output"]["pred_text"] for r in recs} == {"yes"}
    missing = run("python:not_my_engine:make")
    assert missing.returncode == 2
    assert "not found in the current directory" in missing.stderr
    assert str(tmp_path) in missing.stderr and "module search path" in missing.stderr


@pytest.mark.parametrize(
    ("typo", "near"), [("compre", "compare"), ("asrr", "asr"), ("dmeo", "demo")]
)
def test_a_mistyped_command_names_the_nearest_one(
    typo: str, near: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code([typo]) == 2
    assert f"Did you mean '{near}'?" in capsys.readouterr().err
    assert _exit_code(["asr", "rnu"]) == 2  # subcommands, as click does
    assert "Did you mean 'run'?" in capsys.readouterr().err

"""``voxassay duplex score``: score evidence bundles or two-channel recordings.

Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from voxassay.cli.common import (
    EXIT_FAILED,
    RunFlags,
    audio_flags,
    executor_options,
    finish_run,
    max_failures_option,
    output_flags,
    progress_bar,
    results_out_option,
    workers_option,
)

detector_option = click.option(
    "--detector",
    type=click.Choice(["silero", "webrtc", "energy"]),
    default="silero",
    show_default=True,
    help="Speech detector for the acoustic events.",
)


def _strict_code(run_dir: Path, strict: bool) -> int:
    """With ``--strict``: print every acoustic problem of the run as an error, 1 if any."""
    from voxassay.core.runstore import RunStore
    from voxassay.suites.duplex.evidence.acoustic_accuracy import is_acoustic_problem

    if not strict:
        return 0
    found = [
        (r.id, p["message"])
        for r in RunStore.open(run_dir).load_records().records
        for p in (r.output or {}).get("problems") or []
        if is_acoustic_problem(str(p.get("message", "")))
    ]
    for rid, message in found:
        click.echo(f"{rid}: error (--strict): {message}", err=True)
    return EXIT_FAILED if found else 0


@click.command("score")
@click.argument("bundles", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--stereo",
    "stereo",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Two-channel recording (or a folder of them). Repeatable.",
)
@click.option(
    "--user",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The user side as its own file (with --agent).",
)
@click.option(
    "--agent",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The agent side as its own file (with --user).",
)
@click.option(
    "--user-channel",
    default=0,
    show_default=True,
    type=click.IntRange(0, 1),
    help="Which channel of a stereo file is the user.",
)
@click.option(
    "--labels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Expected turn actions, JSONL: call, start_s, end_s, expected_actions.",
)
@detector_option
@click.option(
    "--asr",
    default="none",
    show_default=True,
    metavar="none|faster-whisper[:MODEL_DIR]",
    help="Recordings: transcribe the sounds of 1 s or less so backchannels are known by what "
    "they say ('mm-hmm', 'yeah', 'I see'), not only by length and level. Only those short "
    "sounds are transcribed; the cost is printed.",
)
@click.option(
    "--system",
    default=None,
    help="Name of the system under test (recordings: default 'recordings'; bundles: "
    "default name@version from each manifest).",
)
@click.option(
    "--redact",
    is_flag=True,
    help="Bundles: keep derived features (segments, 10 ms loudness, ledger with masked "
    "transcripts), drop raw audio; the run holds only the redacted copies.",
)
@click.option(
    "--retention-days",
    type=click.IntRange(min=0),
    default=None,
    help="With --redact: privacy.retention_days written into each bundle's manifest.",
)
@click.option(
    "--purpose",
    default=None,
    help="With --redact: privacy.purpose written into each manifest [default: evaluation].",
)
@click.option(
    "--transcripts",
    type=click.Choice(["mask", "drop", "keep"]),
    default=None,
    help="With --redact: ASR text replaced by word-length masks, dropped, or kept [default: mask].",
)
@click.option(
    "--baseline",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Bundles: a previous duplex run; the report lists what changed and the trade-offs.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Bundles: continue the newest run under OUT with the same bundles and settings; "
    "bundles already scored there are kept.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Acoustic problems are errors: a side whose speech edges could mostly not be placed, "
    "or a recording outside the conditions the stated accuracy was measured under, is printed "
    "as an error and the command exits 1 (the run is still written).",
)
@workers_option(
    "Bundles with --executor ray: bundles scored side by side, one per actor "
    "(local runs score one at a time).",
    most=256,
)
@executor_options
@results_out_option
@audio_flags
@output_flags
@max_failures_option
def score_cmd(
    bundles: tuple[Path, ...],
    stereo: tuple[Path, ...],
    user: Path | None,
    agent: Path | None,
    user_channel: int,
    labels: Path | None,
    detector: str,
    asr: str,
    system: str | None,
    redact: bool,
    retention_days: int | None,
    purpose: str | None,
    transcripts: str | None,
    baseline: Path | None,
    resume: bool,
    workers: int,
    executor: str,
    ray_address: str | None,
    ship_audio: bool,
    out: Path,
    max_failures: float | None,
    strict: bool = False,
    **kwargs: Any,
) -> None:
    """Score evidence bundles (BUNDLES: bundle folders, or folders searched recursively for
    manifest.json) or two-channel call recordings (--stereo, --user/--agent).

    Bundles: per session the evidence level (derived from the manifest), acoustic events from
    input.wav/output.wav, ledger latencies, turn-taking against the scenario's labels, task and
    side effects, causal slices of failures. A bundle that cannot be scored is an error
    record with its reasons (FILE:LINE on stderr); the others are scored. Recordings: response
    latency, barge-in stop time, backchannels, bystanders, takeovers; every rate with its
    denominator. Exit 0 when the run was written (1 with --strict and an acoustic problem),
    2 for usage errors.
    """
    from voxassay.cli.common import EXIT_USAGE
    from voxassay.core.errors import InputError

    flags = RunFlags.pop(kwargs)
    audio = kwargs.pop("audio", None), kwargs.pop("audio_format", None)
    bundle_only = {
        "--redact": redact,
        "--retention-days": retention_days is not None,
        "--purpose": purpose is not None,
        "--transcripts": transcripts is not None,
        "--baseline": baseline is not None,
        "--resume": resume,
        "--executor": executor != "thread",
        "--ray-address": ray_address is not None,
    }
    recordings_only = {"--asr": asr != "none"}
    if ship_audio:
        click.echo(
            "error: --ship-audio: duplex score reads the bundles on the workers (shared "
            "storage) for now",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if bundles and (stereo or user or agent):
        click.echo("error: give bundle folders or --stereo/--user/--agent, not both", err=True)
        sys.exit(EXIT_USAGE)
    if bundles and any(recordings_only.values()):
        used = [k for k, v in recordings_only.items() if v]
        click.echo(f"error: {', '.join(used)} apply to recordings only", err=True)
        sys.exit(EXIT_USAGE)
    if not bundles:
        used = [k for k, v in bundle_only.items() if v]
        if used:
            click.echo(f"error: {', '.join(used)} apply to bundles only", err=True)
            sys.exit(EXIT_USAGE)
        from voxassay.suites.duplex.scoring.stereo import calls_from_paths, score_calls

        try:
            calls = calls_from_paths(stereo, user, agent, user_channel, labels)
            _check_asr(asr)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        with progress_bar(flags.progress) as progress:
            task = progress.add_task("calls", total=len(calls), status="")
            store = score_calls(
                calls,
                out,
                detector=detector,
                system=system or "recordings",
                on_record=lambda rec: progress.advance(task),
                asr=asr,
            )
        _say_asr_cost(store.path, flags)
        _audio_report(store.path, *audio)
        flags.say(f"report: {store.path / 'report.html'}")
        finish_run(store.path, max_failures, flags, _strict_code(store.path, strict))
        return
    if not redact and any(
        bundle_only[k] for k in ("--retention-days", "--purpose", "--transcripts")
    ):
        click.echo("error: --retention-days, --purpose and --transcripts need --redact", err=True)
        sys.exit(EXIT_USAGE)
    from voxassay.suites.duplex.evidence.bundle_io import plan_bundles
    from voxassay.suites.duplex.scoring.score_run import score_bundles

    try:
        refs = plan_bundles(bundles, system=system)
        if baseline is not None:
            from voxassay.core.runstore import RunStore

            if RunStore.open(baseline).info().get("suite") != "duplex":
                raise InputError(f"--baseline {baseline} is not a duplex run")
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    options = (
        {
            "retention_days": retention_days,
            "purpose": purpose or "evaluation",
            "transcripts": transcripts or "mask",
        }
        if redact
        else None
    )
    with progress_bar(flags.progress) as progress:
        task = progress.add_task("bundles", total=len(refs), status="")
        store = score_bundles(
            refs,
            out,
            detector=detector,
            redact=options,
            baseline=baseline,
            inputs=[str(b) for b in bundles],
            on_record=lambda rec: progress.advance(task),
            resume=resume,
            on_plan=lambda n: progress.update(task, total=n),
            executor=executor,
            workers=workers,
            ray_address=ray_address,
        )
    records = store.load_records().records
    broken = [r for r in records if r.status != "ok"]
    for r in records:
        for p in r.output.get("problems") or []:
            if p.get("severity") == "error":
                where = f"{p['file']}:{p['line']}" if p.get("line") is not None else p["file"]
                click.echo(f"{where}: error: {p['message']}", err=True)
    for r in broken:
        click.echo(
            f"not scored: {r.id} ({(r.error or {}).get('kind')}): {(r.error or {}).get('message')}",
            err=True,
        )
    flags.say(
        f"{len(records) - len(broken)} of {len(records)} bundle(s) scored; "
        f"report: {store.path / 'report.html'}"
    )
    _audio_report(store.path, *audio)
    finish_run(store.path, max_failures, flags, _strict_code(store.path, strict))


def _check_asr(asr: str) -> None:
    """``--asr`` names a transcriber that can be built here (before any work)."""
    if asr == "none":
        return
    from voxassay.core.errors import BackendUnavailable, InputError, SpecError
    from voxassay.core.registry import REGISTRY
    from voxassay.core.specs import parse_spec

    if parse_spec(asr).backend != "faster-whisper":
        raise InputError(f"--asr {asr}: 'none' or 'faster-whisper[:MODEL_DIR]'")
    try:
        REGISTRY.build("transcribe", asr)
    except (SpecError, BackendUnavailable) as exc:
        raise InputError(f"--asr {asr}: {exc}") from None


def _say_asr_cost(run: Path, flags: RunFlags) -> None:
    """What the ASR pass cost: candidates, seconds of audio transcribed, compute seconds."""
    from voxassay.core.runstore import RunStore

    blocks = [
        r.output["asr"]
        for r in RunStore.open(run).load_records().records
        if r.output and isinstance(r.output.get("asr"), dict)
    ]
    if blocks:
        n = sum(int(b["candidates"]) for b in blocks)
        tokens = sum(int(b["tokens"]) for b in blocks)
        audio_s = sum(float(b["audio_s"]) for b in blocks)
        compute_s = sum(float(b["compute_s"]) for b in blocks)
        flags.say(
            f"asr: {n} short sound(s), {audio_s:.1f} s of audio, transcribed in "
            f"{compute_s:.1f} s; {tokens} heard as backchannel forms"
        )


def _audio_report(run: Path, audio: str | None, audio_format: str | None) -> None:
    """Rewrite the report with the audio policy asked for (kept in run.json)."""
    if audio is None and audio_format is None:
        return
    from voxassay.report import write_report

    write_report(run, audio=audio, audio_format=audio_format)

"""``voxassay duplex validate|schema``: check scenarios, ledgers and bundles; export JSON Schemas.

Nothing heavy (pydantic, yaml, soundfile) is imported until a command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from voxassay.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    RunFlags,
    dry_run,
    executor_options,
    finish_run,
    max_failures_option,
    output_flags,
    print_result_path,
    progress_bar,
    results_out_option,
    subset_flags,
    workers_option,
)
from voxassay.cli.duplex_score import detector_option, score_cmd

SCHEMA_KIND_CHOICES = ("scenario", "event", "manifest", "provenance", "matrix", "scorecard", "gate")


@click.group()
def duplex() -> None:
    """Full-duplex agent acceptance: scenarios, event ledgers, evidence bundles."""


duplex.add_command(score_cmd)


@duplex.command("validate")
@click.argument(
    "paths",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, path_type=Path),
)
@click.option("--errors-only", is_flag=True, help="Do not print warnings.")
def validate_cmd(paths: tuple[Path, ...], errors_only: bool) -> None:
    """Check scenario or matrix YAML, events.jsonl, manifest.json or bundle directories.

    Prints every problem as FILE:LINE: SEVERITY: MESSAGE. Exit 0 when there are no errors
    (warnings allowed), 1 when a check failed, 2 for usage errors (a path that is missing).
    """
    from voxassay.suites.duplex.evidence.validate import validate_path

    errors = warnings = 0
    for path in paths:
        for problem in validate_path(path):
            if problem.severity == "error":
                errors += 1
            else:
                warnings += 1
                if errors_only:
                    continue
            click.echo(problem.format())
    click.echo(
        f"{errors} error(s), {warnings} warning(s) in {len(paths)} path(s)",
        err=True,
    )
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


@duplex.command("schema")
@click.argument("kind", required=False, type=click.Choice(SCHEMA_KIND_CHOICES))
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write KIND.json files into this folder (printed) instead of printing the schema.",
)
def schema_cmd(kind: str | None, out: Path | None) -> None:
    """Print or write the JSON Schema of a scenario, event, manifest, matrix, scorecard
    (report.json) or gate record (gate.json); all if no KIND."""
    import json

    from voxassay.contracts.duplex.schemas import SCHEMA_KINDS, export_schemas, json_schemas

    kinds = [kind] if kind else list(SCHEMA_KINDS)
    if out is not None:
        for path in export_schemas(out, kinds):
            click.echo(str(path))
        return
    schemas = json_schemas(kinds)
    body = schemas[kind] if kind else schemas
    click.echo(json.dumps(body, indent=2, ensure_ascii=False))


@duplex.command("metrics")
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the Markdown into this file (e.g. docs/metrics.md) instead of printing it.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="The catalogue as JSON, one object per metric."
)
def metrics_cmd(out: Path | None, as_json: bool) -> None:
    """Print the duplex metric catalogue: every metric with its kind, unit, direction,
    definition, denominator and other names (what gates, reports and docs/metrics.md use)."""
    import dataclasses
    import json

    from voxassay.contracts.duplex import catalogue

    if as_json:
        text = json.dumps([dataclasses.asdict(m) for m in catalogue.CATALOGUE], indent=1) + "\n"
    else:
        text = catalogue.markdown()
    if out is None:
        click.echo(text, nl=False)
        return
    out.write_text(text, encoding="utf-8")
    click.echo(str(out))


@duplex.command("render")
@click.option(
    "--scenarios",
    "-s",
    "scenarios_spec",
    required=True,
    help="A shipped set (default, demo), a scenario folder, a scenario YAML or a set file "
    "(one scenario id or YAML path per line).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for OUT/<scenario>/<segment>.wav and OUT/index.json (printed as the last line).",
)
@click.option(
    "--clips",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Your own recordings, CLIPS/<scenario_id>/<segment_id>.wav: they replace say and "
    "generate segments.",
)
@click.option(
    "--rate",
    default=16_000,
    show_default=True,
    type=click.IntRange(8_000, 48_000),
    help="Sample rate of the rendered WAVs (Hz).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Synthesized speech cache [default: $VOXASSAY_CACHE/render or ~/.cache/voxassay/render].",
)
@click.option("--no-cache", is_flag=True, help="Synthesize everything again, keep nothing.")
def render_cmd(
    scenarios_spec: str,
    out: Path,
    clips: Path | None,
    rate: int,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Render scenario segments to audio: one WAV per segment plus index.json.

    Deterministic: the same scenarios give bit-identical samples (index.json lists a sha256
    per segment). Exit 0 when everything was written; 2 for unknown scenarios or sets, invalid
    scenarios, missing synthesizers (the message names the install step) or bad clips.
    """
    from voxassay.cli.common import EXIT_USAGE
    from voxassay.core.errors import AudioError, BackendUnavailable, InputError
    from voxassay.suites.duplex.live.scenarios import load_scenario_set
    from voxassay.suites.duplex.live.stimuli import default_cache_dir, render_to_folder

    cache = None if no_cache else (cache_dir or default_cache_dir())
    try:
        items = load_scenario_set(scenarios_spec)
        with progress_bar() as progress:
            task = progress.add_task("scenarios", total=len(items), status="")
            index = render_to_folder(
                items,
                out,
                sample_rate=rate,
                cache_dir=cache,
                clips=clips,
                on_scenario=lambda sc: progress.advance(task),
            )
    except (InputError, BackendUnavailable, AudioError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    n_segments = sum(len(s["segments"]) for s in index["scenarios"])
    stats = index["synthesis"]
    click.echo(
        f"{len(items)} scenario(s), {n_segments} segment(s) at {rate} Hz; "
        f"{stats['synthesized']} synthesized, {stats['cache_hits']} from the cache; "
        f"index: {out / 'index.json'}",
        err=True,
    )
    print_result_path(out)


@duplex.command("import-realtime")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@results_out_option
@click.option(
    "--session-id",
    default=None,
    help="Ledger session_id (default: the Realtime session id, else the log's file name).",
)
@click.option(
    "--time-unit",
    type=click.Choice(["auto", "s", "ms", "us", "ns"]),
    default="auto",
    show_default=True,
    help="Unit of numeric timestamps without a unit suffix (auto: detected).",
)
def import_realtime_cmd(log: Path, out: Path, session_id: str | None, time_unit: str) -> None:
    """Import an OpenAI Realtime event log (JSONL or JSON array) as a voxassay ledger.

    Writes OUT/<run_id>/events.jsonl and import.json (counts, clock estimate, problems) and
    prints the run folder last. Problems go to stderr as FILE:LINE: SEVERITY: MESSAGE.
    Exit 0 when every record was imported (warnings allowed), 1 when some records could not
    be imported (the rest is written), 2 for usage errors or a log with nothing to import.
    """
    import json

    from voxassay.cli.common import EXIT_USAGE
    from voxassay.core.runstore import new_run_id
    from voxassay.suites.duplex.evidence.ledger import write_events
    from voxassay.suites.duplex.evidence.realtime_import import import_realtime_log

    result = import_realtime_log(
        log, session_id=session_id, time_unit=None if time_unit == "auto" else time_unit
    )
    for problem in result.problems:
        click.echo(problem.format(), err=True)
    if not result.events:
        click.echo(f"error: nothing could be imported from {log}", err=True)
        sys.exit(EXIT_USAGE)
    run_dir = out / new_run_id("realtime-import")
    run_dir.mkdir(parents=True, exist_ok=False)
    ledger = run_dir / "events.jsonl"
    write_events(ledger, result.events)
    report = {
        "stats": result.stats,
        "problems": [
            {"file": p.file, "line": p.line, "severity": p.severity, "message": p.message}
            for p in result.problems
        ],
    }
    (run_dir / "import.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    stats = result.stats
    click.echo(
        f"{stats.get('imported_records', 0)} of {stats.get('records', 0)} record(s) imported "
        f"as {len(result.events)} event(s); {stats.get('errors', 0)} error(s), "
        f"{stats.get('warnings', 0)} warning(s); ledger: {ledger}",
        err=True,
    )
    print_result_path(run_dir)
    sys.exit(EXIT_FAILED if result.errors else EXIT_OK)


@duplex.command("gate")
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--matrix",
    "-m",
    "matrix_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Acceptance matrix YAML (gates with statistic, threshold, minimum evidence, on_fail).",
)
@click.option(
    "--baseline",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A previous duplex run: per gate, current - baseline with a CI and a regression flag.",
)
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write JUnit XML here (one testcase per gate) for Jenkins or GitLab.",
)
@click.option(
    "--system",
    default=None,
    help="Which system of the run to gate (needed only when the run has several).",
)
def gate_cmd(
    run: Path,
    matrix_path: Path,
    baseline: Path | None,
    junit: Path | None,
    system: str | None,
) -> None:
    """Check a duplex run against an acceptance matrix and recommend one release action.

    Per gate: preconditions (measured, enough samples per split, failures replayable,
    versions recorded), evidence level, then threshold. Enough samples is the gate's min_n,
    by default 5 for a p50, 59 for a p95, 299 for a p99 (the smallest n whose maximum bounds
    the percentile at 95 % confidence), 30 for a rate and 1 for a count or value; the gate
    table's n/need column shows it. Prints the gate table and the
    recommendation (roll_back > block > keep_in_shadow > collect_more_data > ship) with
    its reasons; writes RUN/gate.json, gate.md, gate.txt and gate.junit.xml (as `duplex run
    --matrix` does), embeds the gate in RUN/report.json and prints RUN last.

    Exit 0 only when the recommendation is ship; 1 otherwise, including collect_more_data
    (nothing was shown to pass); 2 for usage errors (a matrix with problems is printed as
    FILE:LINE: SEVERITY: MESSAGE, or a folder that is not a duplex run).
    """
    from voxassay.cli.common import EXIT_USAGE
    from voxassay.core.errors import InputError
    from voxassay.suites.duplex.evidence.validate import (
        DuplexInputError,
        load_matrix,
        validate_path,
    )
    from voxassay.suites.duplex.gate_output import render_text, write_gate_files, write_junit
    from voxassay.suites.duplex.gate_table import metric_table_from_run
    from voxassay.suites.duplex.gates import evaluate_matrix

    try:
        matrix = load_matrix(matrix_path)
    except DuplexInputError as exc:
        for problem in exc.problems:
            click.echo(problem.format(), err=True)
        sys.exit(EXIT_USAGE)
    for problem in validate_path(matrix_path):
        click.echo(problem.format(), err=True)  # warnings only: errors were refused above
    try:
        table = metric_table_from_run(run, system=system)
        base = metric_table_from_run(baseline, system=system) if baseline else None
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    report = evaluate_matrix(matrix, table, baseline=base)
    click.echo(render_text(report))
    path = write_gate_files(report, run)
    if junit is not None:
        click.echo(f"junit: {write_junit(report, junit)}", err=True)
    print_result_path(path)
    sys.exit(report.exit_code)


@duplex.command("run")
@click.option(
    "--scenarios",
    "scenario_set",
    default="default",
    show_default=True,
    help="A scenario set name (default, demo), a folder of scenario YAML files, or one file.",
)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    default=("reference:careful",),
    show_default=True,
    help="ws://HOST:PORT (OpenAI Realtime), reference[:POLICY], python:module:factory, echo, "
    "energy. Repeatable: each agent is a system of the run (compare them with "
    "`voxassay compare RUN RUN`).",
)
@results_out_option
@click.option(
    "--only",
    multiple=True,
    help="Keep scenarios whose id or category (name or 1-8) matches this glob. Repeatable.",
)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option(
    "--resume", is_flag=True, help="Continue the newest run under OUT with the same settings."
)
@click.option(
    "--clock",
    type=click.Choice(["virtual", "real"]),
    default=None,
    help="virtual (in-process agents; faster than real time) or real [default: virtual for "
    "in-process agents, real for sockets].",
)
@click.option(
    "--compute",
    type=click.Choice(["charged", "zero"]),
    default="charged",
    show_default=True,
    help="Virtual clock: charge the agent's measured compute to the clock, or count it as zero.",
)
@click.option(
    "--route",
    type=click.Choice(["direct", "relay"]),
    multiple=True,
    help="Network route: a label for WebSocket and in-process agents; a WebRTC agent takes "
    "it (relay: through the spec's TURN server). Repeat it (--route direct --route relay) to "
    "run every session on each route: the report gives each route its own latencies. "
    "[default: direct]",
)
@click.option("--frame-ms", type=click.Choice(["10", "20"]), default="20", show_default=True)
@click.option(
    "--loop",
    type=click.Choice(["none", "pulseaudio"]),
    default="none",
    show_default=True,
    help="pulseaudio: play the agent's audio through a real player into a private PulseAudio "
    "server's virtual sound card and capture it; output.wav is the capture (L3 evidence with "
    "a socket agent). Needs PulseAudio and the real clock.",
)
@click.option(
    "--clips",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Your own recordings: CLIPS/<scenario_id>/<segment_id>.wav replace rendered speech.",
)
@detector_option
@click.option(
    "--matrix",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Acceptance matrix: gate the run after scoring and exit 1 unless every system's "
    "decision is ship. Without it the example matrix is applied for the report only.",
)
@click.option(
    "--seed", default=0, show_default=True, type=int, help="Seed of the fault models and --sample."
)
@click.option(
    "--state-probe",
    default=None,
    help="For agents that export no business state: a command (JSON on stdout; gets "
    "VOXASSAY_SESSION_ID, VOXASSAY_SCENARIO_ID) or an http(s) URL ({session_id} filled in) "
    "run after each session; its JSON becomes final-state.json.",
)
@workers_option(
    "With --executor ray: sessions side by side, one per actor (a real-clock "
    "session gets a whole CPU). Local runs play one session at a time.",
    most=256,
)
@executor_options
@subset_flags(seed=False)
@output_flags
@max_failures_option
def run_cmd(
    scenario_set: str,
    agents: tuple[str, ...],
    out: Path,
    only: tuple[str, ...],
    repeat: int,
    resume: bool,
    clock: str | None,
    compute: str,
    route: tuple[str, ...],
    frame_ms: str,
    loop: str,
    clips: Path | None,
    detector: str,
    matrix: Path | None,
    seed: int,
    state_probe: str | None,
    workers: int,
    executor: str,
    ray_address: str | None,
    ship_audio: bool,
    max_failures: float | None,
    **kwargs: Any,
) -> None:
    """Run scenarios against a live agent; one evidence bundle per session, then the report.

    Each session streams the scenario's audio in real-time frames (or on a virtual clock),
    models the client's playback, answers tool calls from the scenario's tool world, and
    writes OUT/<run_id>/bundles/<scenario>/<repeat>/. The bundles are scored like recorded
    ones. The report ends in each agent's recommendation against the acceptance matrix (the
    example matrix unless --matrix names another).

    Exit 0 when the run was written (with --matrix: when every agent's decision is ship), 1
    when a gate of an explicit --matrix did not ship or an agent failed every session (or
    more than --max-failures of them), 2 for usage errors.
    """
    from voxassay.cli.common import EXIT_USAGE
    from voxassay.core.errors import InputError, VoxassayError
    from voxassay.core.items import Item
    from voxassay.core.manifests import select_subset
    from voxassay.core.registry import REGISTRY
    from voxassay.suites.duplex.live.runner import route_spec, run_scenarios, select_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    flags = RunFlags.pop(kwargs)
    flags.seed = seed
    try:
        routes = list(dict.fromkeys(route)) or ["direct"]
        for spec in agents:
            REGISTRY.check("duplex", spec)
            for rt in routes:
                route_spec(spec, rt, routes)
        scenarios = select_scenarios(load_scenario_set(scenario_set), only)
        scenarios, subset = select_subset(scenarios, flags.limit, flags.sample, seed)
        if flags.dry_run:
            plan = [Item(id=sc.id, labels={"category": str(sc.category)}) for sc, _ in scenarios]
            dry_run(flags, agents, repeat, plan, what="scenarios")
        from voxassay.suites.duplex.evidence.validate import DuplexInputError, load_matrix
        from voxassay.suites.duplex.live.scenarios import EXAMPLE_MATRIX

        try:
            matrix_doc = load_matrix(matrix or EXAMPLE_MATRIX)
        except DuplexInputError as exc:
            for problem in exc.problems:
                click.echo(problem.format(), err=True)
            sys.exit(EXIT_USAGE)
        with progress_bar(flags.progress) as progress:
            total = len(scenarios) * repeat * len(agents) * len(routes)
            task = progress.add_task("sessions", total=total, status="")
            store = run_scenarios(
                scenarios,
                list(agents),
                out,
                repeat=repeat,
                resume=resume,
                clock=clock,
                compute=compute,
                route=routes,
                frame_ms=int(frame_ms),
                detector=detector,
                clips=clips,
                seed=seed,
                subset=subset,
                state_probe=state_probe,
                matrix=matrix_doc,
                matrix_source=str(matrix) if matrix is not None else "example",
                loop=loop,
                executor=executor,
                workers=workers,
                ray_address=ray_address,
                ship_audio=ship_audio,
                on_plan=lambda n: progress.update(task, total=n),
                on_record=lambda rec: progress.update(
                    task, advance=1, status=f"{rec.id} {rec.status}"
                ),
            )
    except (InputError, VoxassayError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    records = store.load_records().records
    broken = [r for r in records if r.status != "ok"]
    for r in broken:
        err = r.error or {}
        flags.say(f"not scored: {r.id} ({err.get('kind')}): {err.get('message')}")
    flags.say(
        f"{len(records) - len(broken)} of {len(records)} session(s) scored; "
        f"report: {store.path / 'report.html'}"
    )
    code = _gate_run(store.path, matrix_doc, explicit=matrix is not None, flags=flags)
    finish_run(store.path, max_failures, flags, code=code)


def _gate_run(run: Path, matrix_doc: Any, *, explicit: bool, flags: RunFlags) -> int:
    """Print each agent's recommendation (the report already carries it); with an explicit
    matrix also write the gate files (one agent: RUN/gate.*) and return 1 unless every agent
    ships."""
    import json

    from voxassay.suites.duplex.gate_output import render_text, write_gate_files
    from voxassay.suites.duplex.gate_table import metric_table_from_run
    from voxassay.suites.duplex.gates import evaluate_matrix

    report_path = run / "report.json"
    if not report_path.is_file():
        return EXIT_OK
    systems = json.loads(report_path.read_text(encoding="utf-8")).get("systems") or []
    codes = []
    for s in systems:
        gate = s.get("gate") or {}
        flags.say(
            f"recommendation ({s.get('system')}, {gate.get('matrix')}): {gate.get('recommendation')}"
        )
        codes.append(int(gate.get("exit_code") or 0))
    if not explicit:
        return EXIT_OK
    if len(systems) == 1:
        decision = evaluate_matrix(matrix_doc, metric_table_from_run(run))
        if flags.chatty or decision.exit_code:
            click.echo(render_text(decision), err=True)
        write_gate_files(decision, run)
    else:
        flags.say("gate files per agent: voxassay duplex gate RUN --matrix M --system AGENT")
    return max(codes, default=EXIT_OK)

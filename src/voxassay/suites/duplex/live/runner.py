"""``voxassay duplex run``: scenarios against a live agent, one evidence bundle per session,
scored by the same core as recorded bundles.

A run is ``OUT/<run_id>/`` with ``run.json``, ``items.jsonl`` (one item per scenario),
``bundles/<scenario_id>/<repeat>/`` and ``records.jsonl`` (one record per session: id = the
scenario id, system = the agent spec, repeat = 0-based), then ``report.*``. The config (agent,
scenario ids + versions + file hashes, repeats, clock, route, frame size, detector) is the
resume fingerprint: ``--resume`` continues the newest run with the same config and skips
sessions already recorded.

Errors are data: an agent that raises, stalls or goes silent leaves its ledger (with a
``session.error`` event) and a bundle that scores as such; a session that could not run at
all (its audio could not be rendered, the agent could not be built) is an error record with
the reason; the next session runs either way.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex.manifest import Provenance
from voxassay.contracts.duplex.matrix import AcceptanceMatrix
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.core.errors import InputError
from voxassay.core.executor import Executor, SerialExecutor
from voxassay.core.items import Item, file_sha256
from voxassay.core.records import Record
from voxassay.core.runstore import RunStore
from voxassay.core.shipped import RUN_FOLDER, rebase, write_tree
from voxassay.suites.duplex.live.session import SessionConfig
from voxassay.suites.duplex.live.sessions import (
    AgentFactory,
    SelfCheckPlan,
    SessionDone,
    SessionTask,
    SessionWorker,
    build_agent_factory,
    lost_session,
    measure_self_check,
)

__all__ = ["AgentFactory", "build_agent_factory", "run_scenarios", "select_scenarios"]

LIVE_VERSION = "1"


def select_scenarios(
    scenarios: Sequence[tuple[Scenario, Path]], only: Sequence[str] = ()
) -> list[tuple[Scenario, Path]]:
    """Scenarios whose category (name or number) or id matches one of the ``only`` globs."""
    if not only:
        return list(scenarios)
    from voxassay.contracts.duplex.vocabulary import CATEGORY_NUMBER

    out = []
    for sc, path in scenarios:
        names = {sc.id, str(sc.category), str(CATEGORY_NUMBER[sc.category])}
        if any(fnmatch.fnmatchcase(n, pat) for pat in only for n in names):
            out.append((sc, path))
    if not out:
        raise InputError(f"--only {' '.join(only)}: no scenario matches (ids, categories, 1-8)")
    return out


def route_spec(spec: str, route: str, routes: list[str]) -> str:
    """``spec`` set to take ``route``: a WebRTC agent's ``route`` option (a run of several
    routes needs agents that can take each: WebRTC without a route of its own)."""
    from voxassay.core.specs import parse_spec

    parsed = parse_spec(spec)
    if len(routes) == 1 and parsed.backend != "webrtc":
        return spec  # a label for an agent that cannot choose its route
    if parsed.backend != "webrtc":
        raise InputError(
            f"{spec}: a run over several routes ({', '.join(routes)}) needs WebRTC agents "
            "(webrtc:URL); this agent cannot choose its network route"
        )
    given = parsed.options.get("route")
    if given is not None and given != route and len(routes) > 1:
        raise InputError(
            f"{spec} fixes route={given}; a run over several routes sets each session's route"
        )
    if given is not None or (route == "direct" and len(routes) == 1):
        return spec
    return f"{spec}{'&' if '?' in spec else '?'}route={route}"


def _agent_key(spec: str) -> str:
    """A folder name for an agent spec."""
    import re

    return re.sub(r"[^A-Za-z0-9._+=-]+", "_", spec).strip("._") or "agent"


def _transport(spec: str) -> str:
    socket = ("ws://", "wss://", "pcm-ws:", "twilio-ws:", "webrtc:", "smallwebrtc:")
    return "socket" if spec.startswith(socket) else "in_process"


def run_scenarios(
    scenarios: Sequence[tuple[Scenario, Path]],
    agent: str | Sequence[str],
    out: str | Path,
    *,
    repeat: int = 1,
    resume: bool = False,
    clock: str | None = None,
    compute: str = "charged",
    route: str | Sequence[str] = "direct",
    frame_ms: int = 20,
    detector: str = "silero",
    clips: str | Path | None = None,
    state_probe: str | None = None,
    cache_dir: str | Path | None = None,
    seed: int = 0,
    subset: dict[str, int] | None = None,
    factory: AgentFactory | Mapping[str, AgentFactory] | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
    write_reports: bool = True,
    self_check: bool = True,
    matrix: AcceptanceMatrix | None = None,
    matrix_source: str | None = None,
    loop: str = "none",
    executor: str = "thread",
    workers: int = 1,
    ray_address: str | None = None,
    ship_audio: bool = False,
) -> RunStore:
    """Run every scenario ``repeat`` times against ``agent`` (one spec, or several: each is
    a system of the run) into ``out/<run_id>/``.

    ``clock``: ``virtual`` (default for in-process agents) or ``real`` (default, and the only
    choice, when a socket agent is among them). ``factory`` overrides the registry (tests):
    one factory for a single agent, or spec -> factory. With one agent a session's bundle is
    ``bundles/<scenario>/<repeat>/``; with several, ``bundles/<scenario>/<repeat>/<agent>/``.

    ``matrix``: an acceptance matrix every system is checked against when the report is built
    (kept in ``run.json`` as ``matrix``, outside the resume fingerprint; ``matrix_source``
    names where it came from); the report then ends in each system's recommendation.

    ``route``: a label for agents that cannot choose (in-process, WebSocket), or the routes a
    WebRTC agent takes: with several (``["direct", "relay"]``) every repeat runs once on each
    (repeat index ``r * len(routes) + k``), the agent's spec fixing no route of its own; the
    session's route is then what its ICE pair says.

    ``loop``: ``none`` (default: the player is modelled, L2) or ``pulseaudio``: the run starts
    its own PulseAudio server (``systems.duplex.sound_server``) and every session plays the
    agent's received audio through a real player into a null sink whose monitor is captured
    (``live.loop``); ``output.wav`` is the capture and the bundle holds what L3 is derived
    from. Real clock only. The self-check then also measures the loop's latency and jitter.

    ``self_check`` (default on): before the sessions, the harness measures its own added
    latency with a loopback echo agent on the run's transports and clock, and after them pools
    the sessions' frame pacing error (``selfcheck``); both go to ``run.json``
    (``self_check``) and the report. A failing self-check is recorded there, never fatal.

    ``executor``: ``thread`` (default: the sessions one after another in this process) or a
    distributed one (``ray``: ``workers`` actors, one session each at a time, agents built
    from their specs on the workers, which also measure the self-check; bundles come back to
    this process, which alone writes the run: ``sessions.py``). ``ship_audio``: the
    scenarios are rendered here and their segments sent with the tasks (else the workers
    render them, with the render cache on shared storage). A distributed run takes no sound
    loop and no ``factory``; an agent on 127.0.0.1 with a remote ``ray_address`` is an
    ``InputError``.
    """
    from voxassay.suites.duplex.scoring.score_run import scoring_config

    agents = [agent] if isinstance(agent, str) else list(dict.fromkeys(agent))
    if not agents:
        raise InputError("no agent given")
    transports = {a: _transport(a) for a in agents}
    sockets = [a for a, t in transports.items() if t == "socket"]
    clock = clock or ("real" if sockets else "virtual")
    if sockets and clock != "real":
        raise InputError(f"{sockets[0]}: a socket agent runs on the real clock only")
    if loop not in ("none", "pulseaudio"):
        raise InputError(f"--loop must be none or pulseaudio, not {loop!r}")
    if loop != "none" and clock != "real":
        raise InputError("a sound loop runs on the real clock only (--clock real)")
    routes = [route] if isinstance(route, str) else list(dict.fromkeys(route))
    pool: Executor[Any, Any] | None = None
    if executor != "thread":
        if loop != "none":
            raise InputError(
                f"--loop {loop} plays the sessions on this machine's sound server: "
                "run it with the thread executor"
            )
        if factory is not None:
            raise InputError("a distributed run builds its agents from their specs (no factory)")
        from voxassay.core.ray_executor import check_address

        _check_agents_reachable(agents, check_address(ray_address))
    elif ship_audio:
        raise InputError("--ship-audio needs a distributed executor (--executor ray)")
    factories: dict[tuple[str, str], AgentFactory] = {}
    infos: dict[str, dict[str, Any]] = {}
    for a in agents:
        given = factory.get(a) if isinstance(factory, Mapping) else factory
        for rt in routes:
            if given is not None:
                factories[(a, rt)] = given
                infos[a] = dict(getattr(given, "info", None) or {"backend": "given"})
            else:
                factories[(a, rt)], infos[a] = build_agent_factory(route_spec(a, rt, routes))
    config = {
        "mode": "bundles",
        "live": {
            "agent": agents[0] if len(agents) == 1 else agents,
            "transport": transports[agents[0]] if len(agents) == 1 else transports,
            "clock": clock,
            "compute": compute if clock == "virtual" else None,
            "route": routes[0] if len(routes) == 1 else routes,
            "frame_ms": frame_ms,
            "repeat": repeat,
            "seed": seed,
            "clips": str(clips) if clips else None,
            "state_probe": state_probe,
            "loop": loop,
            "version": LIVE_VERSION,
        },
        "systems": agents,
        "scenarios": [
            {"id": sc.id, "version": sc.version, "sha256": file_sha256(path)}
            for sc, path in scenarios
        ],
        **scoring_config(detector),
    }
    if subset:
        config["subset"] = dict(subset)  # --limit / --sample that chose the scenarios
    items = [
        Item(
            id=sc.id,
            labels={"category": str(sc.category), "input": "live"},
            meta={"scenario": str(path), "version": sc.version},
        )
        for sc, path in scenarios
    ]
    if executor != "thread":
        from voxassay.core.execution import make_executor

        pool = make_executor(executor, workers, ray_address=ray_address)
    store, done, _ = RunStore.start_or_resume(Path(out), "duplex", config, items, resume)
    store.update_info(agent=infos[agents[0]] if len(agents) == 1 else infos)
    if matrix is not None:
        store.update_info(
            matrix={
                "source": matrix_source,
                "doc": matrix.model_dump(mode="json", exclude_unset=True),
            }
        )
    todo = [
        (a, sc, path, r)
        for a in agents
        for sc, path in scenarios
        for r in range(repeat * len(routes))
        if (sc.id, a, r) not in done
    ]
    if on_plan:
        on_plan(len(todo))
    cache = Path(cache_dir) if cache_dir else store.path.parent / ".render-cache"
    configs = {
        rt: SessionConfig(
            frame_ms=frame_ms,
            clock="real" if clock == "real" else "virtual",
            compute="zero" if compute == "zero" else "charged",
            route=rt,
            seed=seed,
        )
        for rt in routes
    }
    sound = None
    if loop == "pulseaudio" and todo:
        sound = _start_sound_server()
    plan = SelfCheckPlan(sorted({transports[a] for a in agents}), clock, frame_ms)
    if self_check and todo and pool is None:  # a distributed run measures on its workers
        _self_check_latency(store, plan)
        if sound is not None:
            _self_check_loop(store, sound)
    tasks: list[SessionTask] = []
    for a, sc, path, r in todo:
        rt = routes[r % len(routes)]
        spec = f"given:{a}:{rt}" if factory is not None else route_spec(a, rt, routes)
        stored = f"bundles/{sc.id}/{r}"
        if len(agents) > 1:
            stored += f"/{_agent_key(a)}"
        tasks.append(
            SessionTask(
                scenario=sc,
                path=str(path),
                repeat=r,
                agent=a,
                spec=spec,
                route=rt,
                stored=stored,
                session_id=f"{sc.id}-r{r}-{store.run_id[-4:]}",
                cfg=configs[rt],
                provenance=_provenance(transports[a], clock, sound is not None),
            )
        )
    worker = SessionWorker(
        detector=detector,
        clips=str(clips) if clips else None,
        cache=str(cache),
        state_probe=state_probe,
        sound=sound,
    )
    try:
        if pool is None:
            worker.run_path = str(store.path)
            worker.factories = {
                t.spec: (factories[(t.agent, t.route)], infos[t.agent]) for t in tasks
            }
            results = SerialExecutor().map_unordered(lambda: worker, tasks)
            _collect(results, store, on_record)
        else:
            if self_check:
                worker.self_check = plan
            _run_on(pool, worker, tasks, store, on_record, clock, ship_audio)
    finally:
        store.close()
        if sound is not None:
            sound.close()
        if pool is not None:
            store.update_info(
                execution={
                    "executor": executor,
                    "workers": workers,
                    "ship_audio": ship_audio,
                    **pool.describe(),
                }
            )
            pool.close()
    if self_check:
        _self_check_pacing(store, clock)
    from voxassay.report import finish_run

    return finish_run(store, write_reports)


def _self_check_latency(store: RunStore, plan: SelfCheckPlan) -> None:
    """The harness-added latency probe, in this process before the sessions (never fatal)."""
    store.update_info(self_check=measure_self_check(plan))


def _self_check_pacing(store: RunStore, clock: str) -> None:
    """Pool the frame pacing error of every session of the run into ``self_check``."""
    from voxassay.suites.duplex.live.selfcheck import add_target_status, pacing_from_records

    check = dict(store.info().get("self_check") or {"clock": clock, "latency": {}, "errors": []})
    try:
        check.update(pacing_from_records(store.load_records().records, clock))
    except Exception as exc:  # never fatal
        check.setdefault("errors", []).append({"stage": "pacing", "error": repr(exc)})
    store.update_info(self_check=add_target_status(check))


def _provenance(transport: str, clock: str, looped: bool) -> Provenance:
    return Provenance(
        transport=transport,  # type: ignore[arg-type]
        clock="monotonic" if clock == "real" else "virtual",
        playback="real_device_capture" if looped else "modelled",
        capture="loopback_soundcard" if looped else "none",
        traffic="synthetic",
        acoustic_events="capture" if looped else "output_stream",
        player="process" if looped else "model",
        loop="virtual_sound_card" if looped else "none",
    )


def _collect(
    results: Iterable[SessionDone],
    store: RunStore,
    on_record: Callable[[Record], None] | None,
    checks: list[dict[str, Any]] | None = None,
) -> None:
    """Write what the workers handed back: each bundle's files (when a worker wrote them away
    from the run), then its record; self-checks measured on workers go to ``checks``."""
    for done in results:
        rec = done.record
        if done.files is not None and done.stored:
            write_tree(store.path / done.stored, done.files)
            rec.output = rebase(rec.output, RUN_FOLDER, str(store.path))
        if done.self_check is not None and checks is not None:
            checks.append({**done.self_check, "worker": rec.worker})
        store.append(rec)
        if on_record:
            on_record(rec)


def _run_on(
    pool: Executor[Any, Any],
    worker: SessionWorker,
    tasks: list[SessionTask],
    store: RunStore,
    on_record: Callable[[Record], None] | None,
    clock: str,
    ship_audio: bool,
) -> None:
    """The sessions on a distributed executor, each agent's on workers with its spec's
    resources (a real-clock session gets at least a whole CPU); with ``ship_audio`` the
    driver renders each scenario and sends the segments with the task."""
    import dataclasses

    from voxassay.core.specs import spec_resources

    def prepare(task: SessionTask) -> SessionTask:
        if not ship_audio:
            return task
        from voxassay.suites.duplex.live.stimuli import render_segments

        try:
            segments = render_segments(
                task.scenario,
                Path(task.path).parent,
                sample_rate=task.cfg.sample_rate,
                cache_dir=worker.cache,
                clips=worker.clips,
            )
        except Exception as exc:  # the session's render error, recorded by the worker
            return dataclasses.replace(task, render_error=f"{type(exc).__name__}: {exc}")
        return dataclasses.replace(task, audio=pool.share(segments))

    checks: list[dict[str, Any]] = []
    make = functools.partial(dataclasses.replace, worker)
    for agent in dict.fromkeys(t.agent for t in tasks):
        resources = spec_resources(agent)
        if clock == "real":
            resources["num_cpus"] = max(1.0, resources["num_cpus"])
        results = pool.map_unordered(
            make,
            [t for t in tasks if t.agent == agent],
            lost=lost_session,
            resources=resources,
            prepare=prepare,
        )
        _collect(results, store, on_record, checks)
    if checks:
        first = dict(checks[0])
        first["workers"] = checks
        store.update_info(self_check=first)


def _check_agents_reachable(agents: Sequence[str], ray_address: str | None) -> None:
    """An agent on this machine's loopback cannot be reached from a remote cluster's nodes."""
    import re

    from voxassay.core.ray_executor import is_remote

    if not is_remote(ray_address):
        return
    for a in agents:
        m = re.search(r"://(\[[^\]]*\]|[^/:?]+)", a)
        host = (m.group(1) if m else "").strip("[]").lower()
        if host == "localhost" or host == "::1" or host.startswith("127.") or host == "0.0.0.0":
            raise InputError(
                f"{a}: an agent on this machine's loopback cannot be reached from the Ray "
                f"cluster at {ray_address}; give an address its nodes can reach"
            )


def _start_sound_server() -> Any:
    """The run's own PulseAudio server; ``InputError`` before any session when it cannot run."""
    from voxassay.systems.duplex.pulse_simple import library_available
    from voxassay.systems.duplex.sound_server import PulseServer, pulseaudio_path

    if pulseaudio_path() is None or not library_available():
        raise InputError(
            "--loop pulseaudio needs PulseAudio (apt install pulseaudio pulseaudio-utils; "
            "make system-deps-test installs it)"
        )
    try:
        return PulseServer()
    except (OSError, RuntimeError, TimeoutError) as exc:
        raise InputError(f"--loop pulseaudio: the sound server did not start: {exc}") from None


def _self_check_loop(store: RunStore, sound: Any) -> None:
    from voxassay.suites.duplex.live.loop import measure_loop

    check = dict(store.info().get("self_check") or {"latency": {}, "errors": []})
    try:
        check["loop"] = measure_loop(sound)
    except Exception as exc:  # never fatal
        check.setdefault("errors", []).append(
            {"stage": "loop", "error": f"{type(exc).__name__}: {exc}"}
        )
    store.update_info(self_check=check)

"""``voxeval duplex run``: scenarios against a live agent, one evidence bundle per session,
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

import contextlib
import fnmatch
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxeval.contracts.duplex.manifest import ClockInfo, Provenance, SystemInfo
from voxeval.contracts.duplex.matrix import AcceptanceMatrix
from voxeval.contracts.duplex.scenario import Scenario
from voxeval.core.errors import InputError
from voxeval.core.items import Item, file_sha256
from voxeval.core.records import Record, error_record
from voxeval.core.runstore import RunStore, utc_now
from voxeval.suites.duplex.live.session import SessionConfig, run_session

__all__ = ["AgentFactory", "build_agent_factory", "run_scenarios", "select_scenarios"]

AgentFactory = Callable[[], Any]
LIVE_VERSION = "1"


def select_scenarios(
    scenarios: Sequence[tuple[Scenario, Path]], only: Sequence[str] = ()
) -> list[tuple[Scenario, Path]]:
    """Scenarios whose category (name or number) or id matches one of the ``only`` globs."""
    if not only:
        return list(scenarios)
    from voxeval.contracts.duplex.vocabulary import CATEGORY_NUMBER

    out = []
    for sc, path in scenarios:
        names = {sc.id, str(sc.category), str(CATEGORY_NUMBER[sc.category])}
        if any(fnmatch.fnmatchcase(n, pat) for pat in only for n in names):
            out.append((sc, path))
    if not out:
        raise InputError(f"--only {' '.join(only)}: no scenario matches (ids, categories, 1-8)")
    return out


def build_agent_factory(spec: str) -> tuple[AgentFactory, dict[str, Any]]:
    """The agent factory for a system spec (capability ``duplex``) and what to record."""
    from voxeval.core.registry import REGISTRY
    from voxeval.core.specs import parse_spec

    parsed = parse_spec(spec)
    factory = REGISTRY.build("duplex", spec)
    if not callable(factory):
        raise InputError(f"{spec}: the duplex backend {parsed.backend!r} gave no agent factory")
    info = getattr(factory, "info", None)
    return factory, dict(info) if isinstance(info, dict) else {"backend": parsed.backend}


def route_spec(spec: str, route: str, routes: list[str]) -> str:
    """``spec`` set to take ``route``: a WebRTC agent's ``route`` option (a run of several
    routes needs agents that can take each: WebRTC without a route of its own)."""
    from voxeval.core.specs import parse_spec

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
    """
    from voxeval.suites.duplex.evidence.bundle_io import BundleRef
    from voxeval.suites.duplex.scoring.score_run import score_ref, scoring_config

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
    if self_check and todo:
        _self_check_latency(store, {transports[a] for a in agents}, clock, frame_ms)
        if sound is not None:
            _self_check_loop(store, sound)
    try:
        for a, sc, path, r in todo:
            provenance = Provenance(
                transport=transports[a],  # type: ignore[arg-type]
                clock="monotonic" if clock == "real" else "virtual",
                playback="modelled" if sound is None else "real_device_capture",
                capture="none" if sound is None else "loopback_soundcard",
                traffic="synthetic",
                acoustic_events="output_stream" if sound is None else "capture",
                player="model" if sound is None else "process",
                loop="none" if sound is None else "virtual_sound_card",
            )
            stored = f"bundles/{sc.id}/{r}"
            if len(agents) > 1:
                stored += f"/{_agent_key(a)}"
            rec = _one_session(
                sc,
                path,
                r,
                a,
                factories[(a, routes[r % len(routes)])],
                infos[a],
                stored,
                store,
                configs[routes[r % len(routes)]],
                provenance,
                detector,
                clips,
                cache,
                BundleRef,
                score_ref,
                state_probe,
                sound,
            )
            store.append(rec)
            if on_record:
                on_record(rec)
    finally:
        store.close()
        if sound is not None:
            sound.close()
    if self_check:
        _self_check_pacing(store, clock)
    from voxeval.report import finish_run

    return finish_run(store, write_reports)


def _self_check_latency(store: RunStore, transports: set[str], clock: str, frame_ms: int) -> None:
    """The harness-added latency probe, before the sessions (never fatal)."""
    from voxeval.suites.duplex.live.selfcheck import run_self_check

    try:
        check = run_self_check(transports, clock, frame_ms=frame_ms)
    except Exception as exc:  # run_self_check records its own errors; this is a last guard
        check = {
            "clock": clock,
            "latency": {},
            "errors": [{"stage": "self_check", "error": repr(exc)}],
        }
    check["measured_at"] = utc_now()
    store.update_info(self_check=check)


def _self_check_pacing(store: RunStore, clock: str) -> None:
    """Pool the frame pacing error of every session of the run into ``self_check``."""
    from voxeval.suites.duplex.live.selfcheck import add_target_status, pacing_from_records

    check = dict(store.info().get("self_check") or {"clock": clock, "latency": {}, "errors": []})
    try:
        check.update(pacing_from_records(store.load_records().records, clock))
    except Exception as exc:  # never fatal
        check.setdefault("errors", []).append({"stage": "pacing", "error": repr(exc)})
    store.update_info(self_check=add_target_status(check))


def _one_session(
    sc: Scenario,
    path: Path,
    r: int,
    agent: str,
    factory: AgentFactory,
    agent_info: dict[str, Any],
    stored: str,
    store: RunStore,
    cfg: SessionConfig,
    provenance: Provenance,
    detector: str,
    clips: str | Path | None,
    cache: Path,
    bundle_ref: Any,
    score_ref: Any,
    state_probe: str | None = None,
    sound: Any = None,
) -> Record:
    from voxeval.suites.duplex.live.bundle_writer import write_bundle
    from voxeval.suites.duplex.live.stimuli import render_segments

    started = utc_now()
    t0 = time.perf_counter()
    try:
        audio = render_segments(
            sc, path.parent, sample_rate=cfg.sample_rate, cache_dir=cache, clips=clips
        )
    except Exception as exc:  # any render failure is this session's error
        return _error(sc, agent, r, "render", f"{type(exc).__name__}: {exc}", started)
    try:
        instance = factory()
    except Exception as exc:  # a system that cannot start is an error record
        return _error(sc, agent, r, "agent-start", f"{type(exc).__name__}: {exc}", started)
    sid = f"{sc.id}-r{r}-{store.run_id[-4:]}"
    player = None
    if sound is not None:
        from voxeval.systems.duplex.sound_loop import SoundLoop

        player = SoundLoop(sound, cfg.sample_rate)
        try:
            player.start()
        except Exception as exc:  # a loop that cannot start is this session's error
            _close_quietly(instance)
            return _error(sc, agent, r, "loop", f"{type(exc).__name__}: {exc}", started)
    looped = None
    try:
        result = run_session(sc, audio, instance, cfg, sid, loop=player)
        if player is not None:
            from voxeval.suites.duplex.live.loop import loop_evidence

            looped = loop_evidence(
                result.output, player.stop(), result.origin_ns, sample_rate=cfg.sample_rate
            )
            result.stats["loop"] = {
                k: looped.doc[k] for k in ("latency_ms", "jitter_ms", "n_windows", "problems")
            }
        if state_probe and result.end.final_state is None:
            state, problem = probe_state(state_probe, sid, sc.id)
            result.end.final_state = state
            result.stats["state_probe"] = {"probe": state_probe, "problem": problem}
        raw_log = getattr(instance, "write_raw_log", None)
        log_name = str(getattr(instance, "RAW_LOG_NAME", "realtime.jsonl"))
        extra_files = {log_name: raw_log} if callable(raw_log) else {}
    finally:
        if player is not None:
            player.close()
        _close_quietly(instance)
    version = agent_info.get("version") or result.end.info.get("version")
    system = SystemInfo(
        name=agent,
        version=str(version) if version else None,
        config={**{k: v for k, v in agent_info.items() if k != "version"}, **result.end.info},
    )
    clock = ClockInfo(
        kind="real" if cfg.clock == "real" else "virtual",
        compute=cfg.compute if cfg.clock == "virtual" else None,
        audio_origin_ns=0,
    )
    write_bundle(
        result,
        store.path / stored,
        system=system,
        provenance=provenance,
        clock=clock,
        extra={"repeat": r, "agent_spec": agent},
        extra_files=extra_files,
        loop=looped,
    )
    ref = bundle_ref(
        path=store.path / stored,
        key=sc.id,
        system=agent,
        session_id=sid,
        scenario_id=sc.id,
        scenario_version=sc.version,
        repeat=r,
        stored=stored,
    )
    rec: Record = score_ref(ref, store, detector=detector)
    rec.output["session_stats"] = result.stats
    rec.output["skipped_segments"] = result.skipped
    rec.started_at = started
    rec.timing["wall_s"] = round(time.perf_counter() - t0, 3)
    return rec


def _close_quietly(instance: Any) -> None:
    close = getattr(instance, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing is best effort
            close()


def _start_sound_server() -> Any:
    """The run's own PulseAudio server; ``InputError`` before any session when it cannot run."""
    from voxeval.systems.duplex.pulse_simple import library_available
    from voxeval.systems.duplex.sound_server import PulseServer, pulseaudio_path

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
    from voxeval.suites.duplex.live.loop import measure_loop

    check = dict(store.info().get("self_check") or {"latency": {}, "errors": []})
    try:
        check["loop"] = measure_loop(sound)
    except Exception as exc:  # never fatal
        check.setdefault("errors", []).append(
            {"stage": "loop", "error": f"{type(exc).__name__}: {exc}"}
        )
    store.update_info(self_check=check)


def probe_state(probe: str, session_id: str, scenario_id: str) -> tuple[Any, str | None]:
    """The business state of an agent without an export: ``probe`` is an http(s) URL (GET,
    JSON body; ``{session_id}`` and ``{scenario_id}`` in it are filled in) or a command (run
    without a shell, JSON on stdout; it gets ``VOXEVAL_SESSION_ID`` and
    ``VOXEVAL_SCENARIO_ID`` in its environment). 30 s bound. Returns (state, problem)."""
    import json
    import os
    import shlex
    import subprocess
    import urllib.request

    try:
        if probe.startswith(("http://", "https://")):
            url = probe.format(session_id=session_id, scenario_id=scenario_id)
            with urllib.request.urlopen(url, timeout=30) as resp:  # the user's own state URL
                body = resp.read().decode("utf-8")
        else:
            env = {
                **os.environ,
                "VOXEVAL_SESSION_ID": session_id,
                "VOXEVAL_SCENARIO_ID": scenario_id,
            }
            proc = subprocess.run(
                shlex.split(probe), capture_output=True, text=True, timeout=30, env=env
            )
            if proc.returncode != 0:
                return None, f"exit {proc.returncode}: {proc.stderr.strip()[:300]}"
            body = proc.stdout
        state = json.loads(body)
    except Exception as exc:  # the probe's failure is recorded; the session still scores
        return None, f"{type(exc).__name__}: {exc}"
    if not isinstance(state, dict):
        return None, f"the probe returned {type(state).__name__}, not a JSON object"
    return state, None


def _error(sc: Scenario, agent: str, r: int, kind: str, message: str, started: str) -> Record:
    rec = error_record(sc.id, agent, r, kind, message)
    rec.output = {"unit": f"{sc.id}#{r}", "repeat": r, "problems": []}
    rec.started_at, rec.ended_at = started, utc_now()
    return rec

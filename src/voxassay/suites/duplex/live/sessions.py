"""One live session as an executor task: run it, write its bundle, score it.

A :class:`SessionTask` names the scenario, the repeat, the agent (as the run names it and as
the worker builds it, its route set), the bundle's place in the run and the session's
configuration; with ``--ship-audio`` it also carries the scenario's rendered segments (a
handle in Ray's object store), so the worker renders and opens nothing.

A :class:`SessionWorker` holds what one worker builds once: the agents' factories (built from
their specs in the worker), the speech detector and, for the first session it runs, the
harness self-check (measured where the sessions run). Given the run's folder it writes the
bundle there (local executors); without one (a distributed executor) it writes the bundle into
a private temporary folder, scores it there and hands back its files, which the driver alone
writes into the run. Either way the record is the same.

Seeds are the run's, set per session (the fault model of each session is seeded anew), never
per worker.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxassay.contracts.duplex.manifest import ClockInfo, Provenance, SystemInfo
from voxassay.contracts.duplex.scenario import Scenario
from voxassay.core.cpu import CpuMeter
from voxassay.core.errors import InputError
from voxassay.core.records import Record, error_record
from voxassay.core.runstore import utc_now
from voxassay.core.shipped import RUN_FOLDER, read_tree, rebase
from voxassay.suites.duplex.live.session import SessionConfig, run_session

__all__ = [
    "SelfCheckPlan",
    "SessionDone",
    "SessionTask",
    "SessionWorker",
    "build_agent_factory",
    "lost_session",
    "measure_self_check",
    "probe_state",
]


AgentFactory = Callable[[], Any]


def build_agent_factory(spec: str) -> tuple[AgentFactory, dict[str, Any]]:
    """The agent factory for a system spec (capability ``duplex``) and what to record."""
    from voxassay.core.registry import REGISTRY
    from voxassay.core.specs import parse_spec

    parsed = parse_spec(spec)
    factory = REGISTRY.build("duplex", spec)
    if not callable(factory):
        raise InputError(f"{spec}: the duplex backend {parsed.backend!r} gave no agent factory")
    info = getattr(factory, "info", None)
    return factory, dict(info) if isinstance(info, dict) else {"backend": parsed.backend}


@dataclass
class SessionTask:
    """One session of the run."""

    scenario: Scenario
    path: str
    """The scenario's file (its folder holds the assets a render reads)."""
    repeat: int
    agent: str
    """The agent's spec as the run names it (the record's system)."""
    spec: str
    """The spec the worker builds: ``agent`` with the session's route set."""
    route: str
    stored: str
    """The bundle's folder in the run: ``bundles/<scenario>/<repeat>[/<agent>]``."""
    session_id: str
    cfg: SessionConfig
    provenance: Provenance
    audio: Any = None
    """The rendered segments (segment id -> samples), or a handle to them, when shipped."""
    render_error: str | None = None
    """Why the driver could not render the shipped segments (the session's error)."""


@dataclass
class SelfCheckPlan:
    """What the harness self-check probes: the run's transports, clock and frame size."""

    transports: list[str]
    clock: str
    frame_ms: int


@dataclass
class SessionDone:
    """A worker's answer for one session."""

    record: Record
    stored: str | None = None
    """The bundle's folder in the run."""
    files: dict[str, bytes] | None = None
    """The bundle's files by path inside it, when the worker wrote it away from the run."""
    self_check: dict[str, Any] | None = None
    """The harness self-check measured on this worker, with its first session."""


def lost_session(task: SessionTask, reason: str) -> SessionDone:
    """The record of a session whose worker died more often than the executor retries."""
    rec = _error(task.scenario, task.agent, task.repeat, "worker_lost", reason, utc_now())
    return SessionDone(rec, task.stored)


@dataclass
class SessionWorker:
    """Runs sessions; see the module docstring."""

    detector: str = "silero"
    clips: str | None = None
    cache: str | None = None
    state_probe: str | None = None
    run_path: str | None = None
    """The run's folder (local executors); None: bundles go back to the driver as bytes."""
    self_check: SelfCheckPlan | None = None
    factories: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    """spec -> (agent factory, what to record of it); built here from the spec if absent."""
    sound: Any = None
    _checked: bool = field(default=False, init=False)

    def __call__(self, task: SessionTask) -> SessionDone:
        check = None
        if self.self_check is not None and not self._checked:
            self._checked = True
            check = measure_self_check(self.self_check)
        if self.run_path is not None:
            rec = self._run(task, Path(self.run_path))
            return SessionDone(rec, task.stored, None, check)
        scratch = Path(tempfile.mkdtemp(prefix="voxassay-session-"))
        try:
            rec = self._run(task, scratch)
            folder = scratch / task.stored
            files = read_tree(folder) if folder.is_dir() else None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        rec.output = rebase(rec.output, str(scratch), RUN_FOLDER)
        return SessionDone(rec, task.stored, files, check)

    def _factory(self, spec: str) -> tuple[Any, dict[str, Any]]:
        if spec not in self.factories:
            self.factories[spec] = build_agent_factory(spec)
        return self.factories[spec]

    def _run(self, task: SessionTask, run_path: Path) -> Record:
        from voxassay.suites.duplex.evidence.bundle_io import BundleRef
        from voxassay.suites.duplex.live.bundle_writer import write_bundle
        from voxassay.suites.duplex.scoring.score_run import score_ref

        sc, r, agent, cfg = task.scenario, task.repeat, task.agent, task.cfg
        started = utc_now()
        t0 = time.perf_counter()
        try:
            factory, agent_info = self._factory(task.spec)
        except Exception as exc:  # a system that cannot be built is an error record
            return _error(sc, agent, r, "agent-start", f"{type(exc).__name__}: {exc}", started)
        try:
            audio = self._audio(task)
        except Exception as exc:  # any render failure is this session's error
            return _error(sc, agent, r, "render", f"{type(exc).__name__}: {exc}", started)
        try:
            instance = factory()
        except Exception as exc:  # a system that cannot start is an error record
            return _error(sc, agent, r, "agent-start", f"{type(exc).__name__}: {exc}", started)
        sid = task.session_id
        player = None
        if self.sound is not None:
            from voxassay.systems.duplex.sound_loop import SoundLoop

            player = SoundLoop(self.sound, cfg.sample_rate)
            try:
                player.start()
            except Exception as exc:  # a loop that cannot start is this session's error
                _close_quietly(instance)
                return _error(sc, agent, r, "loop", f"{type(exc).__name__}: {exc}", started)
        looped = None
        try:
            with CpuMeter() as meter:
                result = run_session(sc, audio, instance, cfg, sid, loop=player)
            result.stats.update(_contention(meter, cfg))
            if player is not None:
                from voxassay.suites.duplex.live.loop import loop_evidence

                looped = loop_evidence(
                    result.output, player.stop(), result.origin_ns, sample_rate=cfg.sample_rate
                )
                result.stats["loop"] = {
                    k: looped.doc[k] for k in ("latency_ms", "jitter_ms", "n_windows", "problems")
                }
            if self.state_probe and result.end.final_state is None:
                state, problem = probe_state(self.state_probe, sid, sc.id)
                result.end.final_state = state
                result.stats["state_probe"] = {"probe": self.state_probe, "problem": problem}
            raw_log = getattr(instance, "write_raw_log", None)
            log_name = str(getattr(instance, "RAW_LOG_NAME", "realtime.jsonl"))
            extra_files = {log_name: raw_log} if callable(raw_log) else {}
        finally:
            if player is not None:
                player.close()
            _close_quietly(instance)
        never = never_reached(result)
        if never is not None:  # no agent took part: nothing to score
            return _error(sc, agent, r, *never, started)
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
            run_path / task.stored,
            system=system,
            provenance=task.provenance,
            clock=clock,
            extra={"repeat": r, "agent_spec": agent},
            extra_files=extra_files,
            loop=looped,
        )
        ref = BundleRef(
            path=run_path / task.stored,
            key=sc.id,
            system=agent,
            session_id=sid,
            scenario_id=sc.id,
            scenario_version=sc.version,
            repeat=r,
            stored=task.stored,
        )
        rec: Record = score_ref(ref, detector=self.detector)
        rec.output["session_stats"] = result.stats
        rec.output["skipped_segments"] = result.skipped
        rec.started_at = started
        rec.timing["wall_s"] = round(time.perf_counter() - t0, 3)
        return rec

    def _audio(self, task: SessionTask) -> dict[str, Any]:
        """The scenario's segments: shipped with the task, or rendered here."""
        if task.render_error is not None:
            raise RuntimeError(task.render_error)
        if task.audio is not None:
            from voxassay.core.ray_executor import fetch

            return dict(fetch(task.audio))
        from voxassay.suites.duplex.live.stimuli import render_segments

        return render_segments(
            task.scenario,
            Path(task.path).parent,
            sample_rate=task.cfg.sample_rate,
            cache_dir=self.cache,
            clips=self.clips,
        )


def measure_self_check(plan: SelfCheckPlan) -> dict[str, Any]:
    """The harness-added latency probe (never fatal), stamped with where it ran."""
    import os

    from voxassay.suites.duplex.live.selfcheck import run_self_check

    try:
        check = run_self_check(plan.transports, plan.clock, frame_ms=plan.frame_ms)
    except Exception as exc:  # run_self_check records its own errors; this is a last guard
        check = {
            "clock": plan.clock,
            "latency": {},
            "errors": [{"stage": "self_check", "error": repr(exc)}],
        }
    check["measured_at"] = utc_now()
    check["pid"] = os.getpid()
    return check


def _contention(meter: CpuMeter, cfg: Any) -> dict[str, Any]:
    """``cpu`` (what ``core.cpu`` measured over the session) and ``contended``: the process
    waited for a CPU over a tenth of its CPU time while the in-process agent's compute was
    charged to the virtual clock. At zero compute no latency depends on the machine; on the
    real clock the agent runs elsewhere (its own process or server), and this process's
    waiting says little of it: both record the figures and mark nothing."""
    use = meter.use
    if use is None:
        return {}
    timed = cfg.clock == "virtual" and cfg.compute == "charged"
    return {"cpu": use.to_dict(), "contended": bool(timed and use.contended)}


def _close_quietly(instance: Any) -> None:
    close = getattr(instance, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing is best effort
            close()


def probe_state(probe: str, session_id: str, scenario_id: str) -> tuple[Any, str | None]:
    """The business state of an agent without an export: ``probe`` is an http(s) URL (GET,
    JSON body; ``{session_id}`` and ``{scenario_id}`` in it are filled in) or a command (run
    without a shell, JSON on stdout; it gets ``VOXASSAY_SESSION_ID`` and
    ``VOXASSAY_SCENARIO_ID`` in its environment). 30 s bound. Returns (state, problem)."""
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
                "VOXASSAY_SESSION_ID": session_id,
                "VOXASSAY_SCENARIO_ID": scenario_id,
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


_UNREACHABLE = (
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "TimeoutError",
    "OSError",
    "gaierror",
)
"""Exceptions that mean the agent could not be reached (an in-process agent's backend)."""


def never_reached(result: Any) -> tuple[str, str] | None:
    """``(kind, message)`` when no agent took part in the session (the session's
    ``stats["no_agent"]``), None when one did: ``unreachable`` for a connection that failed
    (the transport's ``connect`` error, or a connection error raised before any call
    returned), ``agent-start`` for anything else (a missing key, a crash in its start)."""
    why = result.stats.get("no_agent")
    if not why:
        return None
    kind, reason = str(why["kind"]), str(why["reason"])
    raised = reason.split(":", 1)[0]
    if kind == "connect" or (kind == "raised" and (raised in _UNREACHABLE or "Connect" in raised)):
        return "unreachable", f"the agent could not be reached: {reason}"
    return "agent-start", f"the agent failed before it took part: {reason}"


def _error(sc: Scenario, agent: str, r: int, kind: str, message: str, started: str) -> Record:
    rec = error_record(sc.id, agent, r, kind, message)
    rec.output = {"unit": f"{sc.id}#{r}", "repeat": r, "problems": []}
    rec.started_at, rec.ended_at = started, utc_now()
    return rec

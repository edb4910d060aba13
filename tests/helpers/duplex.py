"""Shared test pieces for live duplex sessions: real speech clips and a cut-in scenario."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import SHARED
from voxassay.contracts.duplex.scenario import Scenario

SR = 16_000
ARCTIC = SHARED / "data" / "read_speech" / "cmu_arctic"
needs_speech = pytest.mark.skipif(
    not ARCTIC.is_dir(), reason=f"needs ../shared/data read speech ({ARCTIC})"
)


def need(what: str, present: bool, how: str) -> None:
    """Skip when ``what`` is missing, saying why; under ``CI=true`` fail instead (CI installs
    it: a missing transport dependency there is a broken set-up, not a reason to skip)."""
    import os

    if present:
        return
    message = f"{what} is not available: {how}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {message}")
    pytest.skip(message)


def importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def arctic_clip(name: str, seconds: float | None = None) -> np.ndarray:
    """A CMU ARCTIC recording at 16 kHz float32, optionally cut to ``seconds``."""
    import soxr

    x, sr = sf.read(ARCTIC / name, dtype="float32")
    y = soxr.resample(x, sr, SR).astype(np.float32)
    return y[: int(seconds * SR)] if seconds else y


def cut_in_scenario(scenario_id: str, at_ms: int, **over: Any) -> Scenario:
    """An ask at ``at_ms`` and an interruption 1 s after the answer starts playing."""
    doc: dict[str, Any] = {
        "id": scenario_id,
        "version": 1,
        "category": "interruption",
        "segments": [
            {"id": "ask", "role": "user", "audio": "a.wav", "at_ms": at_ms, "intents": ["start"]},
            {
                "id": "cut",
                "role": "user",
                "audio": "b.wav",
                "after": {"event": "playback.started", "ref": "ask", "offset_ms": 1000},
                "intents": ["interrupt"],
                "expected_actions": ["interrupt"],
            },
        ],
    }
    doc.update(over)
    return Scenario.model_validate(doc)


def default_set_run(tmp_path_factory: pytest.TempPathFactory, agent: str) -> Any:
    """``agent`` over the whole default scenario set (virtual clock, zero compute, seed 0),
    run once per test session and read by every module that asks (fault injection, the
    ranking, the turn layer): a ``RunStore``. Rendered audio goes to the session's shared
    render cache."""
    from tests.helpers.shared import shared_dir
    from voxassay.core.runstore import RunStore
    from voxassay.suites.duplex.live.runner import run_scenarios
    from voxassay.suites.duplex.live.scenarios import load_scenario_set

    def build(folder: Any) -> None:
        scenarios = load_scenario_set("default")
        cache = render_cache(tmp_path_factory)
        run_scenarios(scenarios, agent, folder, compute="zero", cache_dir=cache, seed=0)

    key = "default-set-" + agent.replace(":", "_").replace("+", "_").replace("=", "_")
    folder = shared_dir(tmp_path_factory, key, build)
    (run_dir,) = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return RunStore.open(run_dir)


def render_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's content-keyed render cache (synthesized scenario speech), shared by
    every module and worker; writes are atomic, so concurrent renders are safe."""
    from tests.helpers.shared import session_root

    path = session_root(tmp_path_factory) / "render-cache"
    path.mkdir(exist_ok=True)
    return path

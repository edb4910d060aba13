"""Shared pieces of the study tests: real rated stimuli, questions, a served study."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import DATA, REPO

MUSHRA = DATA / "ratings" / "neural_codec_mushra"
MUSHRA_AUDIO = MUSHRA / "audio"
SYSTEMS = ("ref", "lyra_6", "audiodec_8", "prop_55")


def mushra_audio() -> Path:
    """The codec MUSHRA stimuli (real rated audio), or skip with the reason."""
    if not (MUSHRA_AUDIO / "stim_01" / "ref.flac").is_file():
        pytest.skip(f"real rated stimuli not found at {MUSHRA_AUDIO} (../shared/data)")
    return MUSHRA_AUDIO


def write_items(
    path: Path,
    n_signals: int = 4,
    systems: tuple[str, ...] = SYSTEMS[:3],
    gold: dict[str, float] | None = None,
) -> Path:
    """items.jsonl over real stimuli: one item per (signal, system), grouped by signal."""
    audio = mushra_audio()
    lines = []
    for n in range(1, n_signals + 1):
        for system in systems:
            lines.append(
                {
                    "id": f"stim{n:02d}-{system}",
                    "system": system,
                    "audio": str(audio / f"stim_{n:02d}" / f"{system}.flac"),
                    "group": f"stim{n:02d}",
                }
            )
    if gold:
        lines.append(
            {
                "id": "gold-ref",
                "system": "ref",
                "audio": str(audio / "stim_16" / "ref.flac"),
                "gold": gold,
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


LIKERT = {
    "id": "quality",
    "dimension": "quality",
    "kind": "likert",
    "question": "How good is the sound quality?",
    "scale": {"min": 1, "max": 5, "labels": {1: "Bad", 5: "Excellent"}},
}
PAIRWISE = {
    "id": "preference",
    "dimension": "quality",
    "kind": "pairwise",
    "question": "Which recording sounds better?",
}


def write_questions(path: Path, evals: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    doc: dict[str, Any] = {"title": "Codec test", "evals": evals or [LIKERT]}
    doc.update(extra)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def read_invites(study_dir: Path) -> dict[str, str]:
    """name -> token, from invites.txt."""
    out = {}
    for line in (study_dir / "invites.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, link = line.split()
        out[name] = link.rsplit("/", 1)[1]
    return out


def study_json(study_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((study_dir / "study.json").read_text(encoding="utf-8"))
    return data


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxassay.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=600,
    )


class Served:
    """A real ``voxassay study serve`` process on an ephemeral loopback port."""

    def __init__(self, study_dir: Path) -> None:
        self.study_dir = study_dir
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voxassay.cli.main",
                "study",
                "serve",
                str(study_dir),
                "--port",
                "0",
                "--host",
                "127.0.0.1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            self.url = lines.get(timeout=60).strip()
        except queue.Empty:
            self.proc.kill()
            raise RuntimeError("study serve printed no URL within 60 s") from None
        if not self.url.startswith("http://127.0.0.1:"):
            self.proc.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"study serve failed: {self.url!r} {err[-2000:]}")
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("study serve did not answer /healthz")
            time.sleep(0.05)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def served(study_dir: Path) -> Iterator[Served]:
    s = Served(study_dir)
    try:
        yield s
    finally:
        s.stop()


def pass_gates(client: httpx.Client, study_dir: Path) -> None:
    """Skip the profile and pass the headphone check through the JSON API."""
    state = client.get("/api/state").json()
    if state["stage"] == "profile":
        r = client.post("/api/profile", json={"skip": True})
        assert r.status_code == 200, r.text
        state = client.get("/api/state").json()
    if state["stage"] == "headphones":
        answers = {t["id"]: t["answer"] for t in study_json(study_dir)["headphone_check"]["trials"]}
        r = client.post("/api/headphones", json={"answers": answers})
        assert r.status_code == 200 and r.json()["passed"], r.text


def answer_for(task: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """A valid answer for every eval of a task from ``/api/state``."""
    out = {}
    for n, ev in enumerate(task["evals"]):
        choices = ev["answers"]
        out[ev["id"]] = choices[(seed + n) % len(choices)]
    return out

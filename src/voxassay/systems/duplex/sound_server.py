"""A PulseAudio server of the run's own, with virtual sound cards and no hardware.

``PulseServer`` starts ``pulseaudio`` in user mode without the system configuration (``-n``):
a private runtime folder, a unix socket only (no TCP), anonymous access on that socket, and
two null sinks: ``voxassay_play`` (what the player plays; its ``.monitor`` is the capture) and
``voxassay_mic`` (the agent's microphone mix). Clients reach it through ``env``
(``PULSE_SERVER``); ``pacat``/``parec`` stand in for a real player and recorder. It works
where there is no ``/dev/snd`` (this machine has none). Close it with ``close()`` or a
``with`` block: the process and its folder go.

``play_and_capture`` runs a real player and recorder through the loop and returns what was
captured, for tests and the loop's self-check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.processes import stop_process

__all__ = ["PulseServer", "pulseaudio_path"]

PLAY_SINK = "voxassay_play"
MIC_SINK = "voxassay_mic"


def pulseaudio_path() -> str | None:
    """The ``pulseaudio`` binary, when it and its client tools (pacat, parec, pactl) exist."""
    binary = shutil.which("pulseaudio")
    tools = all(shutil.which(t) for t in ("pacat", "parec", "pactl"))
    return binary if binary and tools else None


class PulseServer:
    """A private PulseAudio server (module docstring)."""

    def __init__(self, start_timeout_s: float = 10.0) -> None:
        binary = pulseaudio_path()
        if binary is None:
            raise FileNotFoundError(
                "pulseaudio and pulseaudio-utils are not installed (apt install pulseaudio "
                "pulseaudio-utils)"
            )
        self._dir = tempfile.TemporaryDirectory(prefix="voxassay-pulse-")
        root = Path(self._dir.name)
        (root / "run").mkdir()
        self.socket = root / "native"
        config = root / "voxassay.pa"
        config.write_text(
            f"load-module module-native-protocol-unix socket={self.socket} auth-anonymous=1\n"
            f"load-module module-null-sink sink_name={PLAY_SINK} rate=48000 "
            f"sink_properties=device.description={PLAY_SINK}\n"
            f"load-module module-null-sink sink_name={MIC_SINK} rate=48000 "
            f"sink_properties=device.description={MIC_SINK}\n",
            encoding="utf-8",
        )
        self.log_path = root / "pulse.log"
        env = dict(os.environ, HOME=str(root), XDG_RUNTIME_DIR=str(root / "run"))
        env.pop("PULSE_SERVER", None)
        self._log = open(self.log_path, "wb")  # noqa: SIM115  (closed in close())
        self.proc = subprocess.Popen(
            [
                binary,
                "-n",
                "-F",
                str(config),
                "--daemonize=no",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                "--disable-shm=yes",
                "--log-target=stderr",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env=env,
        )
        self.env = {"PULSE_SERVER": f"unix:{self.socket}"}
        self._wait_ready(start_timeout_s)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"pulseaudio exited ({self.proc.returncode}): {self.log()[-600:]}"
                )
            if self.socket.exists() and self.pactl("info").returncode == 0:
                return
            time.sleep(0.05)
        self.close()
        raise TimeoutError(f"pulseaudio did not start within {timeout} s")

    def client_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def pactl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pactl", *args], env=self.client_env(), capture_output=True, text=True, timeout=10
        )

    def version(self) -> str:
        out = self.pactl("info").stdout
        for line in out.splitlines():
            if line.startswith("Server Version:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def sinks(self) -> list[str]:
        out = self.pactl("list", "short", "sinks").stdout
        return [line.split("\t")[1] for line in out.splitlines() if "\t" in line]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def play_and_capture(
        self, pcm: np.ndarray, sample_rate: int = 16_000, tail_s: float = 0.5
    ) -> dict[str, Any]:
        """Play ``pcm`` (int16 mono, written in 20 ms frames in real time) with a real player
        (``pacat``) into ``voxassay_play`` while a real recorder (``parec``) captures its
        monitor; the capture (int16), the player's PID and the sample rate. Written all at
        once, the server slips a few samples now and then (measured); paced, the capture is
        continuous. The recorder joins when the sink starts: its first few milliseconds of
        the played stream are not in the capture."""
        common = ["--raw", "--format=s16le", f"--rate={sample_rate}", "--channels=1"]
        rec = subprocess.Popen(
            ["parec", *common, f"--device={PLAY_SINK}.monitor", "--latency-msec=20"],
            stdout=subprocess.PIPE,
            env=self.client_env(),
        )
        chunks: list[bytes] = []

        def read() -> None:
            assert rec.stdout is not None
            while block := rec.stdout.read(4096):
                chunks.append(block)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(0.2)
        player = subprocess.Popen(
            ["pacat", "--playback", *common, f"--device={PLAY_SINK}", "--latency-msec=20"],
            stdin=subprocess.PIPE,
            env=self.client_env(),
        )
        assert player.stdin is not None
        frame = sample_rate // 50  # 20 ms frames written in real time, as audio arrives
        data = np.asarray(pcm, np.int16)
        t0 = time.monotonic()
        for k, i in enumerate(range(0, data.size, frame)):
            while time.monotonic() < t0 + 0.02 * k:
                time.sleep(0.001)
            player.stdin.write(data[i : i + frame].tobytes())
            player.stdin.flush()
        player.stdin.close()
        player.wait(timeout=30 + pcm.size / sample_rate)
        time.sleep(tail_s)
        rec.terminate()
        rec.wait(timeout=5)
        reader.join(timeout=5)
        captured = np.frombuffer(b"".join(chunks), dtype=np.int16)
        return {"capture": captured, "player_pid": player.pid, "sample_rate": sample_rate}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        stop_process(self.proc)
        self._log.close()
        self._dir.cleanup()

    def __enter__(self) -> PulseServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The sound loop of an L3 session: a real player process plays the agent's received audio
into a PulseAudio null sink and a recorder captures the sink's monitor.

``SoundLoop(server, sample_rate)`` opens, on ``start()``, the recorder (a thread of this
process reading ``voxassay_play.monitor`` in 5 ms blocks through libpulse-simple) and the
player (``pulse_player``, its own process). ``play(pcm)`` hands audio to the player as it
arrives (a writer thread keeps the caller from ever blocking on the pipe); ``flush()`` is
the player's stop (it drops everything queued, at the server too). ``stop()`` lets the
player finish, records ``tail_s`` more, and returns a ``LoopCapture``.

Capture clock: after each read (5 ms blocks) the recorder notes the monotonic time ``t``;
sample ``n`` (the total read so far) reached the harness at ``t``, so ``t - n / rate`` is
when sample 0 did. ``LoopCapture.start_ns`` is the median of that over the reads, and
``anchor_spread_us`` their interquartile range (measured here: 0.1 to 0.6 ms). The null
sink renders up to one block ahead of its own clock and its monitor hands that audio on at
once, so the placement is good to a few milliseconds: the loop latency measured on the
audio (``suites.duplex.live.loop``) came out between -2 and +2 ms with a jitter under 1 ms
over repeated probes here. PulseAudio's latency query is not used: on a null sink's monitor
it answered anything from 0.1 to 680 ms (measured).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from voxassay.systems.duplex.pulse_player import command
from voxassay.systems.duplex.pulse_simple import PaSimple, PulseError
from voxassay.systems.duplex.sound_server import PLAY_SINK, PulseServer

__all__ = ["LoopCapture", "SoundLoop"]

BLOCK_MS = 5


@dataclass
class LoopCapture:
    """What one loop recorded (module docstring)."""

    capture: np.ndarray
    """int16 mono at ``sample_rate``, sample 0 captured at ``start_ns``."""
    sample_rate: int
    start_ns: int
    anchor_spread_us: float
    reads: int
    player_pid: int
    pulseaudio_version: str
    sink: str
    monitor: str
    flushes_ns: list[int] = field(default_factory=list)
    """Monotonic times at which the player's flushes took effect at the server."""
    problems: list[str] = field(default_factory=list)

    def sample_at(self, t_ns: int) -> int:
        """The capture sample captured at monotonic time ``t_ns``."""
        return round((t_ns - self.start_ns) * self.sample_rate / 1e9)


class SoundLoop:
    """A player process and a recorder on a ``PulseServer`` (module docstring)."""

    def __init__(self, server: PulseServer, sample_rate: int, *, sink: str = PLAY_SINK) -> None:
        self.server = server
        self.sr = sample_rate
        self.sink = sink
        self.monitor = f"{sink}.monitor"
        self._chunks: list[bytes] = []
        self._anchors: list[int] = []
        self._stop = threading.Event()
        self._recorder: threading.Thread | None = None
        self._rec_error: str | None = None
        self._player: subprocess.Popen[bytes] | None = None
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None
        self.player_pid = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> None:
        """Open the recorder, then the player; raise when either cannot start."""
        ready = threading.Event()
        self._recorder = threading.Thread(target=self._record, args=(ready,), daemon=True)
        self._recorder.start()
        if not ready.wait(timeout_s) or self._rec_error:
            self._stop.set()
            raise RuntimeError(f"the loop's recorder did not start: {self._rec_error or 'timeout'}")
        server = self.server.env["PULSE_SERVER"]
        self._player = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voxassay.systems.duplex.pulse_player",
                server,
                self.sink,
                str(self.sr),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.server.client_env(),
        )
        self.player_pid = self._player.pid
        self._reader = threading.Thread(target=self._read_player, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith(("ready", "error")) for line in self._lines):
            if time.monotonic() > deadline or self._player.poll() is not None:
                break
            time.sleep(0.005)
        if not any(line.startswith("ready") for line in self._lines):
            self.close()
            raise RuntimeError(f"the loop's player did not start: {self._lines or 'no answer'}")
        self._writer = threading.Thread(target=self._write, daemon=True)
        self._writer.start()

    def play(self, pcm: np.ndarray) -> None:
        """Hand agent audio (int16, or float in [-1, 1]) to the player; never blocks."""
        x = np.asarray(pcm)
        if x.dtype.kind == "f":
            x = (np.clip(x, -1.0, 32767 / 32768) * 32768.0).round()
        data = x.astype("<i2").tobytes()
        if data:
            self._outbox.put(command(b"A", data))

    def flush(self) -> None:
        """The player's stop: drop what is queued, here and at the server."""
        self._outbox.put(command(b"F"))

    def heard(self, t_ns: int, n: int) -> np.ndarray:
        """The ``n`` captured samples from monotonic time ``t_ns`` (float32); zeros where the
        recorder has not delivered them yet."""
        out = np.zeros(n, np.float32)
        anchors = self._anchors[-50:]
        if not anchors:
            return out
        start = int(np.median(anchors))
        first = round((t_ns - start) * self.sr / 1e9)
        block = self.sr * BLOCK_MS // 1000  # every read is one block
        count = len(self._chunks)
        have = count * block
        if first < 0 or first >= have:
            return out
        k = min(count, (have - first) // block + 1)
        data = np.frombuffer(b"".join(self._chunks[count - k : count]), dtype="<i2")
        lo = first - (have - data.size)
        part = data[lo : lo + n].astype(np.float32) / 32768.0
        out[: part.size] = part
        return out

    def stop(self, tail_s: float = 0.3, timeout_s: float = 30.0) -> LoopCapture:
        """Let the player play out what it has, record ``tail_s`` more, and return the capture."""
        problems: list[str] = []
        self._outbox.put(command(b"Q"))
        self._outbox.put(None)
        if self._player is not None:
            try:
                self._player.wait(timeout_s)
            except subprocess.TimeoutExpired:
                problems.append(f"the player did not finish within {timeout_s} s: killed")
                self._player.kill()
                self._player.wait(5)
        time.sleep(tail_s)
        self._stop.set()
        if self._recorder is not None:
            self._recorder.join(5)
        if self._reader is not None:
            self._reader.join(2)
        if self._rec_error:
            problems.append(f"recorder: {self._rec_error}")
        problems += [line[6:] for line in self._lines if line.startswith("error ")]
        capture = np.frombuffer(b"".join(self._chunks), dtype="<i2").astype(np.int16)
        anchors = np.asarray(self._anchors, np.float64)
        if anchors.size:
            start = int(np.median(anchors))
            q1, q3 = np.percentile(anchors, [25, 75])
            spread = float(q3 - q1) / 1e3
        else:
            start, spread = 0, float("nan")
            problems.append("the recorder read nothing")
        return LoopCapture(
            capture=capture,
            sample_rate=self.sr,
            start_ns=start,
            anchor_spread_us=round(spread, 1),
            reads=int(anchors.size),
            player_pid=self.player_pid,
            pulseaudio_version=self.server.version(),
            sink=self.sink,
            monitor=self.monitor,
            flushes_ns=[
                int(line.split()[1]) for line in self._lines if line.startswith("flushed ")
            ],
            problems=problems,
        )

    def close(self) -> None:
        """Stop everything without collecting (errors, interrupts)."""
        self._stop.set()
        self._outbox.put(None)
        if self._player is not None and self._player.poll() is None:
            self._player.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._player.wait(5)

    # -- threads -------------------------------------------------------------------------------
    def _record(self, ready: threading.Event) -> None:
        nbytes = self.sr * 2 * BLOCK_MS // 1000
        try:
            stream = PaSimple(
                self.server.env["PULSE_SERVER"],
                self.monitor,
                "record",
                self.sr,
                name="voxassay-recorder",
                fragment_ms=BLOCK_MS,
            )
        except PulseError as exc:
            self._rec_error = str(exc)
            ready.set()
            return
        total = 0
        try:
            while not self._stop.is_set():
                block = stream.read(nbytes)
                t = time.monotonic_ns()
                self._chunks.append(block)
                total += len(block) // 2
                self._anchors.append(t - total * 1_000_000_000 // self.sr)
                if not ready.is_set():
                    ready.set()
        except PulseError as exc:
            self._rec_error = str(exc)
        finally:
            stream.close()
            ready.set()

    def _write(self) -> None:
        assert self._player is not None and self._player.stdin is not None
        pipe = self._player.stdin
        while (item := self._outbox.get()) is not None:
            try:
                pipe.write(item)
                pipe.flush()
            except (BrokenPipeError, OSError):
                break
        with contextlib.suppress(OSError):
            pipe.close()

    def _read_player(self) -> None:
        assert self._player is not None and self._player.stdout is not None
        for raw in self._player.stdout:
            self._lines.append(raw.decode(errors="replace").strip())

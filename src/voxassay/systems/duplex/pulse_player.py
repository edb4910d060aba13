"""The loop's player: a process of its own that plays what it is sent into a PulseAudio sink.

Run as ``python -m voxassay.systems.duplex.pulse_player SERVER DEVICE RATE``. It reads
commands on stdin, each a 5-byte header (a kind byte and a little-endian uint32 length)
and a payload: ``A`` audio (s16le mono at RATE), ``F`` flush (drop everything queued and
not yet played, in this process and at the server: a player's real stop), ``Q`` finish
(play what is queued, then exit). It writes one line per fact on stdout: ``ready PID``
when the stream is open, ``flushed NS`` with the monotonic time (``CLOCK_MONOTONIC``, the
one clock every process here shares) at which the server dropped the buffer, and
``error MESSAGE``. Audio is written to the server in 10 ms pieces, so a flush waits at most
for one piece.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from collections import deque

from voxassay.systems.duplex.pulse_simple import PaSimple, PulseError

HEADER = struct.Struct("<cI")
PIECE_MS = 10


def command(kind: bytes, payload: bytes = b"") -> bytes:
    """One command as the player reads it."""
    return HEADER.pack(kind, len(payload)) + payload


def _read_exact(stream: object, n: int) -> bytes:
    buf = b""
    read = stream.read  # type: ignore[attr-defined]
    while len(buf) < n:
        block = read(n - len(buf))
        if not block:
            raise EOFError
        buf += block
    return bytes(buf)


def main(argv: list[str]) -> int:
    server, device, rate = argv[0], argv[1], int(argv[2])
    try:
        stream = PaSimple(server, device, "playback", rate, name="voxassay-player")
    except PulseError as exc:
        print(f"error {exc}", flush=True)
        return 1
    queue: deque[bytes] = deque()
    cond = threading.Condition()
    state = {"flush": False, "finish": False}

    def reader() -> None:
        src = sys.stdin.buffer
        try:
            while True:
                kind, n = HEADER.unpack(_read_exact(src, HEADER.size))
                payload = _read_exact(src, n) if n else b""
                with cond:
                    if kind == b"A":
                        queue.append(payload)
                    elif kind == b"F":
                        queue.clear()
                        state["flush"] = True
                    elif kind == b"Q":
                        state["finish"] = True
                    cond.notify()
                if kind == b"Q":
                    return
        except (EOFError, struct.error, OSError):
            with cond:
                state["finish"] = True
                cond.notify()

    threading.Thread(target=reader, daemon=True).start()
    print(f"ready {os.getpid()}", flush=True)
    piece = rate * 2 * PIECE_MS // 1000
    pending = b""
    try:
        while True:
            with cond:
                while not (queue or pending or state["flush"] or state["finish"]):
                    cond.wait(0.5)
                if state["flush"]:
                    state["flush"] = False
                    pending = b""
                    flush = True
                else:
                    flush = False
                    while queue and len(pending) < piece:
                        pending += queue.popleft()
                done = state["finish"] and not queue
            if flush:
                stream.flush()
                print(f"flushed {time.monotonic_ns()}", flush=True)
                continue
            if pending:
                out, pending = pending[:piece], pending[piece:]
                stream.write(out)
            elif done:
                break
        stream.drain()
    except PulseError as exc:
        print(f"error {exc}", flush=True)
        return 1
    finally:
        stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The loop's real player and recorder (``sound_loop.SoundLoop``) on a private PulseAudio
server: a real recording handed to the player in 20 ms chunks comes back in the capture (by
the L3 check's rule: at least half the windows correlate with the played speech at 0.5 or more
at their best lag, and no window is a bit-exact copy); a flush stops the player although seconds of audio were still
queued (the capture falls silent after the flush and stays so); ``heard`` returns what was
captured at a given time.

The loop's latency, jitter and read cadence are figures of the machine, not properties of the
code: they are recorded and printed by ``benchmarks/bench_sound_loop.py``, not asserted here.
Under ``CI=true`` a PulseAudio that cannot start fails the test; elsewhere it skips."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.helpers.duplex import need
from voxassay.contracts.duplex.loop_check import MIN_CORRELATION, MIN_MATCHED_SHARE, window_lags
from voxassay.core.lag import best_lag
from voxassay.systems.duplex.pulse_simple import library_available
from voxassay.systems.duplex.sound_loop import SoundLoop
from voxassay.systems.duplex.sound_server import PulseServer, pulseaudio_path

pytestmark = pytest.mark.live
SR = 16_000


def _speech(name: str = "LJ001-0002") -> np.ndarray:
    from voxassay.core.audio import load_audio

    clip = load_audio(shared_data() / f"read_speech/ljspeech/{name}.wav", sr=SR)
    return (np.clip(clip.samples, -1, 32767 / 32768) * 32768).astype(np.int16)


@pytest.fixture(scope="module")
def server() -> PulseServer:
    need(
        "pulseaudio",
        pulseaudio_path() is not None and library_available(),
        "apt install pulseaudio pulseaudio-utils (make system-deps-test)",
    )
    with PulseServer() as s:
        yield s


def test_the_capture_is_the_played_speech_at_the_loops_latency(server: PulseServer) -> None:
    pcm = _speech()
    loop = SoundLoop(server, SR)
    loop.start()
    lead = SR // 5
    t0 = time.monotonic_ns() + lead * 1_000_000_000 // SR
    chunk = SR // 50
    for k, i in enumerate(range(0, pcm.size, chunk)):  # as audio arrives: 20 ms at a time
        while time.monotonic_ns() < t0 + k * 20_000_000:
            time.sleep(0.0005)
        loop.play(pcm[i : i + chunk])
    mid = time.monotonic_ns()
    heard = loop.heard(mid - 300_000_000, SR // 10)
    cap = loop.stop()
    loop.close()
    assert cap.problems == [] and cap.player_pid > 0 and cap.reads > 100
    offset = cap.sample_at(t0)
    out = cap.capture[offset : offset + pcm.size]
    rows = window_lags(pcm, out, SR)
    assert len(rows) >= 3
    # the same speech, by the L3 check's own rule: at least half the windows correlate at 0.5
    # or more (unrelated audio correlates near 0; a loaded machine's player may underrun for a
    # window: 0.33 seen once), each at a lag inside the search range (never more than 20 ms
    # early: causal)
    matched = [w for w in rows if w.correlation >= MIN_CORRELATION]
    assert len(matched) >= MIN_MATCHED_SHARE * len(rows), rows
    assert all(-20 <= w.lag_ms <= 300 for w in matched), rows
    assert not any(w.copied for w in rows)  # the loop resamples: never a bit-exact copy
    # ``heard`` is the capture at that time (placed by the reads so far; searched within
    # 50 ms, over 10x the reads' anchor spread measured under the suite's load)
    at = cap.sample_at(mid - 300_000_000)
    near = cap.capture[at - SR // 20 : at + SR // 10 + SR // 20]
    lag, r = best_lag(heard, near, 0, SR // 10)
    assert r > 0.99 and np.abs(heard).max() > 0.01, (lag, r)


def test_a_flush_stops_the_player_with_seconds_still_queued(server: PulseServer) -> None:
    pcm = _speech("LJ001-0004")  # 5.1 s
    loop = SoundLoop(server, SR)
    loop.start()
    loop.play(pcm)  # the whole recording at once, as a fast agent sends it
    time.sleep(0.8)
    loop.flush()
    time.sleep(0.5)
    cap = loop.stop()
    loop.close()
    assert len(cap.flushes_ns) == 1
    stop = cap.sample_at(cap.flushes_ns[0])
    env = np.abs(cap.capture.astype(np.float64))
    assert env[stop - SR // 4 : stop].max() > 1000  # speech was playing up to the flush
    # silent from 250 ms after the flush to the end (0.5 s later): the null sink hands its
    # monitor what it rendered before the flush (40-90 ms measured), so 250 ms is over 3x that
    after = env[stop + round(0.25 * SR) :]
    assert after.size > SR // 5 and after.max() < 64, (
        "audio after the flush: the player kept playing"
    )
    played = (stop - cap.sample_at(cap.flushes_ns[0] - 800_000_000)) / SR
    assert pcm.size / SR - played > 3.0  # seconds of it were still queued when it stopped

"""A PulseAudio server of the run's own (``sound_server.PulseServer``): it starts without
hardware, offers the two null sinks on a private unix socket only, and a real player
(``pacat``) and recorder (``parec``) carry a real recording through the loop: the capture
holds the recording, continuous at one offset (every quarter second after the first
correlates > 0.99 at the same lag, within 2 samples).

Under ``CI=true`` a PulseAudio that cannot start fails the test; elsewhere it skips."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import shared_data
from tests.helpers.duplex import need
from voxassay.systems.duplex.sound_server import MIC_SINK, PLAY_SINK, PulseServer, pulseaudio_path

pytestmark = pytest.mark.live


def test_a_real_player_and_recorder_carry_speech_through_the_loop() -> None:
    need("pulseaudio", pulseaudio_path() is not None, "apt install pulseaudio pulseaudio-utils")
    from voxassay.core.audio import load_audio

    clip = load_audio(shared_data() / "read_speech/ljspeech/LJ001-0002.wav", sr=16_000)
    pcm = (np.clip(clip.samples, -1, 32767 / 32768) * 32768).astype(np.int16)
    with PulseServer() as server:
        assert server.version().startswith(("15", "16", "17"))
        assert set(server.sinks()) == {PLAY_SINK, MIC_SINK}
        assert server.env["PULSE_SERVER"].startswith("unix:")  # no TCP listener
        out = server.play_and_capture(pcm)
        socket = server.socket
    assert not socket.exists()  # the server's folder went with it
    cap = out["capture"].astype(np.float64)
    x = pcm.astype(np.float64)
    assert cap.size >= x.size
    # window by window (a quarter second each) the recording is in the capture at one offset:
    # the loop is continuous (the recorder joins when the sink starts, a few ms late)
    from scipy.signal import correlate

    w = 4_000
    found = []
    for i in range(0, x.size - w, w):
        probe = x[i : i + w]
        if np.sqrt(np.mean(probe**2)) < 300:
            continue  # a pause: nothing to find
        lo = max(0, i - 4_000)
        c = correlate(cap[lo : i + w + 4_000], probe, mode="valid", method="fft")
        lag = int(np.argmax(c)) + lo - i
        best = cap[i + lag : i + lag + w]
        found.append((lag, float(np.corrcoef(best, probe)[0, 1])))
    assert len(found) >= 5
    later = found[1:]  # the first window holds the start the recorder missed
    assert all(rho > 0.99 for _, rho in later), found
    lags = [lag for lag, _ in later]
    assert max(lags) - min(lags) <= 2 and -400 <= lags[0] <= 0, found  # one offset: continuous
    assert out["player_pid"] > 0

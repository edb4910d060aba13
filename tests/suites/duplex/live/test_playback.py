"""The playback model: sample-exact starts, queueing, underruns, completion and cuts."""

from __future__ import annotations

import numpy as np

from voxassay.suites.duplex.live.playback import PlaybackModel

SR = 16_000


def tone(ms: float, amp: float = 0.5) -> np.ndarray:
    n = int(ms * SR / 1000)
    return (amp * np.sin(2 * np.pi * 200 * np.arange(n) / SR)).astype(np.float32)


def kinds(evs: list) -> list[tuple[str, str, int]]:
    return [(e.event_type, e.response_id, e.sample) for e in evs]


def test_an_idle_player_starts_at_arrival_and_plays_in_real_time() -> None:
    p = PlaybackModel(SR, progress_ms=100)
    p.enqueue("r1", tone(250), arrival_sample=1234)
    p.mark_done("r1")
    evs = p.advance_to(SR)
    assert kinds(evs)[0] == ("playback.started", "r1", 1234)
    assert [e.sample for e in evs if e.event_type == "playback.progress"] == [
        1234 + 1600,
        1234 + 3200,
    ]
    assert kinds(evs)[-1] == ("playback.completed", "r1", 1234 + 4000)
    track = p.track()
    assert track.size == SR
    assert not track[:1234].any() and not track[1234 + 4000 :].any()
    assert np.array_equal(track[1234 : 1234 + 4000], tone(250))


def test_a_busy_player_queues_and_a_device_delay_shifts_everything() -> None:
    p = PlaybackModel(SR, device_delay_ms=10)
    p.enqueue("r1", tone(100), arrival_sample=0)
    p.enqueue("r1", tone(100), arrival_sample=100)  # arrives while the first plays
    p.mark_done("r1")
    evs = p.advance_to(8000)
    assert kinds(evs) == [("playback.started", "r1", 160), ("playback.completed", "r1", 160 + 3200)]


def test_underrun_and_late_completion() -> None:
    p = PlaybackModel(SR)
    p.enqueue("r1", tone(100), arrival_sample=0)
    assert kinds(p.advance_to(3200)) == [("playback.started", "r1", 0)]
    p.enqueue("r1", tone(100), arrival_sample=3200)  # 100 ms gap: an underrun
    p.mark_done("r1")
    evs = p.advance_to(8000)
    (done,) = evs
    assert done.event_type == "playback.completed" and done.sample == 3200 + 1600
    assert done.data["underruns"] == 1 and done.played_ms == 200.0
    # 300 ms of wall time, 200 ms of audio: the 100 ms the player starved is reported
    assert done.data["stalled_ms"] == 100.0
    # the agent says "done" only after everything was played
    q = PlaybackModel(SR)
    q.enqueue("r2", tone(100), 0)
    assert kinds(q.advance_to(4000)) == [("playback.started", "r2", 0)]
    q.mark_done("r2")
    assert kinds(q.flush_done()) == [("playback.completed", "r2", 4000)]


def test_clear_cuts_at_the_exact_sample_and_reports_what_was_heard() -> None:
    p = PlaybackModel(SR)
    p.enqueue("r1", tone(2000), arrival_sample=800)
    p.advance_to(1000)
    evs = p.clear("r1", 800 + 8000)  # 500 ms after the start
    (cut,) = [e for e in evs if e.event_type == "playback.interrupted"]
    assert cut.sample == 8800 and cut.played_ms == 500.0
    assert not p.busy() and p.playing() is None
    p.advance_to(SR)
    track = p.track()
    assert np.abs(track[8000:8800]).max() > 0.4 and not track[8800:].any()
    # clearing another response leaves this one alone
    q = PlaybackModel(SR)
    q.enqueue("a", tone(100), 0)
    assert not [e for e in q.clear("b", 10) if e.event_type == "playback.interrupted"]
    assert q.busy()


def test_a_cut_after_a_stall_reports_the_audio_heard_and_the_stall() -> None:
    p = PlaybackModel(SR)
    p.enqueue("r1", tone(500), arrival_sample=0)
    p.advance_to(16_000)  # 500 ms played, then 500 ms starving (a network drop)
    p.enqueue("r1", tone(1000), arrival_sample=16_000)
    (cut,) = p.clear("r1", 16_000 + 4_000)  # 250 ms after the audio came back
    assert cut.event_type == "playback.interrupted"
    assert cut.played_ms == 750.0 and cut.data["stalled_ms"] == 500.0
    # a stall still open at the cut is not counted: the acoustic stop is the last sound
    q = PlaybackModel(SR)
    q.enqueue("r1", tone(500), arrival_sample=0)
    q.enqueue("r1", tone(500), arrival_sample=20_000)  # still on its way at the cut
    q.advance_to(16_000)
    (open_cut,) = q.clear("r1", 16_000)
    assert open_cut.played_ms == 500.0 and "stalled_ms" not in open_cut.data

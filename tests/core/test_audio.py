from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxassay.core.audio import decode_audio_bytes, load_audio, rms_dbfs
from voxassay.core.errors import AudioError


def test_resamples_22k_real_speech(data_dir: Path) -> None:
    path = data_dir / "read_speech/ljspeech/LJ001-0002.wav"
    native = load_audio(path, sr=None)
    assert native.sr == 22050
    a = load_audio(path)
    assert a.sr == 16000 and a.samples.dtype == np.float32
    assert abs(a.duration - native.duration) < 0.01
    assert -40 < rms_dbfs(a.samples) < -5


def test_flac_and_stereo_downmix(data_dir: Path, tmp_path: Path) -> None:
    flac = next((data_dir / "speaker").rglob("*.flac"))
    mono = load_audio(flac)
    assert mono.sr == 16000 and mono.samples.size > 16000
    stereo = np.stack([mono.samples, np.zeros_like(mono.samples)], axis=1)
    sf.write(tmp_path / "st.wav", stereo, 16000, subtype="FLOAT")
    down = load_audio(tmp_path / "st.wav")
    np.testing.assert_allclose(down.samples, mono.samples / 2, atol=1e-6)


def test_errors_have_kinds(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(AudioError) as e1:
        load_audio(tmp_path / "missing.wav")
    assert e1.value.kind == "missing"
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(AudioError) as e2:
        load_audio(tmp_path / "empty.wav")
    assert e2.value.kind == "empty"
    (tmp_path / "junk.wav").write_bytes(b"RIFF" + b"\x00" * 7 + b"garbage" * 20)
    with pytest.raises(AudioError) as e3:
        load_audio(tmp_path / "junk.wav")
    assert e3.value.kind == "unreadable"
    # header only: a WAV with zero frames
    sf.write(tmp_path / "zero.wav", np.zeros(0, np.float32), 16000)
    with pytest.raises(AudioError) as e4:
        load_audio(tmp_path / "zero.wav")
    assert e4.value.kind in ("empty", "unreadable")


def test_a_truncated_real_file_is_an_error_not_a_shorter_clip(
    data_dir: Path, tmp_path: Path
) -> None:
    """The header says 9.66 s, the data holds half: scoring it as complete would be a silent
    wrong answer (a deletion-heavy WER for the system), so it is ``truncated``."""
    src = (data_dir / "read_speech/ljspeech/LJ001-0001.wav").read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(src[: len(src) // 2])
    with pytest.raises(AudioError) as exc:
        load_audio(cut)
    assert exc.value.kind == "truncated" and "header declares 425786 data bytes" in str(exc.value)
    with pytest.raises(AudioError) as exc2:
        decode_audio_bytes(src[: len(src) // 2])
    assert exc2.value.kind == "truncated"
    # the complete file still reads, and so does a streaming WAV whose size was never filled in
    assert load_audio(data_dir / "read_speech/ljspeech/LJ001-0001.wav").duration > 9.6
    streamed = bytearray(src)
    pos = streamed.index(b"data")
    streamed[pos + 4 : pos + 8] = (0xFFFFFFFF).to_bytes(4, "little")
    (tmp_path / "stream.wav").write_bytes(bytes(streamed))
    assert load_audio(tmp_path / "stream.wav").duration > 9.6

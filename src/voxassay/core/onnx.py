"""onnxruntime session options shared by every ONNX model voxassay runs (Piper, DNSMOS).

onnxruntime's intra-op threads spin while they wait for work by default. voxassay runs
several models at once (a synthesizer thread beside the measures, a VAD beside an ASR), and
on a small machine a spinning pool takes the cores the other model needs, so spinning is off
(``session.intra_op.allow_spinning = 0``); results are unchanged, only the waiting is.
"""

from __future__ import annotations

from typing import Any


def session_options(threads: int | None = None) -> Any:
    """``onnxruntime.SessionOptions`` with spinning off and, when given, ``threads`` intra-op
    threads (else onnxruntime's default: one per physical core)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        opts.intra_op_num_threads = threads
    return opts

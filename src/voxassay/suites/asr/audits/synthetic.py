"""Synthetic speech gap audit: TTS renderings of the references as paired items, and WER on
them minus WER on the real recordings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from voxassay.core.audio import Audio, write_wav
from voxassay.core.items import Item
from voxassay.stats.intervals import paired_bootstrap_ratio_diff
from voxassay.suites.asr.audits._common import AUDITS_VERSION, _safe_name


class Synthesizer(Protocol):
    def synthesize(self, text: str) -> Audio: ...


def _synth_spec(synthesizer: Any) -> str:
    for attr in ("spec", "name"):
        value = getattr(synthesizer, attr, None)
        if isinstance(value, str) and value:
            return value
        if value is not None and str(value):
            return str(value)
    describe = getattr(synthesizer, "describe", None)
    if callable(describe):
        try:
            info = describe()
            if isinstance(info, dict) and info.get("spec"):
                return str(info["spec"])
        except Exception:
            pass
    return type(synthesizer).__name__


def build_synthetic_items(
    items: Sequence[Item],
    synthesizer: Synthesizer,
    out_dir: str | Path,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    tts_spec: str | None = None,
) -> list[Item]:
    """TTS renderings of each item's reference text, as new items paired to their source.

    ``synthesizer.synthesize(text)`` must return an :class:`Audio` (or ``(samples, sr)``);
    the result is written as 16-bit WAV at its own rate. Items without text are skipped.
    ``progress(done, total, item_id)`` is called after each item. A synthesizer failure
    propagates (with the item id in the message): a silently smaller audit set would bias
    the gap. ``tts_spec`` defaults to the synthesizer's ``spec`` attribute.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = tts_spec or _synth_spec(synthesizer)
    todo = [it for it in items if it.text and it.text.strip()]
    built: list[Item] = []
    for done, item in enumerate(todo, start=1):
        text = str(item.text)
        try:
            result: Any = synthesizer.synthesize(text)
        except Exception as exc:
            raise RuntimeError(f"synthesizing item {item.id!r} with {spec}: {exc}") from exc
        if isinstance(result, Audio):
            audio = result
        elif isinstance(result, tuple) and len(result) == 2:
            audio = Audio(np.asarray(result[0], dtype=np.float32), int(result[1]))
        else:
            raise TypeError(f"{spec} returned {type(result).__name__}, expected Audio")
        samples = np.asarray(audio.samples, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            raise RuntimeError(f"{spec} returned no audio for item {item.id!r}")
        new_id = f"{item.id}__synthetic"
        path = out / f"{_safe_name(new_id)}.wav"
        write_wav(path, Audio(samples, audio.sr))
        built.append(
            Item(
                id=new_id,
                audio_filepath=str(path),
                duration=samples.size / audio.sr,
                text=item.text,
                speaker=f"tts:{spec}",
                labels={
                    "audit": "synthetic",
                    "source_item": item.id,
                    "condition": "audit",
                    "tts": spec,
                    "constructed": True,
                },
                meta={
                    "recipe": {
                        "audit": "synthetic",
                        "version": AUDITS_VERSION,
                        "tts": spec,
                        "source_audio": item.audio_filepath,
                        "sample_rate": audio.sr,
                    }
                },
            )
        )
        if progress is not None:
            progress(done, len(todo), item.id)
    return built


def _errors(c: Mapping[str, Any]) -> int:
    return int(c["sub"]) + int(c["del"]) + int(c["ins"])


def synthetic_gap(
    real_counts: Mapping[str, Mapping[str, Mapping[str, Any]]],
    synth_counts: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """WER on synthetic renderings minus WER on the real recordings of the same transcripts.

    Both arguments map system -> {source_item_id: counts} with ``sub``, ``del``, ``ins`` and
    ``ref_words`` (as :func:`voxassay.suites.asr.wer.score_text` returns). Per system, over the
    source items present on both sides with a non-empty reference (``n``):
    ``wer_synth = sum(S+D+I) / sum(N)`` on synthetic audio, ``wer_real`` likewise, and
    ``gap = wer_synth - wer_real`` with a paired bootstrap CI over items (the same items are
    drawn for both arms). A clearly negative gap means the system finds synthetic speech
    much easier, i.e. a benchmark built from it overstates real-world accuracy.
    """
    rows = []
    for system in sorted(set(real_counts) | set(synth_counts)):
        real = real_counts.get(system, {})
        synth = synth_counts.get(system, {})
        common = sorted(
            i
            for i in set(real) & set(synth)
            if int(real[i].get("ref_words", 0)) > 0 and int(synth[i].get("ref_words", 0)) > 0
        )
        pd = paired_bootstrap_ratio_diff(
            [_errors(synth[i]) for i in common],
            [int(synth[i]["ref_words"]) for i in common],
            [_errors(real[i]) for i in common],
            [int(real[i]["ref_words"]) for i in common],
            n_boot=n_boot,
            seed=seed,
        )
        rows.append(
            {
                "system": system,
                "n": len(common),
                "wer_synth": pd.a,
                "wer_real": pd.b,
                "gap": pd.diff,
                "ci_lo": pd.ci_lo,
                "ci_hi": pd.ci_hi,
                "p_value": pd.p_value,
                "n_real_only": len(set(real) - set(synth)),
                "n_synth_only": len(set(synth) - set(real)),
            }
        )
    return {
        "audit": "synthetic_gap",
        "version": AUDITS_VERSION,
        "status": "ok",
        "formula": "WER(synthetic) - WER(real) over the same source items, corpus-level "
        "(sum of errors / sum of reference words); paired bootstrap over items",
        "systems": rows,
    }

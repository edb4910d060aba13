"""Benchmark: voxassay's normalize + score path against the naive Whisper + jiwer pipeline.

Builds 100,000 (reference, hypothesis) pairs deterministically from the sentences of the
leaderboard parity set (../shared/parity, beside the repo; a small built-in list otherwise) by
perturbing words (drops, insertions, substitutions, case, punctuation, number spelling), then
times the corpus totals both ways on the same pairs:

* voxassay: ``normalize_many`` with the ``oal-en`` normalizer (process pool over the available
  cores) and ``count_errors`` (kaldialign, merge_compounds) summed into corpus totals;
* naive:   ``whisper_normalizer.english.EnglishTextNormalizer`` on every text, one process,
  then ``jiwer.process_words`` on the lists.

Run: ``python benchmarks/bench_normalize.py [--pairs N] [--seed S] [--workers W]``.
Prints wall times, the workers each side used and the ratio voxassay / naive (target <= 1.0).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxassay.suites.asr.align import ErrorCounts, count_errors  # noqa: E402
from voxassay.suites.asr.normalize import (  # noqa: E402
    available_cores,
    normalize_many,
    pool_workers,
)

PARITY = ROOT.parent / "shared" / "parity" / "oal_dev_pairs.jsonl"

FALLBACK_SENTENCES = [
    "The volunteers cleared the trail of fallen branches before noon.",
    "He paid $4.99 for a coffee at twenty past six.",
    "Mr. Okafor's colour printer cost two hundred and fifty pounds.",
    "We're goin' fishin' tomorrow, aren't we?",
    "The U.N. met on 20 July 1969 to discuss the e-mail.",
    "Um, the results were, uh, mixed [laughter].",
]

NOISE_WORDS = ["the", "a", "and", "uh", "um", "it's", "gonna", "two", "2", "colour", "Dr.", "OK"]
NUMBER_SWAPS = {"two": "2", "2": "two", "ten": "10", "first": "1st", "and": "&", "percent": "%"}


def load_sentences() -> list[str]:
    if not PARITY.exists():
        return FALLBACK_SENTENCES
    with open(PARITY, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    texts = [r["text"] for r in rows] + [r["pred_text"] for r in rows if r["pred_text"].strip()]
    return [t for t in texts if len(t.split()) <= 80]  # keep utterance-sized texts


def perturb(words: list[str], rng: random.Random) -> str:
    out: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.04:
            continue  # deletion
        if roll < 0.08:
            out.append(rng.choice(NOISE_WORDS))  # substitution
            continue
        if roll < 0.11:
            out.append(rng.choice(NOISE_WORDS))  # insertion before the word
        if roll < 0.15 and word.lower() in NUMBER_SWAPS:
            word = NUMBER_SWAPS[word.lower()]
        elif roll < 0.20:
            word = word.strip(".,!?;:")
        elif roll < 0.22:
            word = word.upper()
        out.append(word)
    return " ".join(out)


def build_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    sentences = load_sentences()
    refs, hyps = [], []
    for _ in range(n):
        ref = rng.choice(sentences)
        refs.append(ref)
        hyps.append(perturb(ref.split(), rng) if rng.random() < 0.9 else rng.choice(sentences))
    return refs, hyps


def run_voxassay(
    refs: list[str], hyps: list[str], workers: int | None
) -> tuple[float, ErrorCounts]:
    start = time.perf_counter()
    normed = normalize_many([*refs, *hyps], workers=workers)
    n = len(refs)
    totals = ErrorCounts()
    for ref, hyp in zip(normed[:n], normed[n:], strict=True):
        totals += count_errors(ref.split(), hyp.split())
    return time.perf_counter() - start, totals


def run_naive(refs: list[str], hyps: list[str]) -> tuple[float, float]:
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    start = time.perf_counter()
    norm = EnglishTextNormalizer()
    refs_n = [norm(t) for t in refs]
    hyps_n = [norm(t) for t in hyps]
    out = jiwer.process_words(refs_n, hyps_n)
    return time.perf_counter() - start, float(out.wer)


def run_score_path(refs: list[str], hyps: list[str], workers: int | None) -> tuple[float, float]:
    """The `voxassay asr score` path: read a predictions JSONL, score, write records.jsonl.

    Returns (seconds for that path, seconds for building report.json/md/html afterwards).
    """
    import json
    import tempfile
    from pathlib import Path

    from voxassay.report import write_report
    from voxassay.suites.asr.suite import score_files

    with tempfile.TemporaryDirectory() as tmp:
        preds = Path(tmp) / "preds.jsonl"
        with open(preds, "w", encoding="utf-8") as fh:
            for i, (ref, hyp) in enumerate(zip(refs, hyps, strict=True)):
                fh.write(json.dumps({"id": f"u{i}", "text": ref, "pred_text": hyp}) + "\n")
        start = time.perf_counter()
        store = score_files([preds], Path(tmp) / "runs", workers=workers, write_reports=False)
        score_s = time.perf_counter() - start
        start = time.perf_counter()
        write_report(store.path)
        return score_s, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None, help="voxassay processes (auto)")
    args = parser.parse_args()

    refs, hyps = build_pairs(args.pairs, args.seed)
    n_texts = 2 * len(refs)
    vox_workers = pool_workers(n_texts, args.workers)
    print(f"{len(refs):,} pairs ({n_texts:,} texts), seed {args.seed}, {available_cores()} cores")

    naive_s, naive_wer = run_naive(refs, hyps)
    print(
        f"naive   (whisper_normalizer + jiwer.process_words): {naive_s:7.2f} s  1 worker   "
        f"WER {naive_wer:.4f}"
    )
    vox_s, totals = run_voxassay(refs, hyps, args.workers)
    print(
        f"voxassay (oal-en normalize_many + count_errors):     {vox_s:7.2f} s  "
        f"{vox_workers} worker{'s' if vox_workers != 1 else ' '}  WER {totals.rate:.4f}"
    )
    serial_s, _ = run_voxassay(refs, hyps, 1)
    print(f"voxassay, one process:                               {serial_s:7.2f} s  1 worker")
    score_s, report_s = run_score_path(refs, hyps, args.workers)
    print(f"voxassay asr score (read JSONL, score, write records): {score_s:5.2f} s")
    print(
        f"  then report.json/md/html (bootstrap, audits):        {report_s:5.2f} s (not in ratio)"
    )
    print(
        f"ratio voxassay / naive: core {vox_s / naive_s:.3f}, one process {serial_s / naive_s:.3f}, "
        f"asr score path {score_s / naive_s:.3f} (target <= 1.0: "
        f"{'OK' if score_s / naive_s <= 1.0 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()

"""ASR robustness suite: WER per condition and subgroup, rank stability, overfitting audits."""

from __future__ import annotations

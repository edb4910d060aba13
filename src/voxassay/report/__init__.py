"""Reports: JSON (the numbers), Markdown (readable in a terminal or PR), self-contained HTML."""

from __future__ import annotations

from voxassay.report.writer import finish_run, json_safe, write_report

__all__ = ["finish_run", "json_safe", "write_report"]

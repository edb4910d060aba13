"""``voxeval demo``: run each registered suite's demo into one folder with one report.

The demo folder is itself a run directory (suite ``demo``): ``run.json`` lists the suite
runs inside it, and ``voxeval report DEMO_DIR`` rebuilds the combined report from them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from voxeval.core.errors import InputError
from voxeval.core.registry import REGISTRY, SuiteInfo
from voxeval.core.runstore import RunStore, utc_now


def failed_suites(demo_dir: str | Path) -> list[str]:
    """Names of the suites whose demo raised (recorded in the demo folder's run.json)."""
    runs = RunStore.open(Path(demo_dir)).info().get("runs") or {}
    return [name for name, run in runs.items() if run.get("error")]


def run_demo(
    out: str | Path, *, only: list[str] | None = None, workers: int = 1, progress: Any = None
) -> Path:
    """Run the demos, write ``report.{json,md,html}`` and return the demo folder.

    A suite whose demo raises is recorded with its error (``run.json`` ``runs``, a section
    saying so in the report) and the other suites still run."""
    suites = [s for s in REGISTRY.suites() if s.demo is not None and s.name != "demo"]
    if only:
        unknown = set(only) - {s.name for s in suites}
        if unknown:
            raise InputError(f"no demo for suite(s) {', '.join(sorted(unknown))}")
        suites = [s for s in suites if s.name in only]
    store = RunStore.create(out, "demo", {"suites": [s.name for s in suites]}, None)
    runs: dict[str, Any] = {}
    for suite in suites:
        t0 = time.perf_counter()
        assert suite.demo is not None
        try:
            sub = suite.demo(store.path, workers=workers, progress=progress)
        except Exception as exc:  # one suite's failure is recorded; the others still run
            runs[suite.name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "seconds": round(time.perf_counter() - t0, 1),
            }
            if progress is not None:
                progress.console.log(f"{suite.name} demo failed: {type(exc).__name__}: {exc}")
        else:
            runs[suite.name] = {
                "run_dir": sub.path.name,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        store.update_info(runs=runs)
    from voxeval.report import finish_run

    return finish_run(store).path


def build_demo_report(store: RunStore, **_: Any) -> dict[str, Any]:
    """The combined report: each suite's report as a section."""
    info = store.info()
    sections = []
    for name, run in (info.get("runs") or {}).items():
        if run.get("error"):
            sections.append(
                {"suite": name, "error": run["error"], "seconds": run.get("seconds"), "report": {}}
            )
            continue
        suite = REGISTRY.suite(name)
        sub = RunStore.open(store.path / run["run_dir"])
        assert suite.report is not None
        sections.append(
            {
                "suite": name,
                "run_dir": run["run_dir"],
                "seconds": run.get("seconds"),
                "report": suite.report(sub),
            }
        )
    return {
        "suite": "demo",
        "metrics_version": "demo/1",
        "run_id": store.run_id,
        "generated_at": utc_now(),
        "systems": sorted(
            {s["system"] for sec in sections for s in sec["report"].get("systems", [])}
        ),
        "sections": sections,
    }


def _render_markdown(report: dict[str, Any]) -> str:
    parts = [f"# voxeval demo `{report['run_id']}`\n"]
    for sec in report["sections"]:
        suite = REGISTRY.suite(sec["suite"])
        render = suite.extras.get("render_markdown")
        if sec.get("error"):
            parts.append(f"\n---\n\n**Section `{sec['suite']}` failed:** {sec['error']}\n")
            continue
        parts.append(
            f"\n---\n\n_Section `{sec['suite']}` (run `{sec['run_dir']}`, {sec.get('seconds')} s)_\n"
        )
        if render:
            parts.append(render(sec["report"]))
    return "\n".join(parts)


def _render_html(report: dict[str, Any], store: RunStore) -> str:
    from voxeval.report.html import esc, page

    body = []
    for sec in report["sections"]:
        suite = REGISTRY.suite(sec["suite"])
        render = suite.extras.get("render_html_body")
        title = suite.extras.get("title", sec["suite"])
        if sec.get("error"):
            body.append(
                f"<section><h1 style='margin-top:2.5rem'>{esc(title)}</h1>"
                f"<p><strong>This section failed:</strong> {esc(sec['error'])}</p></section>"
            )
            continue
        body.append(
            f"<section><h1 style='margin-top:2.5rem'>{esc(title)}</h1>"
            f"<p class='muted'>run folder <code>{esc(sec['run_dir'])}</code>, {esc(sec.get('seconds'))} s</p>"
        )
        if render:
            body.append(render(sec["report"], RunStore.open(store.path / sec["run_dir"])))
        body.append("</section>")
    return page(f"voxeval demo · {report['run_id']}", "".join(body))


DEMO_SUITE = SuiteInfo(
    name="demo",
    description="(internal) combined report of the suites' demos",
    report=build_demo_report,
    extras={"render_markdown": _render_markdown, "render_html": _render_html, "hidden": True},
)

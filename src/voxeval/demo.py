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
    out: str | Path,
    *,
    only: list[str] | None = None,
    workers: int = 1,
    progress: Any = None,
    full: bool = False,
) -> Path:
    """Run the demos, write ``report.{json,md,html}`` and return the demo folder.

    ``full``: each suite's larger demo set (``voxeval demo --full``) instead of the quick
    one that shows each capability once. Each suite's wall time is recorded in ``run.json``
    ``runs`` and stated in the report. A suite whose demo raises is recorded with its error
    (``run.json`` ``runs``, a section saying so in the report) and the other suites still
    run."""
    suites = [s for s in REGISTRY.suites() if s.demo is not None and s.name != "demo"]
    if only:
        unknown = set(only) - {s.name for s in suites}
        if unknown:
            raise InputError(f"no demo for suite(s) {', '.join(sorted(unknown))}")
        suites = [s for s in suites if s.name in only]
    size = "full" if full else "quick"
    store = RunStore.create(out, "demo", {"suites": [s.name for s in suites], "size": size}, None)
    runs: dict[str, Any] = {}
    started = time.perf_counter()
    for suite in suites:
        t0 = time.perf_counter()
        assert suite.demo is not None
        try:
            sub = suite.demo(store.path, workers=workers, progress=progress, full=full)
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
    store.update_info(seconds=round(time.perf_counter() - started, 1))
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
        "size": info.get("config", {}).get("size", "full"),
        "seconds": info.get("seconds"),
        "systems": sorted(
            {s["system"] for sec in sections for s in sec["report"].get("systems", [])}
        ),
        "sections": sections,
    }


def timing_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(section, wall time) rows of the demo's timing table, the total last."""
    rows = [
        (str(sec["suite"]), "failed" if sec.get("error") else f"{sec.get('seconds')} s")
        for sec in report["sections"]
    ]
    total = report.get("seconds")
    rows.append(("total", f"{total} s" if total is not None else "not recorded"))
    return rows


def _render_markdown(report: dict[str, Any]) -> str:
    parts = [f"# voxeval demo `{report['run_id']}`\n"]
    parts.append(f"Demo size: {report.get('size', 'full')}. Wall time per section:\n")
    parts.append("| section | wall time |\n|---|---|")
    parts += [f"| {name} | {t} |" for name, t in timing_rows(report)]
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

    rows = "".join(
        f"<tr><td>{esc(name)}</td><td>{esc(t)}</td></tr>" for name, t in timing_rows(report)
    )
    body = [
        f"<p class='muted'>Demo size: {esc(report.get('size', 'full'))}. Wall time per "
        f"section:</p><table><tr><th>section</th><th>wall time</th></tr>{rows}</table>"
    ]
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

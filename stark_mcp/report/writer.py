"""Write the reports: a benchmark folder's, from its files alone, and a single run's, from the store.

Benchmark (``stark-mcp report DIR``, also run at the end of ``stark-mcp bench``): report.json,
report.md, best_so_far.png, speedup_distribution.png, success_fast_p.png and report.html.
Run (``stark-mcp report RUN_ID``, and the MCP resource ``stark://runs/{run_id}/report.html``):
report.html and attempts.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel

from stark_mcp.bench.files import read_json_gz, read_manifest, read_results, run_document_path, write_atomic
from stark_mcp.bench.rows import ResultRow
from stark_mcp.orchestrator.documents import RunDocument, load_run_document
from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.report.errors import ReportError
from stark_mcp.report.html import render_html
from stark_mcp.report.plots import plot_best_so_far, plot_run, plot_speedup_distribution, plot_success_fast_p
from stark_mcp.report.runs import runs_manifest, runs_rows
from stark_mcp.report.tables import render_markdown, report_document

BENCH_FILES = (
    "report.json",
    "report.md",
    "report.html",
    "best_so_far.png",
    "speedup_distribution.png",
    "success_fast_p.png",
)


class ReportFiles(BaseModel):
    out: Path
    files: list[Path]
    notes: list[str] = []


def write_bench_report(out: Path) -> ReportFiles:
    manifest = read_manifest(out)
    rows = read_results(out)
    if not rows:
        raise ReportError(f"nothing to report in {out}: no pair has a run yet (results.jsonl is empty)")
    report = report_document(manifest, rows)
    write_atomic(out / "report.json", json.dumps(report, indent=2, allow_nan=False) + "\n")
    write_atomic(out / "report.md", render_markdown(report, rows))
    notes: list[str] = []
    subtitle = (
        f"{report['pairs_with_results']} runs of {report['pairs']} pairs · budget "
        f"{manifest.command.get('budget', '?')} · {', '.join(report['devices'])}"
    )
    html = render_html(
        _documents(out, rows, notes), title=f"stark-mcp benchmark {manifest.bench_id}", subtitle=subtitle
    )
    write_atomic(out / "report.html", html)
    # Plots last: on an install without matplotlib the error comes after the tables and viewer exist.
    plot_best_so_far(rows, out / "best_so_far.png")
    plot_speedup_distribution(rows, out / "speedup_distribution.png")
    plot_success_fast_p(rows, out / "success_fast_p.png")
    return ReportFiles(out=out, files=[out / name for name in BENCH_FILES], notes=notes)


def _documents(out: Path, rows: Sequence[ResultRow], notes: list[str]) -> Iterator[RunDocument]:
    for row in rows:
        path = run_document_path(out, row.run_id)
        if not path.exists():
            notes.append(f"{path} is missing: run {row.run_id} ({row.pair}) is left out of report.html")
            continue
        try:
            yield RunDocument.model_validate(read_json_gz(path))
        except ValueError as exc:
            raise ReportError(f"{path} is not a run document: {exc}") from None


async def write_runs_report(service: RunService, run_ids: Sequence[str], out: Path) -> ReportFiles:
    """report.json, report.md and report.html of runs from the store (driven through MCP, say),
    with the tables of a benchmark's report (``report/runs.py``)."""
    if not run_ids:
        raise ReportError("no run ids given")
    documents = [await load_run_document(service, run_id) for run_id in dict.fromkeys(run_ids)]
    rows = runs_rows(documents)
    report = report_document(runs_manifest(documents, rows), rows)
    write_atomic(out / "report.json", json.dumps(report, indent=2, allow_nan=False) + "\n")
    write_atomic(out / "report.md", render_markdown(report, rows))
    subtitle = f"{len(rows)} runs · {', '.join(report['devices'])}"
    write_atomic(out / "report.html", render_html(documents, title="stark-mcp runs", subtitle=subtitle))
    return ReportFiles(out=out, files=[out / name for name in ("report.json", "report.md", "report.html")])


async def write_run_report(service: RunService, run_id: str, out: Path) -> ReportFiles:
    document = await load_run_document(service, run_id)
    write_atomic(out / "report.html", render_run_html(document))
    plot_run(document, out / "attempts.png")
    return ReportFiles(out=out, files=[out / "report.html", out / "attempts.png"])


async def run_report_html(service: RunService, run_id: str) -> str:
    return render_run_html(await load_run_document(service, run_id))


def render_run_html(document: RunDocument) -> str:
    run = document.run
    return render_html(
        [document],
        title=f"stark-mcp run {run.id}: {run.name}",
        subtitle=f"strategy {run.strategy} · {run.device} · budget {run.budget}",
    )

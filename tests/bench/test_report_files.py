"""The benchmark report from a folder alone (no database, no evaluator): levels, tables, plot errors."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from stark_mcp.bench.files import (
    MANIFEST,
    Manifest,
    run_document_path,
    write_atomic,
    write_json_gz,
    write_results,
)
from stark_mcp.bench.rows import result_row
from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.report.errors import ReportError
from stark_mcp.report.writer import write_bench_report

from .trees import PROBLEM, stark_tree


def _folder(out: Path) -> list[RunDocument]:
    """A benchmark folder of three runs over two levels, one run's document missing."""
    documents = []
    for level, size, seed in ((1, 12, 1), (1, 9, 2), (2, 7, 3)):
        document = stark_tree(size, seed)
        problem = PROBLEM.model_copy(update={"level": level, "problem_id": seed, "name": f"{seed}_P"})
        run = document.run.model_copy(update={"id": f"r-lv{seed}", "problem": problem, "budget": size - 1})
        nodes = [n.model_copy(update={"run_id": run.id}) for n in document.nodes]
        documents.append(RunDocument(run=run, nodes=nodes, exchanges=document.exchanges))
    pairs = [f"{d.run.problem.level}/{d.run.problem.problem_id}:stark" for d in documents]
    manifest = Manifest(
        bench_id="b-files",
        created_at=time.time(),
        identity={},
        pairs=[*pairs, "2/9:stark"],
        command={"budget": 11},
    )
    write_atomic(out / MANIFEST, manifest.model_dump_json())
    rows = [
        result_row(
            bench_id="b-files",
            pair=pair,
            key=pair.split(":")[0],
            run=d.run,
            nodes=d.nodes,
            exchanges=d.exchanges,
            wall_s=60.0,
        )
        for pair, d in zip(pairs, documents, strict=True)
    ]
    write_results(out, rows)
    for document in documents[:2]:
        write_json_gz(run_document_path(out, document.run.id), document.model_dump(mode="json"))
    return documents


def test_a_folder_with_two_levels_gets_per_level_tables_and_notes_what_is_missing(tmp_path: Path) -> None:
    _folder(tmp_path)
    written = write_bench_report(tmp_path)
    assert [p.name for p in written.files] == [
        "report.json",
        "report.md",
        "report.html",
        "best_so_far.png",
        "speedup_distribution.png",
        "success_fast_p.png",
    ]
    assert all(p.stat().st_size > 0 for p in written.files)
    assert written.notes == [
        f"{run_document_path(tmp_path, 'r-lv3')} is missing: run r-lv3 (2/3:stark) is left out of report.html"
    ]
    report = json.loads((tmp_path / "report.json").read_text())
    assert list(report["levels"]) == ["1", "2", "all"] and report["missing_pairs"] == ["2/9:stark"]
    assert (
        report["levels"]["1"]["stark"]["problems"] == 2 and report["levels"]["all"]["stark"]["problems"] == 3
    )
    assert report["devices"] == ["NVIDIA H100"] and report["models"] == ["claude-sonnet-4-5"]
    markdown = (tmp_path / "report.md").read_text()
    for heading in (
        "## Level 1",
        "## Level 2",
        "## All levels",
        "## Per problem",
        "Pairs without results yet: 2/9",
    ):
        assert heading in markdown
    html = (tmp_path / "report.html").read_text()
    assert 'id="run-r-lv1"' in html and 'id="run-r-lv3"' not in html


def test_without_matplotlib_the_plots_fail_clearly_after_the_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _folder(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(ReportError, match="PNG plots need matplotlib.*pip install matplotlib"):
        write_bench_report(tmp_path)
    assert all((tmp_path / name).exists() for name in ("report.json", "report.md", "report.html"))
    assert not (tmp_path / "best_so_far.png").exists()

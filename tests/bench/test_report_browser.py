"""report.html in a real headless browser (Debian's chromium, driven by playwright).

Skipped, with the reason, where chromium or playwright is missing; CI installs both (.ci/run).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stark_mcp.report.writer import render_run_html

from .conftest import BenchRun
from .trees import stark_tree

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip(
            "no chromium on PATH: install Debian's (apt-get install chromium) to run the browser tests"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium, args=FLAGS)
        yield launched
        launched.close()


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("#tree .node")
    return page, errors


def test_clicking_a_node_shows_its_plan_source_diff_evaluation_and_prompts(
    browser: Any, bench_run: BenchRun
) -> None:
    with sqlite3.connect(bench_run.db) as conn:
        (run_id,) = next(
            (r,)
            for r, c in conn.execute("SELECT id, config_json FROM runs")
            if json.loads(c)["bench"]["pair"] == "scaled_relu:reflexion"
        )
        (source,) = conn.execute(
            "SELECT source FROM nodes WHERE run_id = ? AND id = 'n2'", (run_id,)
        ).fetchone()
    page, errors = _open(browser, bench_run.out / "report.html")
    page.click(f'#runlist tr[data-run="{run_id}"]')
    page.wait_for_selector(f'#runlist tr.current[data-run="{run_id}"]')
    page.click('#tree .node[data-node="n2"] circle')
    page.wait_for_selector("#source")
    assert page.text_content("#source") == source
    assert "debug of n1" in page.text_content("#nodetitle")
    assert "+        return torch.clamp_min(x, 0.0) * self.scale + 1.0" in page.text_content("#diff")
    assert "candidate" in page.text_content("#timings") and "eager PyTorch" in page.text_content("#timings")
    page.click("#details .exchange summary >> text=prompt")
    assert "### Attempt n1" in page.text_content(
        "#details .exchange details[open] pre"
    )  # the debugger saw n1
    assert errors == []
    page.screenshot(path=str(bench_run.out / "browser.png"))  # kept for a human look at a failure


def test_a_300_node_tree_opens_and_answers_a_click_at_once(browser: Any, tmp_path: Path) -> None:
    document = stark_tree(300)
    started = time.monotonic()
    html = render_run_html(document)
    rendered = time.monotonic() - started
    path = tmp_path / "big.html"
    path.write_text(html)
    # Every prompt and reply of 300 attempts (about 4 MB here) fits in a file a browser opens at once.
    assert len(html) < 8_000_000 and rendered < 10
    started = time.monotonic()
    page, errors = _open(browser, path)
    assert page.locator("#tree .node").count() == 300
    page.click('#tree .node[data-node="n299"] circle')
    page.wait_for_selector("#source")
    elapsed = time.monotonic() - started
    assert "# node n299" in page.text_content("#source")
    assert elapsed < 10, f"opening the page and showing a node took {elapsed:.1f} s"
    # The order slider dims every node made after the chosen step.
    page.fill("#step", "10")
    page.dispatch_event("#step", "input")
    dimmed = page.locator("#tree .node.future").count()
    assert dimmed == 289 and "attempt 10: n10" in page.text_content("#steplabel")
    assert errors == []

"""Role prompts and resources through the in-process client, in both protocol modes."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from stark_mcp.report.html import decode_run

from .support import MODES, PROBLEM, anchored_plan, make_server, ok, source

pytestmark = pytest.mark.anyio


@dataclass
class Seeded:
    server: Any
    run_id: str
    passed_id: str
    failed_id: str


@pytest.fixture(scope="module")
async def seeded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Seeded]:
    """A run with one passing and one failing child. The session that made it stays open while the
    module's tests run, so theirs share its store and warm evaluator, as a host's sessions do."""
    server = make_server(tmp_path_factory.mktemp("prompts-home"))
    async with Client(server) as client:
        run_id = ok(await client.call_tool("create_run",
            {"problem": str(PROBLEM), "budget": 5, "seed": 3}))["run_id"]
        passed = ok(await client.call_tool("add_child", {
            "run_id": run_id, "parent_id": "n0", "source": source("cand_clamp"),
            "plan": anchored_plan(PROBLEM.read_text()),
        }))
        failed = ok(await client.call_tool(
            "add_child", {"run_id": run_id, "parent_id": "n0", "source": source("cand_crash")}
        ))
        yield Seeded(server, run_id, passed["node_id"], failed["node_id"])


def text_of(prompt: Any) -> str:
    assert len(prompt.messages) == 1 and prompt.messages[0].role == "user"
    return prompt.messages[0].content.text


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_render_exactly_what_build_context_returns(seeded: Seeded, mode: str) -> None:
    plan = anchored_plan(PROBLEM.read_text())
    async with Client(seeded.server, mode=mode) as client:
        listed = {p.name: [(a.name,
            a.required) for a in p.arguments or []] for p in (await client.list_prompts()).prompts}
        assert listed == {
            "plan": [("run_id", True), ("node_id", True)],
            "code": [("run_id", True), ("node_id", True), ("plan", True)],
            "debug": [("run_id", True), ("node_id", True)],
            "optimize_module": [("request", False), ("project_root", False)],
        }
        cases = [
            ("plan", {"run_id": seeded.run_id, "node_id": "n0"}),
            ("code", {"run_id": seeded.run_id, "node_id": "n0", "plan": plan}),
            ("debug", {"run_id": seeded.run_id, "node_id": seeded.failed_id}),
        ]
        for role, args in cases:
            via_prompt = text_of(await client.get_prompt(role, args))
            via_tool = ok(await client.call_tool("build_context", {**args, "role": role}))["prompt"]
            assert via_prompt == via_tool, role
        assert "kernel launch failed on purpose" in text_of(
            await client.get_prompt("debug", {"run_id": seeded.run_id, "node_id": seeded.failed_id})
        )


@pytest.mark.parametrize("mode", MODES)
async def test_prompt_errors(seeded: Seeded, mode: str) -> None:
    async with Client(seeded.server, mode=mode) as client:
        with pytest.raises(MCPError, match="n55"):
            await client.get_prompt("plan", {"run_id": seeded.run_id, "node_id": "n55"})
        with pytest.raises(MCPError, match="list_runs"):
            await client.get_prompt("debug", {"run_id": "r-nothere", "node_id": "n0"})
        with pytest.raises(MCPError, match="no scaffold"):
            await client.get_prompt("code", {"run_id": seeded.run_id, "node_id": "n0", "plan": "just do it"})
        with pytest.raises(MCPError):
            await client.get_prompt("code", {"run_id": seeded.run_id, "node_id": "n0"})


@pytest.mark.parametrize("mode", MODES)
async def test_resources(seeded: Seeded, mode: str) -> None:
    run_id = seeded.run_id
    async with Client(seeded.server, mode=mode) as client:
        assert [r.uri for r in (await client.list_resources()).resources] == ["stark://runs"]
        listed = (await client.list_resource_templates()).resource_templates
        templates = {t.uri_template: t.mime_type for t in listed}
        assert templates == {
            "stark://runs/{run_id}/tree": "application/json",
            "stark://runs/{run_id}/nodes/{node_id}/source": "text/x-python",
            "stark://runs/{run_id}/nodes/{node_id}/logs": "text/plain",
            "stark://runs/{run_id}/best": "text/x-python",
            "stark://runs/{run_id}/report.html": "text/html",
        }

        async def read(uri: str) -> tuple[str, str | None]:
            contents = (await client.read_resource(uri)).contents
            assert len(contents) == 1
            return contents[0].text, contents[0].mime_type

        runs, mime = await read("stark://runs")
        assert mime == "application/json"
        (entry,) = [r for r in json.loads(runs) if r["run_id"] == run_id]
        assert entry["attempts"] == 2 and entry["passed"] == 1 and entry["best_node_id"] == seeded.passed_id

        tree = json.loads((await read(f"stark://runs/{run_id}/tree"))[0])
        by_id = {n["id"]: n for n in tree["nodes"]}
        assert set(by_id) == {"n0", seeded.passed_id, seeded.failed_id}
        assert set(by_id["n0"]) == {"id", "parent", "action", "status", "reason", "runtime_ms", "speedups",
            "adherence"}
        assert by_id[seeded.passed_id]["parent"] == "n0" and by_id[seeded.passed_id]["status"] == "passed"
        assert by_id[seeded.passed_id]["runtime_ms"] > 0 and by_id[seeded.passed_id]["adherence"] is not None
        failed = by_id[seeded.failed_id]
        assert failed["status"] == "runtime_error" and failed["reason"] == "exception"
        assert tree["baselines_ms"]["eager"] > 0

        text, mime = await read(f"stark://runs/{run_id}/nodes/{seeded.passed_id}/source")
        assert mime == "text/x-python" and text == source("cand_clamp")
        assert (await read(f"stark://runs/{run_id}/nodes/n0/source"))[0] == PROBLEM.read_text()

        logs, mime = await read(f"stark://runs/{run_id}/nodes/{seeded.failed_id}/logs")
        assert mime == "text/plain"
        assert logs.startswith("status: runtime_error (exception)")
        assert "kernel launch failed on purpose" in logs

        best, _ = await read(f"stark://runs/{run_id}/best")
        assert best.startswith(f"# Exported by stark-mcp from run {run_id}, node {seeded.passed_id}")
        namespace: dict[str, Any] = {"__name__": "exported"}
        exec(compile(best, "best.py", "exec"), namespace)
        assert "ModelNew" in namespace and "_stark_self_check" in namespace

        page, mime = await read(f"stark://runs/{run_id}/report.html")
        assert mime == "text/html" and page.startswith("<!DOCTYPE html>")
        blob = re.search(rf'<script type="application/octet-stream" id="run-{run_id}">([^<]+)</script>', page)
        assert blob is not None
        viewed = decode_run(blob.group(1))
        assert [n["id"] for n in viewed["nodes"]] == ["n0", seeded.passed_id, seeded.failed_id]
        assert viewed["nodes"][1]["source"] == source("cand_clamp") and viewed["nodes"][1]["plan"]

        for uri in ("stark://runs/r-nothere/tree", f"stark://runs/{run_id}/nodes/n42/source",
                    f"stark://runs/{run_id}/nodes/n42/logs", "stark://runs/r-nothere/best",
                    "stark://runs/r-nothere/report.html"):
            with pytest.raises(MCPError):
                await client.read_resource(uri)


@pytest.mark.parametrize("mode", MODES)
async def test_best_resource_without_a_correct_node(tmp_path: Path, mode: str) -> None:
    server = make_server(tmp_path)
    async with Client(server, mode=mode) as client:
        run_id = ok(await client.call_tool("create_run",
            {"problem": PROBLEM.read_text(), "budget": 1}))["run_id"]
        with pytest.raises(MCPError, match="no correct node"):
            await client.read_resource(f"stark://runs/{run_id}/best")
        runs = json.loads((await client.read_resource("stark://runs")).contents[0].text)
        assert runs[0]["run_id"] == run_id

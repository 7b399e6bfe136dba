"""Every tool through the in-process client, in the current and the legacy protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from stark_mcp.config import Settings
from stark_mcp.evaluator.host import profile_reports
from stark_mcp.orchestrator.inputs import MAX_SOURCE_BYTES
from stark_mcp.store import Store

from .support import MODES, PROBLEM, ProgressLog, anchored_plan, error_text, make_server, ok, source

pytestmark = pytest.mark.anyio


@dataclass
class Served:
    server: Any
    home: Path
    run_id: str


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    home = tmp_path_factory.mktemp("tools-home")
    server = make_server(home)
    # This session stays open while the module's tests run, as a host's does: each test's own
    # session then shares its store and evaluator (one worker, kept warm) instead of opening them.
    async with Client(server) as keeper:
        created = ok(await keeper.call_tool("create_run",
            {"problem": str(PROBLEM), "budget": 30, "seed": 7}))
        yield Served(server, home, created["run_id"])


async def attempts(client: Client, run_id: str) -> int:
    runs = ok(await client.call_tool("list_runs"))["runs"]
    return next(r["attempts"] for r in runs if r["run_id"] == run_id)


@pytest.mark.parametrize("mode", MODES)
async def test_listing_names_annotations_and_schemas(served: Served, mode: str) -> None:
    async with Client(served.server, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "create_run", "select_node", "build_context", "evaluate_kernel", "add_child", "leaderboard",
            "list_runs", "get_node", "export_kernel", "optimize", "create_problem", "profile_kernel",
        }
        for name in ("select_node", "build_context", "leaderboard", "list_runs", "get_node", "export_kernel"):
            assert tools[name].annotations.read_only_hint is True, name
        for name in ("create_run", "add_child", "evaluate_kernel", "optimize"):
            assert tools[name].annotations.read_only_hint is False, name
        assert all(t.output_schema for t in tools.values())
        add_params = set(tools["add_child"].input_schema["properties"])
        assert add_params == {"run_id", "parent_id", "source", "plan", "action", "evaluation_id"}
        assert not any("runtime" in p for p in add_params)
        assert set(tools["create_run"].input_schema["properties"]) == {
            "problem", "device", "policy", "budget", "seed", "name", "language",
        }
        instructions = client.instructions or ""
        loop = ["1. create_run", "a. select_node", "build_context(run_id, node_id, role='plan')",
                "add_child(run_id, parent_id=node_id", "3. leaderboard", "export_kernel"]
        positions = [instructions.index(name) for name in loop]
        assert positions == sorted(positions)


@pytest.mark.parametrize("mode", MODES)
async def test_create_run_from_source_reports_progress(served: Served, mode: str) -> None:
    progress = ProgressLog()
    async with Client(served.server, mode=mode) as client:
        created = ok(await client.call_tool(
            "create_run",
            {"problem": PROBLEM.read_text(), "budget": 3, "name": f"inline-{mode}", "policy": "greedy"},
            progress_callback=progress,
        ))
        assert created["root_node_id"] == "n0"
        assert created["problem"] == f"inline-{mode}"
        assert created["device"] == "cpu" and created["policy"] == "greedy" and created["budget"] == 3
        assert created["baselines_ms"]["eager"] > 0
        assert "select_node" in created["next"]
        runs = ok(await client.call_tool("list_runs"))["runs"]
        assert runs[0]["run_id"] == created["run_id"]
    assert len(progress.events) >= 2
    progress.assert_increasing()
    assert "checking problem" in (progress.events[0][2] or "")
    assert "created" in (progress.events[-1][2] or "")
    # One scale from start to end (the check, one step per baseline, the record): the total never jumps.
    totals = {total for _, total, _ in progress.events}
    assert len(totals) == 1 and progress.events[-1][0] == progress.events[-1][1] == totals.pop()


@pytest.mark.parametrize("mode", MODES)
async def test_create_run_refuses_bad_input_and_records_nothing(served: Served, mode: str) -> None:
    async with Client(served.server, mode=mode) as client:
        before = len(ok(await client.call_tool("list_runs"))["runs"])
        missing = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
        assert "get_inputs" in error_text(await client.call_tool("create_run", {"problem": missing}))
        assert "no such problem file" in error_text(
            await client.call_tool("create_run", {"problem": "nonexistent/problem.py"})
        )
        assert "policy" in error_text(
            await client.call_tool("create_run", {"problem": str(PROBLEM), "policy": "annealing"})
        )
        assert "budget" in error_text(await client.call_tool("create_run",
            {"problem": str(PROBLEM), "budget": 0}))
        assert "device must be auto, cpu or cuda, not 'tpu'" in error_text(
            await client.call_tool("create_run", {"problem": str(PROBLEM), "device": "tpu"})
        )
        huge = PROBLEM.read_text() + "#" * (MAX_SOURCE_BYTES + 1)
        assert "larger than" in error_text(await client.call_tool("create_run", {"problem": huge}))
        assert len(ok(await client.call_tool("list_runs"))["runs"]) == before


@pytest.mark.parametrize("mode", MODES)
async def test_select_node_and_build_context(served: Served, mode: str) -> None:
    run_id = served.run_id
    async with Client(served.server, mode=mode) as client:
        selected = ok(await client.call_tool("select_node", {"run_id": run_id}))
        assert selected["action"] in ("plan", "debug") and selected["reason"]
        assert selected["attempts_left"] > 0
        again = ok(await client.call_tool("select_node", {"run_id": run_id}))
        assert again["node_id"] == selected["node_id"], "same tree and seed must give the same choice"

        plan_ctx = ok(await client.call_tool("build_context",
            {"run_id": run_id, "node_id": "n0", "role": "plan"}))
        assert "n0" in plan_ctx["node_ids"]
        assert "torch.relu(x) * self.scale" in plan_ctx["prompt"]
        assert "<<<IMPROVE BEGIN>>>" in plan_ctx["prompt"]

        plan = anchored_plan(PROBLEM.read_text())
        code_ctx = ok(await client.call_tool(
            "build_context", {"run_id": run_id, "node_id": "n0", "role": "code", "plan": plan}
        ))
        assert "Replace relu and the multiply" in code_ctx["prompt"]
        assert "add_child" in code_ctx["next"]

        debug_ctx = ok(await client.call_tool("build_context",
            {"run_id": run_id, "node_id": "n0", "role": "debug"}))
        assert debug_ctx["role"] == "debug" and debug_ctx["prompt"] != plan_ctx["prompt"]


@pytest.mark.parametrize("mode", MODES)
async def test_build_context_errors(served: Served, mode: str) -> None:
    run_id = served.run_id
    args = {"run_id": run_id, "node_id": "n0"}
    async with Client(served.server, mode=mode) as client:
        assert "unknown role 'tester'" in error_text(await client.call_tool("build_context",
            {**args, "role": "tester"}))
        assert "needs the plan" in error_text(await client.call_tool("build_context",
            {**args, "role": "code"}))
        no_anchors = "## Advice\nfuse it\n\n## Scaffold\n```python\n" + PROBLEM.read_text() + "```\n"
        message = error_text(await client.call_tool("build_context",
            {**args, "role": "code", "plan": no_anchors}))
        assert "no anchors" in message and "IMPROVE BEGIN" in message
        drifted = anchored_plan(PROBLEM.read_text().replace("get_inputs", "make_inputs"))
        assert "scaffold" in error_text(
            await client.call_tool("build_context", {**args, "role": "code", "plan": drifted})
        ).lower()
        assert "n99" in error_text(
            await client.call_tool("build_context", {"run_id": run_id, "node_id": "n99", "role": "plan"})
        )
        assert "list_runs" in error_text(
            await client.call_tool("build_context", {"run_id": "r-nothere", "node_id": "n0", "role": "plan"})
        )
        assert "list_runs" in error_text(await client.call_tool("select_node", {"run_id": "r-nothere"}))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("candidate", "status", "reason"),
    [("cand_clamp", "passed", None), ("cand_wrong", "wrong_output", "tolerance"),
     ("cand_crash", "runtime_error", "exception")],
)
async def test_evaluate_kernel_verdicts(served: Served, mode: str, candidate: str, status: str,
    reason: str | None) -> None:
    progress = ProgressLog()
    async with Client(served.server, mode=mode) as client:
        result = ok(await client.call_tool(
            "evaluate_kernel", {"run_id": served.run_id, "source": source(candidate)},
            progress_callback=progress,
        ))
    assert result["status"] == status and result["reason"] == reason
    assert result["evaluation_id"].startswith("e-")
    progress.assert_increasing()
    if not result["cached"]:
        assert progress.events, "an uncached evaluation reports its phases"
        messages = [m or "" for _, _, m in progress.events]
        assert {"load", "correctness"} <= set(messages) and ("timing" in messages) == (status == "passed")
        assert messages[-1].startswith(f"done: {status} in ") and " s (" in messages[-1]
    if status == "passed":
        assert result["runtime_ms"] > 0 and result["speedups"]["eager"] > 0
        assert "add_child" in result["next"]
        trust = result["trust"]
        assert trust["isolation"] in ("sandbox", "uid", "process") and trust["checked_calls"] > 0
        assert trust["external_ms"] > 0 and "fresh secret inputs" in " ".join(trust["defences"])
        # where the time stands against the problem's floor on this machine (docs/sol.md)
        assert result["sol_fraction"] > 0 and "roofline" in result["speed_of_light"]
    else:
        assert result["runtime_ms"] is None and result["message"] and result["sol_fraction"] is None


@pytest.mark.parametrize("mode", MODES)
async def test_evaluate_kernel_refuses_bad_sources(served: Served, mode: str) -> None:
    async with Client(served.server, mode=mode) as client:
        before = await attempts(client, served.run_id)
        args = {"run_id": served.run_id}
        assert "ModelNew" in error_text(
            await client.call_tool("evaluate_kernel", {**args, "source": source("cand_no_model_new")})
        )
        huge = source("cand_clamp") + "#" * (MAX_SOURCE_BYTES + 1)
        assert "limit" in error_text(await client.call_tool("evaluate_kernel", {**args, "source": huge}))
        assert "empty" in error_text(await client.call_tool("evaluate_kernel", {**args, "source": "  "}))
        assert "list_runs" in error_text(
            await client.call_tool("evaluate_kernel", {"run_id": "r-nothere", "source": source("cand_clamp")})
        )
        assert await attempts(client, served.run_id) == before


@pytest.mark.parametrize("mode", MODES)
async def test_add_child_records_the_servers_own_evaluation(served: Served, mode: str) -> None:
    run_id = served.run_id
    plan = anchored_plan(PROBLEM.read_text())
    async with Client(served.server, mode=mode) as client:
        evaluated = ok(await client.call_tool("evaluate_kernel",
            {"run_id": run_id, "source": source("cand_clamp")}))
        child = ok(await client.call_tool("add_child", {
            "run_id": run_id, "parent_id": "n0", "source": source("cand_clamp"), "plan": plan,
            "evaluation_id": evaluated["evaluation_id"],
        }))
        assert child["status"] == "passed" and child["parent_id"] == "n0" and child["action"] == "plan"
        assert child["runtime_ms"] == evaluated["runtime_ms"], "the stored evaluation is reused"
        assert child["adherence"] is not None and 0 <= child["adherence"] <= 1

        # An evaluation id of another source is ignored: the wrong kernel is judged on its own.
        wrong = ok(await client.call_tool("add_child", {
            "run_id": run_id, "parent_id": "n0", "source": source("cand_wrong"),
            "evaluation_id": evaluated["evaluation_id"],
        }))
        assert wrong["status"] == "wrong_output" and wrong["runtime_ms"] is None

        fixed = ok(await client.call_tool("add_child", {
            "run_id": run_id, "parent_id": wrong["node_id"], "source": source("cand_clamp"),
            "action": "debug",
        }))
        assert fixed["action"] == "debug" and fixed["status"] == "passed"
        assert fixed["attempts_left"] == child["attempts_left"] - 2

        node = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": wrong["node_id"]}))
        assert node["children"] == [fixed["node_id"]] and node["parent_id"] == "n0"
        assert node["evaluation"]["status"] == "wrong_output" and node["source"] == source("cand_wrong")


@pytest.mark.parametrize("mode", MODES)
async def test_add_child_refusals_record_nothing(served: Served, mode: str) -> None:
    run_id = served.run_id
    base = {"run_id": run_id, "parent_id": "n0", "source": source("cand_clamp")}
    async with Client(served.server, mode=mode) as client:
        before = await attempts(client, run_id)
        assert "n77" in error_text(await client.call_tool("add_child", {**base, "parent_id": "n77"}))
        assert "'plan' or 'debug'" in error_text(await client.call_tool("add_child",
            {**base, "action": "root"}))
        assert "ModelNew" in error_text(
            await client.call_tool("add_child", {**base, "source": source("cand_no_model_new")})
        )
        huge = source("cand_clamp") + "#" * (MAX_SOURCE_BYTES + 1)
        assert "limit" in error_text(await client.call_tool("add_child", {**base, "source": huge}))
        bad_plan = anchored_plan(PROBLEM.read_text().replace("self.scale = scale", "self.scale = 3"))
        assert "differs from the selected node" in error_text(
            await client.call_tool("add_child", {**base, "plan": bad_plan})
        )
        assert "list_runs" in error_text(await client.call_tool("add_child", {**base, "run_id": "r-nothere"}))
        assert await attempts(client, run_id) == before


@pytest.mark.parametrize("mode", MODES)
async def test_budget_exhausted(served: Served, mode: str) -> None:
    async with Client(served.server, mode=mode) as client:
        run_id = ok(await client.call_tool("create_run", {"problem": str(PROBLEM), "budget": 1}))["run_id"]
        child = ok(await client.call_tool(
            "add_child", {"run_id": run_id, "parent_id": "n0", "source": source("cand_clamp")}
        ))
        assert child["attempts_left"] == 0 and "leaderboard" in child["next"]
        refused = error_text(await client.call_tool(
            "add_child", {"run_id": run_id, "parent_id": "n0", "source": source("cand_wrong")}
        ))
        assert "budget of 1" in refused and "leaderboard" in refused
        assert "budget" in error_text(await client.call_tool("select_node", {"run_id": run_id}))
        assert await attempts(client, run_id) == 1
        # The budget spent, the run says so (it read "created" before any attempt).
        runs = ok(await client.call_tool("list_runs"))["runs"]
        assert next(r["status"] for r in runs if r["run_id"] == run_id) == "finished"


@pytest.mark.parametrize("mode", MODES)
async def test_leaderboard_list_runs_and_export(served: Served, mode: str) -> None:
    run_id = served.run_id
    async with Client(served.server, mode=mode) as client:
        for name in ("cand_clamp", "cand_crash"):
            ok(await client.call_tool("add_child",
                {"run_id": run_id, "parent_id": "n0", "source": source(name)}))
        board = ok(await client.call_tool("leaderboard", {"run_id": run_id}))["entries"]
        assert board, "a correct node was recorded"
        times = [e["runtime_ms"] for e in board]
        assert times == sorted(times)
        assert len({e["node_id"] for e in board}) == len(board)
        assert all(e["speedups"]["eager"] > 0 for e in board)
        assert len(ok(await client.call_tool("leaderboard", {"run_id": run_id, "k": 1}))["entries"]) == 1
        assert "k" in error_text(await client.call_tool("leaderboard", {"run_id": run_id, "k": 0}))
        assert "list_runs" in error_text(await client.call_tool("leaderboard", {"run_id": "r-nothere"}))

        summary = next(r for r in ok(await client.call_tool("list_runs"))["runs"] if r["run_id"] == run_id)
        assert summary["best_node_id"] == board[0]["node_id"] and summary["passed"] >= 1
        assert summary["attempts"] >= 2 and summary["problem"] == "problem_relu_scale"

        exported = ok(await client.call_tool("export_kernel", {"run_id": run_id}))
        assert exported["node_id"] == board[0]["node_id"]
        assert "class ModelNew" in exported["source"] and "_stark_self_check()" in exported["source"]
        compile(exported["source"], "exported.py", "exec")
        slower = exported["speedups"]["eager"] < 1.0
        assert bool(exported["warnings"]) == slower
        assert all("slower than eager PyTorch" in w for w in exported["warnings"])
        # Only correct attempts are exported: not the reference, not a failing node.
        assert "reference" in error_text(await client.call_tool("export_kernel",
            {"run_id": run_id, "node_id": "n0"}))
        children = ok(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n0"}))["children"]
        statuses = {n: ok(await client.call_tool("get_node",
            {"run_id": run_id, "node_id": n}))["evaluation"]["status"]
                    for n in children}
        crashed = next(n for n, status in statuses.items() if status != "passed")
        refused = error_text(await client.call_tool("export_kernel", {"run_id": run_id, "node_id": crashed}))
        assert f"did not pass ({statuses[crashed]})" in refused and "get_node" in refused
        assert "n404" in error_text(await client.call_tool("export_kernel",
            {"run_id": run_id, "node_id": "n404"}))
        assert "n404" in error_text(await client.call_tool("get_node", {"run_id": run_id, "node_id": "n404"}))


@pytest.mark.parametrize("mode", MODES)
async def test_export_without_a_correct_node(served: Served, mode: str) -> None:
    async with Client(served.server, mode=mode) as client:
        run_id = ok(await client.call_tool("create_run", {"problem": str(PROBLEM), "budget": 2}))["run_id"]
        ok(await client.call_tool("add_child",
            {"run_id": run_id, "parent_id": "n0", "source": source("cand_crash")}))
        assert "no correct node" in error_text(await client.call_tool("export_kernel", {"run_id": run_id}))
        assert ok(await client.call_tool("leaderboard", {"run_id": run_id}))["entries"] == []


async def test_profile_kernel_on_the_cpu_reports_why_and_is_kept(served: Served) -> None:
    """On the CPU (no GPU in CI) the tool answers with a report saying profiling needs a GPU; the
    report is kept beside the node, so get_node shows it. A profile with kernels, written by another
    process, then reaches get_node and the planner's build_context, and a later failed profile does
    not hide it. GPU profiles: tools/gpu_profiler.py."""
    async with Client(served.server) as client:
        before = ok(await client.call_tool("get_node", {"run_id": served.run_id, "node_id": "n0"}))
        assert before["profile"] is None
        answer = ok(await client.call_tool("profile_kernel", {"run_id": served.run_id, "node_id": "n0"}))
        assert answer["source"] == "none" and "needs a GPU" in answer["summary"]
        assert answer["table"] == "" and answer["profile"]["kernels"] == []
        after = ok(await client.call_tool("get_node", {"run_id": served.run_id, "node_id": "n0"}))
        assert after["profile"]["reason"] == answer["profile"]["reason"]
        assert after["evaluation"] == before["evaluation"]  # the verdict and times are untouched
        missing = error_text(await client.call_tool("profile_kernel",
                                                    {"run_id": served.run_id, "node_id": "n404"}))
        assert "n404" in missing

        recorded = (Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "ncu_raw.csv").read_text()
        report = profile_reports.from_answer({"source": "ncu", "report": recorded}, None, 40, 9.0)
        async with await Store.open(Settings(home=served.home).database) as other:
            await other.add_profile(served.run_id, "n0", report)
        shown = ok(await client.call_tool("get_node", {"run_id": served.run_id, "node_id": "n0"}))
        assert shown["profile"]["source"] == "ncu" and len(shown["profile"]["kernels"]) == 2
        context = {"run_id": served.run_id, "node_id": "n0", "role": "plan"}
        prompt = ok(await client.call_tool("build_context", context))["prompt"]
        assert "### Profiles: where the device time goes" in prompt and "| n0 | sm80_xmma_gemm" in prompt
        await client.call_tool("profile_kernel", {"run_id": served.run_id, "node_id": "n0"})
        kept = ok(await client.call_tool("get_node", {"run_id": served.run_id, "node_id": "n0"}))
        assert kept["profile"]["source"] == "ncu"  # a profile without kernels never hides one with
        assert kept["evaluation"] == before["evaluation"]

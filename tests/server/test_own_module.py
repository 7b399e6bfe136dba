"""The in-editor flow over MCP: the user's module -> create_problem -> a run over two input sets ->
a drop-in export swapped into the user's model. A scripted host model drives the real client;
what it did is the transcript in docs/ide.md."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from .support import make_server, ok
from .transcript import Transcript, doc_block, masked, write_block

ROOT = Path(__file__).resolve().parents[2]
USER_PACKAGE = ROOT / "tests" / "fixtures" / "userpkg"
CANDIDATES = Path(__file__).parent / "fixtures" / "own_module"
DOC = ROOT / "docs" / "ide.md"
SHAPES = [{"batch": 2, "seq": 4}, {"batch": 8, "seq": 16}]
REQUEST = (
    "Can you make the MLP in mylib faster? Encoder builds it as ScaledMLP(32, 64, scale=0.5); "
    "we run it on batches of 2x4 and 8x16 tokens."
)

pytestmark = pytest.mark.anyio


def candidate(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def anchored(source: str, first: str, last: str, advice: str) -> str:
    """A plan: ``advice`` plus ``source`` with the lines from ``first`` to ``last`` inside one span."""
    lines, inside = [], False
    for line in source.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if first in line and not inside:
            lines.append(f"{indent}# <<<IMPROVE BEGIN>>>")
            inside = True
        lines.append(line)
        if inside and last in line:
            lines.append(f"{indent}# <<<IMPROVE END>>>")
            inside = False
    return f"## Advice\n{advice}\n\n## Scaffold\n```python\n" + "\n".join(lines) + "\n```\n"


@dataclass
class Flow:
    project: Path
    home: Path
    server: Any
    run_id: str
    problem_path: str
    transcript: Transcript
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


async def converse(server: Any, project: Path, home: Path) -> Flow:
    """The scripted host: what a host's model does when it follows optimize_module."""
    log = Transcript(project)
    results: dict[str, dict[str, Any]] = {}

    async def call(
        client: Client,
        tool: str,
        args: dict[str, Any],
        keep: tuple[str, ...],
        hidden: tuple[str, ...] = (),
        excerpts: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        result = ok(await client.call_tool(tool, args))
        log.call(tool, {k: ("…" if k in hidden else v) for k, v in args.items()}, result, keep, excerpts)
        return result

    async with Client(server) as client:
        log.user(REQUEST)
        args = {"request": REQUEST, "project_root": str(project)}
        guide = await client.get_prompt("optimize_module", args)
        log.prompt(
            "optimize_module", {"request": "…", "project_root": str(project)}, guide.messages[0].content.text
        )
        log.host(
            "Found `class ScaledMLP` in src/mylib/layers.py: `forward(x, mask=None)`, and the call site "
            "`ScaledMLP(d_model, hidden, scale=0.5)` in `Encoder`. The user gave the sizes, so no "
            "capture is needed."
        )
        created = await call(
            client,
            "create_problem",
            {
                "target": "mylib.layers:ScaledMLP",
                "project_root": str(project),
                "init_args": [32, 64],
                "init_kwargs": {"scale": 0.5},
                "inputs": ["x:float32[batch,seq,32]"],
                "shapes": SHAPES,
            },
            keep=("path", "kind", "import_roots", "init_inputs", "shapes", "checked_on", "next"),
        )
        results["create_problem"] = created
        log.host(
            "The problem states two input sets, x of 2x4x32 and 8x16x32 floats: as you said. Starting a run."
        )
        run = await call(
            client,
            "create_run",
            {"problem": created["path"], "budget": 2, "policy": "greedy", "seed": 11},
            keep=("run_id", "problem", "device", "budget", "baselines_ms", "next"),
        )
        run_id = run["run_id"]

        sources = {"n0": created["source"]}
        # Both attempts expand the root: after a failed first attempt the best node is still n0, so the
        # conversation is the same whatever the timings.
        steps = [
            (
                "cand_mlp_noscale",
                (
                    "Run both layers as addmm on the flattened tokens, with the per-channel "
                    "scale folded into the second layer."
                ),
            ),
            (
                "cand_mlp_addmm",
                (
                    "Run both layers as addmm on the flattened tokens with the bias fused, and "
                    "apply the scale in place on the result."
                ),
            ),
        ]
        for name, advice in steps:
            selection = await call(
                client, "select_node", {"run_id": run_id}, keep=("node_id", "action", "reason")
            )
            node_id = selection["node_id"]
            plan_ctx = await call(
                client,
                "build_context",
                {"run_id": run_id, "node_id": node_id, "role": "plan"},
                keep=("prompt", "node_ids"),
                excerpts={"prompt": "## Architecture to optimize" if len(sources) == 1 else "### Attempt n1"},
            )
            assert node_id == "n0" and "class ScaledMLP(nn.Module):" in plan_ctx["prompt"]
            plan = anchored(sources[node_id], "super().__init__", "self.eval()", advice)
            log.host(f"Plan: {advice}")
            await call(
                client,
                "build_context",
                {"run_id": run_id, "node_id": node_id, "role": "code", "plan": plan},
                keep=("node_ids", "next"),
                hidden=("plan",),
            )
            source = candidate(name)
            child = await call(
                client,
                "add_child",
                {"run_id": run_id, "parent_id": node_id, "source": source, "plan": plan, "action": "plan"},
                keep=(
                    "node_id",
                    "status",
                    "reason",
                    "runtime_ms",
                    "speedups",
                    "shapes",
                    "attempts_left",
                    "next",
                ),
                hidden=("source", "plan"),
            )
            results[name] = child
            sources[child["node_id"]] = source
            if child["status"] != "passed":
                log.host(
                    f"{child['node_id']} failed the check ({child['reason']}): the per-channel scale "
                    "went missing. Back to the best node for another plan."
                )

        board = await call(client, "leaderboard", {"run_id": run_id}, keep=("entries",))
        results["leaderboard"] = board
        exported = await call(
            client,
            "export_kernel",
            {"run_id": run_id},
            keep=("node_id", "runtime_ms", "speedups", "shapes", "warnings", "source"),
        )
        results["export"] = exported
        (project / "src" / "mylib" / "fast_mlp.py").write_text(exported["source"])
        log.host(
            "Saved it as src/mylib/fast_mlp.py. To use it, one line after building the model: "
            '`stark_mcp.swap(model, "mlp", ModelNew)` with `from mylib.fast_mlp import ModelNew` '
            "(or `model.mlp = from_module(model.mlp)` without stark-mcp). It is proven for exactly "
            "what its header states (ScaledMLP(32, 64, 0.5), float32 weights, the CPU, inference, "
            "the input sets listed) and for nothing else; `python -m mylib.fast_mlp` repeats its check."
        )
    return Flow(
        project=project,
        home=home,
        server=server,
        run_id=run_id,
        problem_path=created["path"],
        transcript=log,
        results=results,
    )


@pytest.fixture(scope="module")
async def flow(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    base = tmp_path_factory.mktemp("own-module")
    project = base / "proj"
    shutil.copytree(USER_PACKAGE, project)
    server = make_server(base / "home", roots=(project,))
    return await converse(server, project, base / "home")


async def test_the_problem_comes_from_the_users_module_and_the_run_passes_and_fails_as_it_should(
    flow: Flow,
) -> None:
    created = flow.results["create_problem"]
    assert created["path"] == str(flow.project / "stark-problems" / "scaled_mlp.py")
    assert created["import_roots"] == [str(flow.project / "src")] and created["checked_on"] == "cpu"
    assert list(created["shapes"]) == ["batch=2,seq=4", "batch=8,seq=16"]
    assert flow.results["cand_mlp_noscale"]["status"] == "wrong_output"
    assert flow.results["cand_mlp_addmm"]["status"] == "passed"
    assert [e["node_id"] for e in flow.results["leaderboard"]["entries"]] == ["n2"]
    assert flow.results["export"]["node_id"] == "n2"


async def test_the_transcript_in_docs_ide_md_is_this_conversation(flow: Flow) -> None:
    markdown = flow.transcript.markdown()
    if os.environ.get("STARK_WRITE_TRANSCRIPT"):
        write_block(DOC, markdown)
    assert masked(doc_block(DOC)) == masked(markdown), (
        "docs/ide.md shows a different conversation; rerun with STARK_WRITE_TRANSCRIPT=1 to rewrite it"
    )


async def test_the_export_swaps_into_the_users_model_with_its_weights_and_outputs(flow: Flow) -> None:
    # The CLI writes the same drop-in as the tool.
    path = flow.project / "src" / "mylib" / "fast_mlp.py"
    path.unlink()
    # --no-verify: the drop-in is the subject here; export's verification (a re-timing, which a loaded
    # machine can push outside its tolerance) is tests/orchestrator/test_verify.py's.
    command = [sys.executable, "-m", "stark_mcp", "export", flow.run_id, "--out", str(path), "--no-verify"]
    cli = await anyio.run_process(command, env={**os.environ, "STARK_HOME": str(flow.home)}, check=False)
    assert cli.returncode == 0, cli.stderr.decode()
    exported = flow.results["export"]
    assert path.read_text() == exported["source"]
    # The user's code imports it, swaps it in with the original's weights, and gets the same outputs.
    env = {**os.environ, "PYTHONPATH": str(flow.project / "src")}
    done = await anyio.run_process(
        [sys.executable, str(CANDIDATES / "use_export.py")], env=env, cwd=flow.project, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert report["swapped"] and report["same_weights"] and report["equal"], report
    assert report["max_abs_diff"] < 1e-5
    proven = report["proven"]
    assert proven["target"] == "mylib.layers:ScaledMLP" and proven["init_inputs"] == [32, 64, 0.5]
    assert proven["device"] == "cpu" and proven["module_dtype"] == "float32" and proven["node"] == "n2"
    # It claims the input sets the evaluation reported: both.
    claimed = proven["input_sets"]
    assert claimed == {"batch=2,seq=4": "x: float32[2, 4, 32]", "batch=8,seq=16": "x: float32[8, 16, 32]"}
    assert set(proven["speedups_per_set"]) == set(claimed)
    assert "size mismatch" in report["wrong_size"] and "ScaledMLP(32, 64, 0.5)" in report["wrong_size"]
    assert report["wrong_dtype"].startswith("this kernel was proven with float32 parameters, not float64")
    assert report["self_check"] == 0, report["self_check_output"]
    lines = report["self_check_output"].splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == list(claimed)
    assert all("(ok)" in line for line in lines[:-1])
    # The same drop-in made wrong (outputs half again too large) fails its check loudly.
    wrong = flow.project / "wrong_mlp.py"
    wrong.write_text(exported["source"].replace(
        'if __name__ == "__main__":',
        "_right = ModelNew.forward\nModelNew.forward = lambda self, *a, **k: _right(self, *a, **k) * 1.5\n\n"
        'if __name__ == "__main__":'))
    failed = await anyio.run_process([sys.executable, str(wrong)], env=env, cwd=flow.project, check=False)
    assert failed.returncode == 1, failed.stdout.decode() + failed.stderr.decode()[-3000:]
    assert "FAILED" in failed.stdout.decode()
    header = exported["source"].splitlines()[:10]
    assert header[0].startswith(f"# Exported by stark-mcp from run {flow.run_id}, node n2")
    assert "#   batch=2,seq=4: x: float32[2, 4, 32]" in header
    assert not any("not proven" in line for line in header)
    # A failing node is refused rather than exported as if it were proven.
    async with Client(flow.server) as client:
        refused = await client.call_tool("export_kernel", {"run_id": flow.run_id, "node_id": "n1"})
    assert refused.is_error and "did not pass (wrong_output)" in refused.content[0].text


async def test_a_kernel_correct_on_one_input_set_only_fails(flow: Flow) -> None:
    async with Client(flow.server) as client:
        result = ok(
            await client.call_tool(
                "evaluate_kernel", {"run_id": flow.run_id, "source": candidate("cand_mlp_overfit")}
            )
        )
    assert result["status"] == "wrong_output", result
    assert "batch=8,seq=16" in result["message"], result["message"]


async def test_speedups_are_reported_per_input_set_and_as_their_geometric_mean(flow: Flow) -> None:
    child = flow.results["cand_mlp_addmm"]
    assert [s["label"] for s in child["shapes"]] == ["batch=2,seq=4", "batch=8,seq=16"]
    per_set = [s["speedups"]["eager"] for s in child["shapes"]]
    assert child["speedups"]["eager"] == pytest.approx(math.sqrt(per_set[0] * per_set[1]), rel=1e-6)
    # ... and the export then states both input sets as proven, with the speedup on each.
    export = flow.results["export"]
    assert "#   batch=8,seq=16: x: float32[8, 16, 32]" in export["source"].splitlines()[:10]
    assert export["shapes"] == {s["label"]: s["speedups"] for s in child["shapes"]}
    # get_node shows the same per-set results.
    async with Client(flow.server) as client:
        node = ok(await client.call_tool("get_node", {"run_id": flow.run_id, "node_id": child["node_id"]}))
    assert node["evaluation"]["shapes"] == child["shapes"]

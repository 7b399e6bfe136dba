#!/usr/bin/env python3
"""Attempts in flight through MCP tasks against one blocking attempt at a time.

Two scripted hosts drive ``stark-mcp serve`` (a real stdio server, real builds and evaluations)
through the same 12-attempt run, each host's model taking ``--write-s`` seconds (20 by default, as a
model writing a kernel does) before each ``add_child``:

  * blocking: a client without the Tasks extension; select_node, build_context, write, add_child,
    which blocks for the whole evaluation; then the next attempt;
  * tasks: a client declaring ``io.modelcontextprotocol/tasks`` that keeps ``--in-flight`` attempts
    (3) going: each slot selects (the server steers off attempts in flight), writes, submits
    ``add_child`` as a task and polls it, while the other slots write or wait. ``--writers`` says how
    many replies the host writes at once: by default one per slot (sub-agents, or several hosts);
    ``--writers 1`` is one model writing every reply in turn while the evaluations run behind it.

Every attempt is a fresh evaluation (the scripted kernel carries its attempt number in its code).
On the CPU the default kernel is cheap (``--kernel torch``: no build, a real check and timing in the
evaluator's processes); ``--kernel cpp`` makes every attempt a C++ build as well, which on a 2-core
machine runs one at a time (the evaluator builds on half the cores), so there the hosts differ only
by the writing the tasks host hides. On a GPU (``--device cuda``) every attempt builds a CUDA
kernel. Target: the tasks host takes at most 0.5x the blocking host's wall time. Prints a markdown
table last; writes JSON to ``$OUT/bench_tasks.json`` when ``$OUT`` is set.

    python3 tools/bench_tasks.py                        # the real one on the CPU (about 10 minutes)
    python3 tools/bench_tasks.py --write-s 2 --attempts 4   # a quick check (or --dry-run)
    python3 tools/bench_tasks.py --device cuda --attempts 6 --kernelbench PATH/problems.jsonl
                                                        # on a GPU: tools/candidates' CUDA kernel, L1 88
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from stark_mcp.server.tasks.client import TasksClient, outcome, start_tool, wait_task  # noqa: E402
from stark_mcp.server.tasks.wire import CreateTaskResult  # noqa: E402

TARGET_RATIO = 0.5
CPU_PROBLEM = ROOT / "examples" / "leaky_clamp" / "problem.py"
CPU_KERNEL = ROOT / "examples" / "leaky_clamp" / "kernel_cpu.py"
CUDA_KERNEL = ROOT / "tools" / "candidates" / "gelu_tanh_cuda.py"
# The cheap CPU kernel for examples/leaky_clamp: torch operators, nothing to build.
TORCH_KERNEL = '''"""examples/leaky_clamp in one where() and one in-place clamp."""

import torch
import torch.nn as nn

ATTEMPT = 0


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float, limit: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.where(x > 0, x, x * self.negative_slope)
        return y.clamp_(-self.limit, self.limit)
'''
CUDA_PROBLEM = (1, 88)  # KernelBench L1 88 (GELU, tanh form), read from the JSONL at run time
INCLUDE = "#include <torch/extension.h>"


def log(message: str) -> None:
    print(f"[bench_tasks {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def kernelbench_code(path: Path, level: int, problem_id: int) -> str:
    with path.open() as handle:
        for line in handle:
            item = json.loads(line)
            if (int(item["level"]), int(item["problem_id"])) == (level, problem_id):
                return item["code"]
    raise SystemExit(f"{path}: no problem L{level} {problem_id}")


def attempt_source(kernel: str, host: str, number: int) -> str:
    """The scripted reply for one attempt: the kernel, its C++/CUDA source marked with the attempt,
    so each attempt's build is a real one (new code for the build cache)."""
    if "ATTEMPT = 0" in kernel:
        return kernel.replace("ATTEMPT = 0", f"ATTEMPT = {number}  # {host} host", 1)
    if INCLUDE not in kernel:
        raise SystemExit(f"the scripted kernel has no '{INCLUDE}' line to mark")
    # A definition, not a comment: the build cache keys on the code and ignores comments.
    mark = f"namespace {{ [[maybe_unused]] const int bench_tasks_{host}_{number} = {number}; }}"
    return kernel.replace(INCLUDE, f"{INCLUDE}\n{mark}", 1)


def server(home: Path) -> StdioServerParameters:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "STARK_"))},
        "STARK_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    args = ["-m", "stark_mcp", "serve", "--baselines", "eager"]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(home))


def structured(result: Any) -> dict[str, Any]:
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"tool error: {text[:500]}")
    return result.structured_content


class Host:
    """One scripted host: its client, its run, its timings."""

    def __init__(self, name: str, client: Client, args: argparse.Namespace, kernel: str) -> None:
        self.name, self.client, self.args, self.kernel = name, client, args, kernel
        self.run_id = ""
        self.submitted = 0
        self.recorded: list[dict[str, Any]] = []
        self.messages: list[str] = []

    async def create(self, problem: str) -> None:
        created = structured(await self.client.call_tool("create_run", {
            "problem": problem, "device": self.args.device, "budget": self.args.attempts, "seed": 1,
        }))
        self.run_id = created["run_id"]

    async def plan(self) -> tuple[str, str]:
        """What a host does before writing: select a node and read the role's prompt."""
        selected = structured(await self.client.call_tool("select_node", {"run_id": self.run_id}))
        role = "plan" if selected["action"] == "plan" else "debug"
        await self.client.call_tool("build_context", {"run_id": self.run_id, "node_id": selected["node_id"],
                                                      "role": role})
        return selected["node_id"], selected["action"]

    def claim(self) -> int | None:
        if self.submitted >= self.args.attempts:
            return None
        self.submitted += 1
        return self.submitted

    def arguments(self, node_id: str, action: str, number: int) -> dict[str, Any]:
        return {"run_id": self.run_id, "parent_id": node_id, "action": action,
                "source": attempt_source(self.kernel, self.name, number)}


async def blocking_host(host: Host) -> None:
    while (number := host.claim()) is not None:
        node_id, action = await host.plan()
        await anyio.sleep(host.args.write_s)  # the model writes the attempt
        added = structured(await host.client.call_tool("add_child", host.arguments(node_id, action, number)))
        host.recorded.append(added)


async def tasks_host(host: Host) -> None:
    writers = anyio.Semaphore(host.args.writers or host.args.in_flight)

    async def slot() -> None:
        while (number := host.claim()) is not None:
            async with writers:
                node_id, action = await host.plan()
                await anyio.sleep(host.args.write_s)
            arguments = host.arguments(node_id, action, number)
            handle = await start_tool(host.client.session, "add_child", arguments)
            if not isinstance(handle, CreateTaskResult):
                raise RuntimeError("the server answered add_child inline: no task")
            state = await wait_task(host.client.session, handle.task_id, poll_cap_s=0.5)
            host.messages.append(state.status_message or "")
            host.recorded.append(structured(outcome(state)))

    async with anyio.create_task_group() as group:
        for _ in range(host.args.in_flight):
            group.start_soon(slot)


async def measure(
    name: str, client: Client, args: argparse.Namespace, kernel: str, problem: str
) -> dict[str, Any]:
    host = Host(name, client, args, kernel)
    await host.create(problem)
    load_before = os.getloadavg()
    started = time.monotonic()
    await (blocking_host(host) if name == "blocking" else tasks_host(host))
    wall = time.monotonic() - started
    statuses = [r["status"] for r in host.recorded]
    log(f"{name}: {len(host.recorded)} attempts in {wall:.1f} s ({statuses.count('passed')} passed)")
    return {"host": name, "wall_s": round(wall, 1), "attempts": len(host.recorded),
            "passed": statuses.count("passed"), "run_id": host.run_id, "load_before": load_before,
            "load_after": os.getloadavg(), "status_messages": host.messages[:3]}


async def bench(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    if args.device == "cuda":
        # a file inside the server's folder: the server takes no problem source from a client
        # unless started with --allow-problem-source (docs/mcp.md, Problem code)
        problem_file = home / f"kernelbench_L{CUDA_PROBLEM[0]}_{CUDA_PROBLEM[1]}.py"
        problem_file.write_text(kernelbench_code(args.kernelbench, *CUDA_PROBLEM))
        problem = str(problem_file)
        kernel = CUDA_KERNEL.read_text()
    else:
        problem = str(CPU_PROBLEM)
        kernel = CPU_KERNEL.read_text() if args.kernel == "cpp" else TORCH_KERNEL
    results = {}
    # Warm the caches both hosts share (torch headers, the problem's baselines): not measured.
    async with Client(server(home)) as client:
        started = time.monotonic()
        warm = structured(await client.call_tool("create_run", {"problem": problem, "device": args.device,
                                                                "budget": 1}))
        structured(await client.call_tool("evaluate_kernel", {"run_id": warm["run_id"], "source": kernel}))
        log(f"warm-up (first run and build) took {time.monotonic() - started:.1f} s")
    async with Client(server(home), extensions=[TasksClient()]) as client:
        results["tasks"] = await measure("tasks", client, args, kernel, problem)
    async with Client(server(home)) as client:
        results["blocking"] = await measure("blocking", client, args, kernel, problem)
    ratio = results["tasks"]["wall_s"] / results["blocking"]["wall_s"]
    return {
        "device": args.device, "kernel": "cuda" if args.device == "cuda" else args.kernel,
        "attempts": args.attempts, "write_s": args.write_s,
        "in_flight": args.in_flight, "writers": args.writers or args.in_flight, "cpus": os.cpu_count(),
        "hosts": results,
        "ratio": round(ratio, 3), "target": TARGET_RATIO, "ok": ratio <= TARGET_RATIO,
    }


def table(report: dict[str, Any]) -> str:
    rows = [
        "| host | attempts in flight | replies written at once | attempts | passed | wall s | load 1 min |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("blocking", "tasks"):
        r = report["hosts"][name]
        flight = report["in_flight"] if name == "tasks" else 1
        writers = report["writers"] if name == "tasks" else 1
        load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
        rows.append(f"| {name} | {flight} | {writers} | {r['attempts']} | {r['passed']} | {r['wall_s']} "
                    f"| {load} |")
    verdict = "PASS" if report["ok"] else "FAIL"
    rows.append("")
    rows.append(f"tasks / blocking wall time: **{report['ratio']:.2f}x** (target <= {TARGET_RATIO}x): "
                f"{verdict}; {report['attempts']} attempts, {report['write_s']} s per reply, "
                f"device {report['device']}, kernel {report['kernel']}, {report['cpus']} CPUs")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--attempts", type=int, default=12)
    parser.add_argument("--kernel", default="torch", choices=("torch", "cpp"),
                        help="CPU only: torch operators (no build) or a C++ kernel built per attempt")
    parser.add_argument("--write-s", type=float, default=20.0,
                        help="seconds the host's model takes per reply")
    parser.add_argument("--in-flight", type=int, default=3)
    parser.add_argument("--writers", type=int, default=None,
                        help="replies written at once (default: in-flight)")
    parser.add_argument("--kernelbench", type=Path,
                        default=ROOT.parent / "shared" / "kernelbench" / "problems.jsonl")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--dry-run", action="store_true",
                        help="a quick check of the script: 3 attempts, 1 s per reply (no target)")
    args = parser.parse_args()
    if args.dry_run:
        args.attempts, args.write_s = 3, 1.0
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as home:
        report = anyio.run(bench, args, Path(home))
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "bench_tasks.json").write_text(text + "\n")
    print(table(report))
    sys.exit(0 if report["ok"] or args.dry_run else 1)


if __name__ == "__main__":
    main()

"""Synthetic run documents of any size, shaped like STARK trees, for the viewer's tests."""

from __future__ import annotations

import random

from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.problems import Problem
from stark_mcp.records import (
    Action,
    CorrectnessReport,
    Evaluation,
    ExchangeRecord,
    Node,
    RunRecord,
    Status,
    TimingStats,
    TrustReport,
    Usage,
)

from .replies import PROBLEMS

PROBLEM = Problem(name="scaled_relu", source=(PROBLEMS / "scaled_relu.py").read_text(), origin="test")
EAGER = TimingStats(median_ms=2.0, iqr_ms=0.01, mean_ms=2.0, min_ms=1.9, max_ms=2.2, samples=30)
FAILURES = (Status.BUILD_ERROR, Status.RUNTIME_ERROR, Status.WRONG_OUTPUT, Status.TIMEOUT)


def source_of(i: int) -> str:
    """A distinct, kernel-sized source for node ``i`` (about 6 kB, like a real CUDA candidate)."""
    kernel = "\n".join(
        f"    float v{k} = x[{k}] * {i}.0f + {k}.0f;  // step {k} of candidate {i}" for k in range(90)
    )
    return (
        f'import torch\nimport torch.nn as nn\n\nKERNEL_{i} = r"""\n'
        f"__global__ void k(const float* x) {{\n{kernel}\n}}\n"
        '"""\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n'
        f"        return torch.relu(x) * {i} + 1.0  # node n{i}\n"
    )


def evaluation(status: Status, ms: float | None) -> Evaluation:
    runtime = (
        TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, samples=30) if ms else None
    )
    return Evaluation(
        status=status,
        reason=None if status is Status.PASSED else "exception",
        message="" if status is Status.PASSED else "RuntimeError: boom",
        runtime=runtime,
        baselines={"eager": EAGER},
        speedups={"eager": 2.0 / ms} if ms else {},
        correctness=CorrectnessReport(trials=5, trials_passed=5 if ms else 0, allclose_1e2=bool(ms)),
        trust=TrustReport(
            isolation="sandbox", calls=40, checked_calls=8, defences=["fresh inputs", "l2 flush"]
        ),
        logs={} if ms else {"runtime": "Traceback ...\nRuntimeError: boom"},
        device="cuda",
        device_name="NVIDIA H100",
    )


def stark_tree(size: int, seed: int = 0) -> RunDocument:
    """``size`` nodes: the root takes 5 children, then each attempt extends a random earlier node;
    each non-root node has a plan and a code exchange, each prompt the size of a real one."""
    rng = random.Random(seed)
    run = RunRecord(
        id=f"r-big{size}",
        name="scaled_relu",
        problem=PROBLEM,
        device="cuda",
        strategy="stark",
        policy={"name": "stark"},
        budget=size - 1,
        seed=seed,
        baselines={"eager": EAGER},
        status="finished",
        created_at=0.0,
        updated_at=0.0,
    )
    nodes = [
        Node(
            id="n0",
            run_id=run.id,
            seq=0,
            action=Action.ROOT,
            source=PROBLEM.source,
            evaluation=evaluation(Status.PASSED, 2.0),
        )
    ]
    exchanges: list[ExchangeRecord] = []
    for i in range(1, size):
        parent = nodes[0] if i <= 5 else nodes[rng.randrange(1, i)]
        status = Status.PASSED if rng.random() < 0.6 else rng.choice(FAILURES)
        action = (
            Action.DEBUG if parent.evaluation is not None and not parent.evaluation.passed else Action.PLAN
        )
        nodes.append(
            Node(
                id=f"n{i}",
                run_id=run.id,
                parent_id=parent.id,
                seq=i,
                action=action,
                source=source_of(i),
                plan=f"## Advice\nFuse more in step {i}.\n\n## Scaffold\n```python\n# <<<IMPROVE BEGIN>>>\n"
                f"{parent.source}\n# <<<IMPROVE END>>>\n```\n"
                if action is Action.PLAN
                else None,
                evaluation=evaluation(status, rng.uniform(0.5, 3.0) if status is Status.PASSED else None),
                usage=Usage(input_tokens=9000, output_tokens=2000, cost_usd=0.05, calls=2),
                created_at=float(i),
            )
        )
        body = "\n\n".join(source_of(j) for j in rng.sample(range(1, i + 1), min(i, 5)))  # a window's sources
        for role in ("plan", "code") if action is Action.PLAN else ("debug",):
            exchanges.append(
                ExchangeRecord(
                    id=len(exchanges) + 1,
                    run_id=run.id,
                    node_id=f"n{i}",
                    role=role,
                    model="claude-sonnet-4-5",
                    request={"system": "You are part of a team.", "prefix": PROBLEM.source, "body": body},
                    reply=f"```python\n{source_of(i)}```",
                    usage=Usage(input_tokens=4500, output_tokens=1000, calls=1),
                    created_at=float(i),
                )
            )
    return RunDocument(run=run, nodes=nodes, exchanges=exchanges)

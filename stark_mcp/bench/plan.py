"""What a benchmark runs: the checked request (``BenchSpec``) and its (problem, strategy) pairs.

``plan_bench`` does every check that needs no database, evaluator or model, so a bad option
fails in a second with a clear message and nothing written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from stark_mcp.bench.errors import BenchError
from stark_mcp.bench.selection import select_problems
from stark_mcp.device import Device
from stark_mcp.evaluator import BASELINE_NAMES, EvalSettings
from stark_mcp.orchestrator.strategies import ABLATIONS, get_strategy
from stark_mcp.problems import Problem
from stark_mcp.problems.sets import load_problem_set, problem_key
from stark_mcp.records import LANGUAGES

DEFAULT_STRATEGIES = ("stark", "sampling", "reflexion", "search_only", "ma_only")
# Recorded in each run's config; the agents do not act on it yet (docs/bench.md).
MAX_BUDGET = 10_000


class BenchSpec(BaseModel):
    """What ``stark-mcp bench`` was asked to do."""

    problems: str = Field(description="KernelBench checkout, problems JSONL file, or folder of problem files")
    levels: list[int] = Field(default_factory=list)
    select: list[str] = Field(default_factory=list)
    sample: int | None = None
    seed: int = 0
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_STRATEGIES))
    ablate: list[str] = Field(default_factory=list, description="components: roles, anchors, windows, search")
    budget: int = 30
    language: str | None = None
    model: str | None = None
    backend: str | None = None
    device: str = "auto"
    parallel: int = 1
    pairs_at_once: int = Field(
        0, description="pairs run side by side; 0: one per evaluation worker (1 with untied scripted replies)"
    )
    eval_settings: EvalSettings = Field(default_factory=EvalSettings)
    out: Path


class Pair(BaseModel):
    """One (problem, strategy) pair: one run in the database."""

    id: str = Field(description="KEY:STRATEGY")
    key: str
    strategy: str
    problem: Problem
    seed: int = Field(description="the run's search seed, fixed by the benchmark seed and the pair")


class BenchPlan(BaseModel):
    spec: BenchSpec
    problems: list[Problem]
    strategies: list[str]
    pairs: list[Pair]

    def identity(self) -> dict[str, Any]:
        """What must not change when a benchmark is resumed in the same folder."""
        return {
            "problems": [[problem_key(p), p.hash] for p in self.problems],
            "strategies": self.strategies,
            "budget": self.spec.budget,
            "device": self.spec.device,
            "baselines": list(self.spec.eval_settings.baselines),
            "language": self.spec.language,
            "seed": self.spec.seed,
        }


def bench_strategies(strategies: list[str], ablate: list[str]) -> list[str]:
    """The strategies to run: the named ones, then one per ablated component; duplicates dropped."""
    unknown = [a for a in ablate if a not in ABLATIONS]
    if unknown:
        raise BenchError(f"unknown --ablate component(s) {', '.join(unknown)}; use {', '.join(ABLATIONS)}")
    names = list(dict.fromkeys([*strategies, *(ABLATIONS[a] for a in ablate)]))
    if not names:
        raise BenchError("no strategy to run: give --strategies or --ablate")
    for name in names:
        get_strategy(name)  # InvalidInput names the valid ones
    return names


def pair_seed(seed: int, pair_id: str) -> int:
    digest = hashlib.sha256(f"{seed}:{pair_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def bench_eval_settings(baselines: list[str], overrides: dict[str, Any] | None = None) -> EvalSettings:
    """The evaluator's settings from ``--baselines`` and ``--eval-settings`` (ValueError if invalid).
    No baselines named: every one, so max-autotune's figure always has its no-CUDA-graphs twin beside
    it (docs/benchmarks/compile_modes.md)."""
    return EvalSettings(**{"baselines": tuple(baselines or BASELINE_NAMES), **(overrides or {})})


def plan_bench(spec: BenchSpec) -> BenchPlan:
    if spec.out.exists() and not spec.out.is_dir():
        raise BenchError(f"--out {spec.out} is a file, not a folder")
    if not 1 <= spec.budget <= MAX_BUDGET:
        raise BenchError(f"--budget must be between 1 and {MAX_BUDGET}, got {spec.budget}")
    if spec.parallel < 0:
        raise BenchError(f"--parallel must be 0 (one per evaluation worker) or more, got {spec.parallel}")
    if spec.pairs_at_once < 0:
        raise BenchError(
            f"--pairs-at-once must be 0 (one per evaluation worker) or more, got {spec.pairs_at_once}"
        )
    Device.parse(spec.device, what="--device", error=BenchError)
    if spec.language is not None and spec.language not in LANGUAGES:
        raise BenchError(f"--language must be one of {', '.join(LANGUAGES)}, not {spec.language!r}")
    if "eager" not in spec.eval_settings.baselines:
        raise BenchError(
            "--baselines must include eager: every speedup and the root's score are measured against it"
        )
    strategies = bench_strategies(spec.strategies, spec.ablate)
    problems = select_problems(
        load_problem_set(spec.problems),
        levels=spec.levels,
        select=spec.select,
        sample=spec.sample,
        seed=spec.seed,
    )
    pairs = []
    for problem in problems:
        key = problem_key(problem)
        for strategy in strategies:
            pair_id = f"{key}:{strategy}"
            pairs.append(
                Pair(
                    id=pair_id,
                    key=key,
                    strategy=strategy,
                    problem=problem,
                    seed=pair_seed(spec.seed, pair_id),
                )
            )
    return BenchPlan(spec=spec, problems=problems, strategies=strategies, pairs=pairs)

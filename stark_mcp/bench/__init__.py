"""``stark-mcp bench``: many problems times many strategies, one resumable run per pair.

    plan = plan_bench(BenchSpec(problems="problems.jsonl", levels=[1], sample=5, out=Path("out")))
    outcome = await run_bench(service, plan, backend, progress=...)

``selection`` picks the problems, ``plan`` the pairs, ``runner`` runs them through the headless
loop (``orchestrator.loop.run_search``), ``rows`` and ``files`` keep ``results.jsonl`` and each
run's document, and ``metrics`` computes the paper's numbers from the rows (pure). The report
is written by ``stark_mcp.report``.
"""

from stark_mcp.bench.errors import BenchError
from stark_mcp.bench.plan import BenchPlan, BenchSpec, Pair, plan_bench
from stark_mcp.bench.runner import BenchOutcome, run_bench

__all__ = ["BenchError", "BenchOutcome", "BenchPlan", "BenchSpec", "Pair", "plan_bench", "run_bench"]

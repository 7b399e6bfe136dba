"""Turn a node into a runnable file: the kernel, plus a self-check against the reference.

The exported file imports as the candidate module (``ModelNew``) and, run as a
script, builds both modules with the same weights, compares them on fresh inputs
and prints the difference and rough timings. The reference is embedded as a string
so the file stands alone.
"""

from __future__ import annotations

from stark_mcp.orchestrator.dropin_export import dropin_source, is_dropin
from stark_mcp.problems import Problem
from stark_mcp.records import Node

_SELF_CHECK = '''

# ---- self-check added by `stark-mcp export` -------------------------------------------------
_STARK_REFERENCE = {reference!r}


def _stark_self_check(device: str | None = None) -> None:
    import time

    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    reference: dict = {{}}
    exec(compile(_STARK_REFERENCE, "<reference>", "exec"), reference)
    init = reference["get_init_inputs"]()
    torch.manual_seed(1234)
    ref_model = reference["Model"](*init).to(device)
    torch.manual_seed(1234)
    new_model = ModelNew(*init).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in reference["get_inputs"]()]
    with torch.no_grad():
        expected = ref_model(*inputs)
        got = new_model(*inputs)
    pairs = list(zip(expected, got)) if isinstance(expected, (tuple, list)) else [(expected, got)]
    worst = max(float((e.double() - g.double()).norm() / e.double().norm().clamp_min(1e-30)) for e, g in pairs)

    def _time(model) -> float:
        with torch.no_grad():
            for _ in range(3):
                model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(10):
                model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
        return (time.perf_counter() - start) / 10 * 1e3

    print({stats!r})
    print(f"relative error vs reference: {{worst:.3e}}")
    print(f"reference {{_time(ref_model):.3f}} ms, kernel {{_time(new_model):.3f}} ms on {{device}} (rough)")


if __name__ == "__main__":
    _stark_self_check()
'''


def export_source(problem: Problem, node: Node) -> str:
    """The node's source with a ``__main__`` self-check against ``problem`` appended; for a problem
    made from the user's own code by ``problem new``, a drop-in module instead (``dropin_export``)."""
    if is_dropin(problem):
        return dropin_source(problem, node)
    evaluation = node.evaluation
    if evaluation is not None and evaluation.runtime is not None:
        speedups = ", ".join(f"{k} {v:.2f}x" for k, v in sorted(evaluation.speedups.items()))
        stats = (
            f"stark-mcp node {node.run_id}/{node.id}: {evaluation.status.value}, "
            f"median {evaluation.runtime.median_ms:.4f} ms" + (f" ({speedups})" if speedups else "")
        )
    else:
        stats = f"stark-mcp node {node.run_id}/{node.id}: " + (
            evaluation.status.value if evaluation else "not evaluated"
        )
    header = f"# Exported by stark-mcp from run {node.run_id}, node {node.id}; problem {problem.name}.\n"
    return header + node.source.rstrip() + "\n" + _SELF_CHECK.format(reference=problem.source, stats=stats)

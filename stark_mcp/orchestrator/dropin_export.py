"""The drop-in export: a winning kernel as a module of the user's own package (pure).

For a problem made from the user's code (it declares ``STARK_TARGET``), ``export_source``
writes this instead of a standalone script. The file holds the node's ``ModelNew``; for a module
target ``from_module(original)``, which builds ``ModelNew`` with the proven constructor arguments,
loads the original's ``state_dict`` (strict) and refuses a device or parameter dtype it was not
proven on; ``STARK_PROVEN``, what the evaluator proved and nothing more; and a ``__main__``
self-check that compares it with the user's module on every input set it was proven on.
"""

from __future__ import annotations

import pprint
from typing import Any

from stark_mcp.orchestrator.errors import RunError
from stark_mcp.problems import Problem, ProblemError
from stark_mcp.problems.declarations import literal_constant
from stark_mcp.records import Node

_SUPPORT = """

# ---- drop-in support added by `stark-mcp export` ---------------------------------------------
STARK_TARGET = {target!r}
STARK_INIT_INPUTS = {init!r}
STARK_PROVEN = {proven}
_STARK_PROBLEM = {problem!r}
"""

_FROM_MODULE = '''

def from_module(original, *, strict: bool = True):
    """A ModelNew holding ``original``'s weights: built with STARK_INIT_INPUTS, then
    ``load_state_dict(original.state_dict())`` (strict: the same names and shapes), on its device.

    Refuses (ValueError) a module on another kind of device or with another parameter dtype than
    STARK_PROVEN states; ``strict=False`` skips that refusal, never the state_dict check.
    """
    import copy

    tensors = [*original.parameters(), *original.buffers()]
    device = tensors[0].device if tensors else None
    dtype = next((str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()), None)
    if strict and device is not None and device.type != STARK_PROVEN["device"]:
        raise ValueError(f"this kernel was proven on {{STARK_PROVEN['device']}}, not {{device.type}}; "
                         "move the module first, or pass strict=False to use it unproven")
    if strict and dtype is not None and dtype != STARK_PROVEN["module_dtype"]:
        raise ValueError(f"this kernel was proven with {{STARK_PROVEN['module_dtype']}} parameters, "
                         f"not {{dtype}}; pass strict=False to use it unproven")
    new = ModelNew(*copy.deepcopy(STARK_INIT_INPUTS))
    try:
        new.load_state_dict(original.state_dict())
    except RuntimeError as exc:
        raise ValueError(f"the original's weights do not fit this kernel, proven for {{STARK_TARGET}}"
                         f"{{tuple(STARK_INIT_INPUTS)}}: {{exc}}") from None
    if device is not None:
        new = new.to(device)
    return new.train(original.training)
'''

_SELF_CHECK = '''

def _stark_self_check() -> int:
    """Compare ModelNew with the user's module on every input set it was proven on."""
    import time

    import torch

    problem: dict = {{"__name__": "stark_problem"}}
    exec(compile(_STARK_PROBLEM, "<stark-mcp problem>", "exec"), problem)
    device = STARK_PROVEN["device"]
    if device == "cuda" and not torch.cuda.is_available():
        print("proven on cuda; there is no CUDA device here, so nothing was checked")
        return 1
    if device == "cpu":
        torch.set_num_threads(1)  # the evaluator's conditions: CPU code is timed on one thread
    torch.manual_seed(0)
    original = problem["Model"](*problem["get_init_inputs"]()).to(device)
    new = {build_new}.to(device)
    failed = 0
    for shape in problem.get("SHAPES") or [{{}}]:
        label = ",".join(f"{{k}}={{'x'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}}"
                         for k, v in shape.items()) or "default"
        if label not in STARK_PROVEN["input_sets"]:
            continue
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"](**shape)]
        with torch.no_grad():
            expected, got = original(*inputs), new(*inputs)
        pairs = list(zip(expected, got)) if isinstance(expected, (tuple, list)) else [(expected, got)]
        # As the standalone export's check: the evaluator's recorded tolerance, never tighter than
        # 1e-4 (1e-2 for half precision); a missing or misshapen output, or a NaN, fails.
        floor = 1e-2 if pairs[0][0].dtype in (torch.float16, torch.bfloat16) else 1e-4
        if (isinstance(expected, (tuple, list)) and len(got) != len(expected)) or any(
                not isinstance(g, torch.Tensor) or g.shape != e.shape for e, g in pairs):
            error = float("inf")
        else:
            error = max(float((e.double() - g.double()).norm() / e.double().norm().clamp_min(1e-30))
                        for e, g in pairs)
        ok = error <= max(STARK_PROVEN.get("tolerance") or 0.0, floor)
        failed += not ok

        def timed(model) -> float:
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

        print(f"{{label}}: relative error {{error:.2e}} ({{'ok' if ok else 'FAILED'}}); "
              f"reference {{timed(original):.3f}} ms, kernel {{timed(new):.3f}} ms (rough)")
    print(f"proven by stark-mcp on {{device}} for {{STARK_TARGET}}{{tuple(STARK_INIT_INPUTS)}} "
          "and these input sets only")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(_stark_self_check())
'''


def is_dropin(problem: Problem) -> bool:
    """Made by ``problem new`` (a target and literal constructor arguments); any other problem is
    exported as a standalone script."""
    if problem.target is None:
        return False
    try:
        return literal_constant(problem.source, "INIT_INPUTS", problem.name) is not None
    except (ProblemError, SyntaxError):
        return False


def dropin_source(problem: Problem, node: Node) -> str:
    """The drop-in module for ``node`` of a run of ``problem`` (which must declare STARK_TARGET)."""
    evaluation = node.evaluation
    if evaluation is None or not evaluation.passed:
        status = evaluation.status.value if evaluation else "not evaluated"
        raise RunError(
            f"node {node.id} did not pass ({status}); a drop-in is written only for a correct node"
        )
    assert problem.target is not None
    try:
        init = literal_constant(problem.source, "INIT_INPUTS", problem.name)
        module_dtype = literal_constant(problem.source, "MODULE_DTYPE", problem.name)
        signatures = literal_constant(problem.source, "SIGNATURES", problem.name) or {}
    except (ProblemError, SyntaxError) as exc:
        raise RunError(f"cannot export a drop-in for {problem.name}: {exc}") from None
    if init is None:
        raise RunError(
            f"{problem.name} declares no INIT_INPUTS literal; make it again with stark-mcp problem new"
        )
    is_module = module_dtype is not None
    proven_sets = proven_input_sets(problem, node)
    per_set = {s.label: {k: round(v, 4) for k, v in s.speedups.items()} for s in evaluation.shapes}
    proven: dict[str, Any] = {
        "target": problem.target,
        "run": node.run_id,
        "node": node.id,
        "device": evaluation.device,
        "device_name": evaluation.device_name,
        "module_dtype": module_dtype,
        "init_inputs": init,
        "input_sets": {label: signatures.get(label, "") for label in proven_sets},
        "speedups": {k: round(v, 4) for k, v in evaluation.speedups.items()},
        "speedups_per_set": per_set,
        "mode": "inference: eval() mode, no gradients",
        "tolerance": evaluation.correctness.tolerance if evaluation.correctness else None,
    }
    unproven = [label for label in problem.shape_labels if label not in proven_sets]
    support = _SUPPORT.format(
        target=problem.target, init=init, proven=_pretty(proven), problem=problem.source
    )
    build_new = "from_module(original)" if is_module else "ModelNew(*STARK_INIT_INPUTS)"
    code = support + (_FROM_MODULE.format() if is_module else "") + _SELF_CHECK.format(build_new=build_new)
    return _header(problem, node, proven, unproven, is_module) + node.source.rstrip() + "\n" + code


def proven_input_sets(problem: Problem, node: Node) -> list[str]:
    """The input sets the node's evaluation reports; without a per-set report, only the first:
    an evaluator that does not report sets ran ``get_inputs()``, whose defaults are the first."""
    assert node.evaluation is not None
    reported = [s.label for s in node.evaluation.shapes]
    return reported or problem.shape_labels[:1]


def _header(
    problem: Problem, node: Node, proven: dict[str, Any], unproven: list[str], is_module: bool
) -> str:
    speedups = ", ".join(f"{k} {v:.2f}x" for k, v in sorted(proven["speedups"].items())) or "none measured"
    over = " (geometric mean over the input sets)" if len(proven["input_sets"]) > 1 else ""
    device = proven["device"] + (f" ({proven['device_name']})" if proven["device_name"] else "")
    lines = [
        f"# Exported by stark-mcp from run {node.run_id}, node {node.id}: a drop-in for {problem.target}.",
        "#",
        f"# Proven by the evaluator on {device}"
        + (f", parameters in {proven['module_dtype']}" if is_module else "")
        + f", constructed as {problem.target.partition(':')[2]}{tuple(proven['init_inputs'])},",
        "# in inference (eval(), no gradients), on these input sets and on nothing else:",
        *(f"#   {label}: {text}".rstrip() for label, text in proven["input_sets"].items()),
        *(
            [
                (
                    "# Declared by the problem but not reported by the evaluator, so not proven: "
                    f"{', '.join(unproven)}"
                )
            ]
            if unproven
            else []
        ),
        f"# Speedup{over}: {speedups}.",
        "#",
    ]
    if is_module:
        lines += [
            '# Swap it in:  stark_mcp.swap(model, "path.to.module", ModelNew)',
            "#         or:  model.path.to.module = from_module(model.path.to.module)",
        ]
    else:
        call = problem.target.partition(":")[2]
        lines.append(
            f"# Use it:  where the code calls {call}(...), call ModelNew()(...) with the same arguments."
        )
    lines += [
        "# Check it:  run this file as a script (python -m <its module>); it repeats the comparison.",
        "",
        "",
    ]
    return "\n".join(lines)


def _pretty(value: dict[str, Any]) -> str:
    return pprint.pformat(value, sort_dicts=False, width=100)

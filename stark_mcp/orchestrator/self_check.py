"""The ``__main__`` block appended to an exported kernel: a check against the reference, timed the
way the evaluator times (the same device, CPU threads, warm-up and call count), saying which."""

from __future__ import annotations

import string
from typing import Any

_TEMPLATE = string.Template('''

# ---- self-check added by `stark-mcp export` -------------------------------------------------
_STARK_REFERENCE = $reference
_STARK_RECORDED = $recorded
# How the evaluator measured the recorded figure; the self-check times both modules the same way.
_STARK_CONDITIONS = $conditions


def _stark_median_ms(model, inputs, device, calls, warmup_s):
    import statistics
    import time

    import torch

    def call():
        model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()

    with torch.no_grad():
        started = time.perf_counter()
        call()
        while time.perf_counter() - started < warmup_s:
            call()
        samples = []
        for _ in range(calls):
            began = time.perf_counter()
            call()
            samples.append(time.perf_counter() - began)
    return statistics.median(samples) * 1e3


def _stark_self_check(device=None):
    import torch

    conditions = _STARK_CONDITIONS
    if device is None:
        device = conditions["device"]
        if device == "cuda" and not torch.cuda.is_available():
            device = "cpu"
    threads = conditions["cpu_threads"]
    if device == "cpu" and threads > 0:
        torch.set_num_threads(threads)
    reference = {}
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
    worst = max(
        float((e.double() - g.double()).norm() / e.double().norm().clamp_min(1e-30)) for e, g in pairs
    )
    calls, warmup_s = conditions["calls"], conditions["warmup_s"]
    ref_ms = _stark_median_ms(ref_model, inputs, device, calls, warmup_s)
    new_ms = _stark_median_ms(new_model, inputs, device, calls, warmup_s)
    how = f"median of {calls} calls after {warmup_s} s of warm-up on {device}"
    if device == "cpu":
        how += f", {threads} CPU thread(s)" if threads > 0 else ", torch's default CPU threads"
    if device != conditions["device"]:
        how += f"; the evaluator measured on {conditions['device']}"
    elif device == "cuda":
        how += "; host clock, without the evaluator's L2 flush"
    print(_STARK_RECORDED)
    print(f"relative error vs reference: {worst:.3e}")
    print(f"reference {ref_ms:.3f} ms, kernel {new_ms:.3f} ms: {ref_ms / new_ms:.2f}x ({how})")


if __name__ == "__main__":
    _stark_self_check()
''')


def self_check(reference: str, recorded: str, conditions: dict[str, Any]) -> str:
    """The block to append to a kernel's source. ``conditions``: device, cpu_threads, calls, warmup_s."""
    return _TEMPLATE.substitute(reference=repr(reference), recorded=repr(recorded),
        conditions=repr(conditions))

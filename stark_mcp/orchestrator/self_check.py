"""The ``__main__`` block appended to an exported kernel: a check against the reference, timed the
way the evaluator times (the same device, CPU threads, warm-up and call count), saying which.

Run as a script it prints ``ok`` or ``FAILED`` per input set and exits 1 when any output is off by
more than the evaluator's recorded tolerance (never tighter than 1e-4, 1e-2 for half precision),
is missing or has the wrong shape, as the drop-in export's check does."""

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


def _stark_self_check(device=None) -> int:
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
    calls, warmup_s = conditions["calls"], conditions["warmup_s"]
    how = f"median of {calls} calls after {warmup_s} s of warm-up on {device}"
    if device == "cpu":
        how += f", {threads} CPU thread(s)" if threads > 0 else ", torch's default CPU threads"
    if device != conditions["device"]:
        how += f"; the evaluator measured on {conditions['device']}"
    elif device == "cuda":
        how += "; host clock, without the evaluator's L2 flush"
    print(_STARK_RECORDED)
    failed = 0
    shapes = reference.get("SHAPES") or [{}]  # a problem's declared input sets: every one is checked
    for shape in shapes:
        label = ",".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                         for k, v in shape.items())
        prefix = f"{label}: " if len(shapes) > 1 else ""
        raw = reference["get_inputs"](**shape)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]
        with torch.no_grad():
            expected = ref_model(*inputs)
            got = new_model(*inputs)
        worst, tolerance = _stark_error(expected, got, conditions.get("tolerance"))
        ok = worst <= tolerance  # NaN compares False: it fails
        failed += not ok
        print(f"{prefix}relative error vs reference: {worst:.3e} "
              f"(tolerance {tolerance:.1e}: {'ok' if ok else 'FAILED'})")
        if ok:
            ref_ms = _stark_median_ms(ref_model, inputs, device, calls, warmup_s)
            new_ms = _stark_median_ms(new_model, inputs, device, calls, warmup_s)
            print(f"{prefix}reference {ref_ms:.3f} ms, kernel {new_ms:.3f} ms: "
                  f"{ref_ms / new_ms:.2f}x ({how})")
    print("self-check FAILED: the kernel does not match the reference" if failed else "self-check passed")
    return 1 if failed else 0


def _stark_error(expected, got, recorded_tolerance):
    """The worst relative error over the outputs, and the tolerance it must stay within: the one the
    evaluator recorded, but no tighter than 1e-4 (1e-2 for half-precision outputs)."""
    import torch

    pairs = list(zip(expected, got)) if isinstance(expected, (tuple, list)) else [(expected, got)]
    several = isinstance(expected, (tuple, list))
    if several and (not isinstance(got, (tuple, list)) or len(got) != len(expected)):
        return float("inf"), 0.0
    half = any(isinstance(e, torch.Tensor) and e.dtype in (torch.float16, torch.bfloat16)
               for e, _ in pairs)
    tolerance = max(recorded_tolerance or 0.0, 1e-2 if half else 1e-4)
    worst = 0.0
    for e, g in pairs:
        if not isinstance(e, torch.Tensor):
            worst = max(worst, 0.0 if e == g else float("inf"))
            continue
        if not isinstance(g, torch.Tensor) or g.shape != e.shape:
            return float("inf"), tolerance
        error = float((e.double() - g.double()).norm() / e.double().norm().clamp_min(1e-30))
        worst = error if error != error else max(worst, error)  # keep a NaN
        if worst != worst:
            break
    return worst, tolerance


if __name__ == "__main__":
    raise SystemExit(_stark_self_check())
''')


def self_check(reference: str, recorded: str, conditions: dict[str, Any]) -> str:
    """The block to append to a kernel's source. ``conditions``: device, cpu_threads, calls, warmup_s,
    and tolerance (the evaluator's, or None)."""
    return _TEMPLATE.substitute(reference=repr(reference), recorded=repr(recorded),
        conditions=repr(conditions))

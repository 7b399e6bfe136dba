#!/usr/bin/env python3
"""Can the trusted worker see how long the GPU was busy with another process's work, with no code of
its own in that process? A probe for issue 37's open launch-bound bound (docs/benchmarks/
adversarial.md, "What is left to try"): on a GPU the trusted bracket of a call is mostly CPU-side
harness, and the two runner processes of a pass run it at different speeds, so a report on a kernel
of a few microseconds is bounded only to about +-40 us. A device-wide counter of active cycles, read
by the worker, would not depend on any process's CPU speed.

This process enables CUPTI's PM sampling on device 0 (device-wide counters, sampled at a fixed GPU
time interval) and starts a child with a CUDA context of its own (a stand-in runner). The child runs
bursts of known GPU work, 2 ms apart, each timed by its own CUDA events: the harness's GPU sleep
alone, a launch-bound forward (torch's add and relu on 256 Ki floats), both together (a timed call),
and an empty pair of events. The samples are cut into busy spans at the idle gaps, matched to the
bursts in order, and each span's active time (active cycles at the sampled clock) is printed beside
the child's event time. The question: does a 7 us forward show as 7 us of activity, on top of the
sleep, within a microsecond or two, at what sampling interval and decode cost?

    . tools/device_prelude.sh && python3 -m pip install -q --no-index --no-deps --target /tmp/stark-pm \\
        .stage/pm/*.whl && PYTHONPATH=/tmp/stark-pm:$PYTHONPATH python3 tools/pm_sampling_probe.py --out $OUT

Needs cupti-python (13.3 has the ``pm_sampling`` layer) with cuda-bindings, cuda-pathfinder, pyelftools
and numpy, carried as wheels; libcupti comes from the carried nvidia-cuda-cupti wheel (13.3), or from
the CUDA toolkit when that wheel is left out of the install (should 13.3 not run on the driver).
``--dry-run`` checks this script and the child's code on a machine without a GPU. Prints a markdown
table per sampling interval; ``--out`` keeps the samples and the child's bursts as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BURSTS = ("sleep", "forward", "sleep+forward", "events")
SLEEP_CYCLES = 200_000  # the harness's GPU sleep (evaluator/common/wire.py, GPU_SLEEP_CYCLES)
# Metrics tried in order until the device takes one pair: active cycles, and elapsed cycles for the
# clock of each sample. Names as Nsight Compute spells them; which PM sampling takes is found here.
METRIC_PAIRS = (
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max"),
    ("gr__cycles_active.avg", "gr__cycles_elapsed.max"),
    ("sm__cycles_active.max", "sm__cycles_elapsed.max"),
    ("sm__cycles_active.avg", "sm__cycles_elapsed.avg"),
)

# The stand-in runner: prints "ready" once torch and its CUDA context are up, waits for a line on
# stdin, runs the bursts, prints one JSON line of (kind, event ms) in order.
CHILD = r"""
import json, sys, time, torch
kinds, repeats, sleep_cycles = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
x = torch.randn(1 << 18, device="cuda"); y = torch.randn(1 << 18, device="cuda")
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def burst(kind):
    if "sleep" in kind:
        torch.cuda._sleep(sleep_cycles)
    start.record()
    if "forward" in kind:
        torch.relu(x + y)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)
for kind in kinds:  # warm: the first launches load modules
    burst(kind)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
done = []
for _ in range(repeats):
    for kind in kinds:
        time.sleep(0.002)  # an idle gap: the samples' spans are cut here
        done.append([kind, burst(kind)])
print(json.dumps(done), flush=True)
"""


def run_child(repeats: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", CHILD, json.dumps(list(BURSTS)), str(repeats), str(SLEEP_CYCLES)]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "ready":
        child.kill()
        raise RuntimeError(f"the child did not start: {line!r}")
    return child


MIN_SPAN_NS = 500.0  # a span with less activity is noise (or an empty pair of events), not a burst


def spans(samples: list[dict[str, float]], threshold: float) -> list[dict[str, float]]:
    """Busy spans: maximal runs of samples with active cycles above ``threshold``; each with its
    active time (active cycles at that sample's clock) and its first and last sample's times; spans
    of less than ``MIN_SPAN_NS`` of activity left out."""
    found: list[dict[str, float]] = []
    current: dict[str, float] | None = None
    for s in samples:
        busy = s["active"] > threshold
        if busy and current is None:
            current = {"start_ns": s["start_ns"], "end_ns": s["end_ns"], "active_ns": 0.0, "samples": 0}
            found.append(current)
        if busy and current is not None:
            clock_per_ns = s["elapsed"] / max(s["end_ns"] - s["start_ns"], 1)
            current["active_ns"] += s["active"] / max(clock_per_ns, 1e-9)
            current["end_ns"] = s["end_ns"]
            current["samples"] += 1
        if not busy:
            current = None
    return [span for span in found if span["active_ns"] >= MIN_SPAN_NS]


def matched(bursts: list[list[Any]], busy: list[dict[str, float]]) -> list[tuple[str, float, float]]:
    """(kind, event us, active us) per burst, when the spans line up with the bursts one to one, or
    with the bursts that do GPU work (an empty pair of events may leave no span); else nothing."""
    working = [b for b in bursts if b[0] != "events"]
    for candidates in (bursts, working):
        if len(candidates) == len(busy):
            lined_up = zip(candidates, busy, strict=True)
            return [(kind, ms * 1e3, span["active_ns"] / 1e3) for (kind, ms), span in lined_up]
    return []


def collect(interval_ns: int, repeats: int, pair: tuple[str, str] | None) -> dict[str, Any]:
    from cupti import pm_sampling  # noqa: PLC0415 - carried only to the device

    collector = pm_sampling.Collector(device_index=0)
    collector.enable()
    try:
        chosen, errors = None, []
        for metrics in [pair] if pair else METRIC_PAIRS:
            try:
                collector.configure(metrics=list(metrics), sampling_interval=interval_ns)
                chosen = metrics
                break
            except Exception as exc:  # noqa: BLE001 - the next pair
                errors.append(f"{metrics}: {type(exc).__name__}: {str(exc)[:200]}")
        if chosen is None:
            return {"interval_ns": interval_ns, "error": "no metric pair taken", "tried": errors}
        child = run_child(repeats)
        collector.start()
        t0 = time.perf_counter()
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        bursts = json.loads(child.stdout.readline())
        child.wait(timeout=60)
        wall = time.perf_counter() - t0
        collector.stop()
        t1 = time.perf_counter()
        data = collector.decode(max_samples=int(wall * 1e9 / interval_ns * 1.5) + 1000)
        samples = [
            {"start_ns": s.start_timestamp, "end_ns": s.end_timestamp, "active": s.metric_values[0],
             "elapsed": s.metric_values[1]}
            for s in data
        ]  # fmt: skip
        decode_s = time.perf_counter() - t1
    finally:
        collector.disable()
    return {"interval_ns": interval_ns, "metrics": list(chosen), "tried": errors, "bursts": bursts,
            "samples": samples, "decode_s": decode_s, "completed": len(samples)}  # fmt: skip


def table(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"interval {result['interval_ns']} ns: {result['error']}; tried: {result['tried']}"
    busy = spans(result["samples"], threshold=0.0)
    bursts = result["bursts"]
    lines = [
        f"interval {result['interval_ns']} ns, metrics {result['metrics']}: {result['completed']} samples, "
        f"decoded in {result['decode_s']:.1f} s; {len(busy)} busy spans for {len(bursts)} bursts",
    ]
    pairs_found = matched(bursts, busy)
    if not pairs_found:
        lines.append("the spans do not line up with the bursts: read the JSON")
        return "\n".join(lines)
    per: dict[str, list[tuple[float, float]]] = {k: [] for k in BURSTS}
    for kind, event_us, active_us in pairs_found:
        per[kind].append((event_us, active_us))
    lines.append(
        "| burst | n | child's events, us (median) | active, us (median) "
        "| active - events, us (min / median / max) |"
    )
    lines.append("|---|---|---|---|---|")
    for kind, pairs in per.items():
        if not pairs:
            continue
        gaps = [a - e for e, a in pairs]
        lines.append(
            f"| {kind} | {len(pairs)} | {statistics.median(e for e, _ in pairs):.2f} | "
            f"{statistics.median(a for _, a in pairs):.2f} | "
            f"{min(gaps):.2f} / {statistics.median(gaps):.2f} / {max(gaps):.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="20000,5000,1000", help="sampling intervals, ns")
    parser.add_argument("--repeats", type=int, default=20, help="bursts of each kind")
    parser.add_argument("--metrics", help="one 'active,elapsed' pair instead of trying METRIC_PAIRS")
    parser.add_argument("--out", help="folder for the JSON of each interval")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: check the script and the child")
    args = parser.parse_args()
    if args.dry_run:
        compile(CHILD, "<child>", "exec")
        fake = [{"start_ns": i * 1000, "end_ns": (i + 1) * 1000, "active": a, "elapsed": 1980.0}
                for i, a in enumerate([0, 1980, 990, 0, 0, 1980, 0])]  # fmt: skip
        found = spans(fake, 0.0)
        assert [round(s["active_ns"]) for s in found] == [1500, 1000], found
        pairs = matched([["sleep", 0.0015], ["events", 0.0], ["forward", 0.001]], found)
        assert [(k, round(a)) for k, _, a in pairs] == [("sleep", 2), ("forward", 1)], pairs
        print("dry run: the child compiles; a made-up trace's two spans (1.5 and 1.0 us) match its bursts")
        return 0
    import torch  # noqa: PLC0415

    torch.zeros(1, device="cuda")  # this process's own context, as the worker has one
    import cupti  # noqa: PLC0415

    print(f"cupti-python {getattr(cupti, '__version__', '?')}; torch {torch.__version__}; "
          f"{torch.cuda.get_device_name(0)}", flush=True)  # fmt: skip
    pair = tuple(args.metrics.split(",")) if args.metrics else None
    status = 0
    for interval in (int(x) for x in args.intervals.split(",")):
        try:
            result = collect(interval, args.repeats, pair)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
            result = {"interval_ns": interval, "error": f"{type(exc).__name__}: {exc}", "tried": []}
            status = 1
        print(table(result), flush=True)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            Path(args.out, f"pm_sampling_{interval}ns.json").write_text(json.dumps(result))
    return status


if __name__ == "__main__":
    sys.exit(main())

"""How long the trusted worker's comparison of one call's outputs takes, at the sizes that matter.

    python3 tools/bench_compare.py                          # on the GPU when there is one
    git show REV:stark_mcp/evaluator/trusted/compare.py > /tmp/old_compare.py
    python3 tools/bench_compare.py --against /tmp/old_compare.py    # side by side with that version

For each size, a softmax output (the reference in its own precision, in float64, and a candidate's
answer computed a second way) is compared with ``compare.check_trial`` as the worker does it, a few
times; the table gives the median seconds, the bytes of output per second, and with ``--against`` the
same for another file's ``check_trial`` (e.g. the version before a change, taken from git) with the
ratio measured in this one run. Both must reach the same statistics: the script exits 1 otherwise.

KernelBench L1 23 (4096 x 393216 fp32, 6.4 GB an output) is the largest size; an evaluation compares
it once per checked call.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stark_mcp.evaluator.trusted import compare  # noqa: E402

SIZES = {"L1 23 softmax, 6.4 GB": (4096, 393216), "256 MB": (4096, 16384), "4 MB": (1024, 1024)}


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare_against", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def case(rows: int, cols: int, device: str) -> tuple[dict, dict, dict]:
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(rows, cols, device=device, generator=g)
    native = torch.softmax(x, dim=1)
    ref64 = torch.softmax(x.double(), dim=1)
    answer = torch.exp(x - x.amax(dim=1, keepdim=True))  # the same function, computed another way
    answer /= answer.sum(dim=1, keepdim=True)
    del x
    where = str(native.device)
    cand = {"k": "tensor", "shape": [rows, cols], "dtype": "float32", "device": where, "t": answer}
    return cand, compare.encode_reference(native), compare.encode_reference(ref64)


def timed(module: ModuleType, cand: dict, native: dict, ref64: dict, device: str, repeat: int):
    seconds, check = [], None
    for _ in range(repeat):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        check = module.check_trial(cand, native, ref64, module.Contract())
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), check


def same(a, b) -> bool:
    fields = ("rel_norm_error", "tolerance", "max_abs_error", "max_rel_error")
    close = all(abs(getattr(a, f) - getattr(b, f)) <= 1e-9 * max(abs(getattr(b, f)), 1e-30) for f in fields)
    return close and (a.status, a.allclose_1e2, a.allclose_1e4) == (b.status, b.allclose_1e2, b.allclose_1e4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--against", help="another compare.py to time side by side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", nargs="*", default=None, help=f"any of {list(SIZES)}")
    args = parser.parse_args(argv)
    other = load(args.against) if args.against else None
    names = args.sizes or (list(SIZES) if args.device.startswith("cuda") else list(SIZES)[1:])
    card = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"device {args.device} ({card}), torch {torch.__version__}, median of {args.repeat}")
    head = "| output | this | GB/s |" + (" against | GB/s | this / against |" if other else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    agree = True
    for name in names:
        rows, cols = SIZES[name]
        cand, native, ref64 = case(rows, cols, args.device)
        gb = rows * cols * 4 / 1e9
        ours, check = timed(compare, cand, native, ref64, args.device, args.repeat)
        row = f"| {name} | {ours:.3f} s | {gb / ours:.1f} |"
        if other is not None:
            theirs, their_check = timed(other, cand, native, ref64, args.device, args.repeat)
            agree = agree and same(check, their_check)
            row += f" {theirs:.3f} s | {gb / theirs:.1f} | {ours / theirs:.2f}x |"
        print(row, flush=True)
        del cand, native, ref64
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    if other is not None:
        print("statistics agree" if agree else "STATISTICS DIFFER between the two versions")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())

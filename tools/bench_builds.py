#!/usr/bin/env python3
"""Cold builds of two CUDA candidates: a plain ``load_inline`` against the evaluator's buildkit.

Candidates (written for this benchmark):
  (a) ``torch_header``: torch headers in the ``.cu`` and a ``functions=`` binding, the way models
      usually write extensions (a dtype-dispatched tanh-GELU with a bias);
  (b) ``fast_layout``: the layout ``prompts/device_cuda.md`` recommends (CUDA-only ``.cu`` with an
      ``extern "C"`` launcher, the torch wrapper and binding in ``cpp_sources``).

Every measurement is a fresh process timing the ``load_inline`` call itself (torch already
imported), with ``TORCH_CUDA_ARCH_LIST`` set to the GPU's capability for both sides:
  plain        torch's ``load_inline``, fresh build directory;
  first        buildkit with an empty toolchain directory: makes the precompiled header and the
               light-include profile once per torch version and flags, then builds;
  ours         buildkit, fresh build cache, toolchain directory already made (a candidate's cold build);
  hit          buildkit again on the same cache (a resubmitted candidate).
Both builds of a candidate run the same input; their outputs must be bitwise equal. Then, through
the evaluator's own build path (a builder jail importing a candidate module, the request sent to
the parent, a compile jail, the signed extension cache; ``Evaluator.builds.build``):
  pipeline_first  another extension name, the first build on a fresh machine: include profiles made
                  first (trusted, seconds), the precompiled header in the background, not waited for;
  pipeline        a cold build with the toolchain directory primed (the figure the targets judge);
  pipeline_hit    the same request from another candidate source (builder runs, compile does not).

Targets (issue #13), on the pipeline: pipeline/plain <= 0.5 for (a); pipeline <= 15 s for (b).
Run from the repository root:

    python3 tools/bench_builds.py --json bench_builds.json
    python3 tools/bench_builds.py --dry-run      # no GPU: requests, keys and nvcc step plans only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVALUATOR_DIR = ROOT / "stark_mcp" / "evaluator"
RATIO_TARGET = 0.5
FAST_LAYOUT_TARGET_S = 15.0

TORCH_HEADER_CU = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#define CHECK_INPUT(x) TORCH_CHECK((x).is_cuda() && (x).is_contiguous(), #x " must be contiguous CUDA")

template <typename scalar_t>
__global__ void bias_gelu_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ bias,
                                 scalar_t* __restrict__ y, int64_t n, int64_t features) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = static_cast<float>(x[i]) + static_cast<float>(bias[i % features]);
        const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = static_cast<scalar_t>(0.5f * v * (1.0f + tanhf(inner)));
    }
}

torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
    CHECK_INPUT(x);
    CHECK_INPUT(bias);
    TORCH_CHECK(x.size(-1) == bias.numel(), "bias must match the last dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu", [&] {
        bias_gelu_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, bias.numel());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

FAST_LAYOUT_CU = r"""
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void softplus_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float scale,
                                      int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = scale * (v > 20.0f ? v : log1pf(expf(v)));
    }
}

extern "C" int softplus_scale_launch(const float* x, float* y, float scale, int64_t n, cudaStream_t stream) {
    if (n == 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    softplus_scale_kernel<<<(unsigned int)blocks, 256, 0, stream>>>(x, y, scale, n);
    return (int)cudaGetLastError();
}
"""

FAST_LAYOUT_CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

extern "C" int softplus_scale_launch(const float* x, float* y, float scale, int64_t n, cudaStream_t stream);

torch::Tensor softplus_scale(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int err = softplus_scale_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (float)scale, xc.numel(),
                                          at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == 0, "launch failed: ", cudaGetErrorString((cudaError_t)err));
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softplus_scale", &softplus_scale, "scale * softplus(x)");
}
"""

CANDIDATES: dict[str, dict[str, Any]] = {
    "torch_header": {
        "spec": {
            "name": "bench_bias_gelu",
            "cpp_sources": "torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias);",
            "cuda_sources": TORCH_HEADER_CU,
            "functions": ["bias_gelu"],
            "extra_cuda_cflags": ["-O3"],
        },
        "call": "m.bias_gelu(torch.randn(64, 4096, device='cuda', generator=g), "
        "torch.randn(4096, device='cuda', generator=g))",
    },
    "fast_layout": {
        "spec": {
            "name": "bench_softplus",
            "cpp_sources": FAST_LAYOUT_CPP,
            "cuda_sources": FAST_LAYOUT_CU,
            "no_implicit_headers": True,
            "extra_cuda_cflags": ["-O3"],
        },
        "call": "m.softplus_scale(torch.randn(64, 4096, device='cuda', generator=g), 0.75)",
    },
}

CHILD = r"""
import json, os, sys, time
spec_path, mode, out_path = sys.argv[1:4]
with open(spec_path) as fh:
    job = json.load(fh)
t0 = time.perf_counter()
import torch
from torch.utils.cpp_extension import load_inline
import_s = time.perf_counter() - t0
result = {"mode": mode, "import_torch_s": import_s}
resolver = None
if mode != "plain":
    sys.path.insert(0, job["evaluator_dir"])
    import buildkit
    resolver = buildkit.local_resolver(job["cache_dir"], pch_dir=job["pch_dir"])
    buildkit.install(resolver)
    from torch.utils.cpp_extension import load_inline
kwargs = dict(job["spec"])
if mode == "plain":
    # load_inline writes its sources before it makes the directory
    os.makedirs(job["build_dir"], exist_ok=True)
    kwargs["build_directory"] = job["build_dir"]
t1 = time.perf_counter()
m = load_inline(**kwargs)
result["load_inline_s"] = time.perf_counter() - t1
if resolver is not None:
    report = resolver.last_report
    result.update(builds=resolver.builds, hits=resolver.hits,
                  steps=[s.__dict__ for s in report.steps] if report else [],
                  fallbacks=report.fallbacks if report else [],
                  pch_built_s=report.pch_built_seconds if report else 0)
if job.get("call") and torch.cuda.is_available():
    g = torch.Generator(device="cuda").manual_seed(1234)
    out = eval(job["call"])
    torch.cuda.synchronize()
    torch.save(out.cpu(), out_path)
print("RESULT " + json.dumps(result))
"""


def run_child(job: dict[str, Any], mode: str, work: Path, timeout: float) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    spec_path = work / "job.json"
    spec_path.write_text(json.dumps(job))
    script = work / "child.py"
    script.write_text(CHILD)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), str(spec_path), mode, str(work / "out.pt")],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"mode": mode, "ok": False, "process_s": wall, "error": (done.stderr or done.stdout)[-3000:]}
    result = json.loads(lines[-1][len("RESULT ") :])
    result.update(ok=True, process_s=wall, out=str(work / "out.pt"))
    return result


def same_output(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    import torch

    if not (a.get("ok") and b.get("ok")) or not Path(a["out"]).exists() or not Path(b["out"]).exists():
        return None
    return bool(torch.equal(torch.load(a["out"]), torch.load(b["out"])))


def arch_list() -> str:
    import torch

    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    major, minor = torch.cuda.get_device_capability(0)
    return f"{major}.{minor}"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def candidate_module(spec: dict[str, Any], name_suffix: str, tag: str) -> str:
    """A candidate module whose import makes this ``load_inline`` call (``tag``: a distinct source)."""
    spec = dict(spec, name=spec["name"] + name_suffix)
    return (
        f"# {tag}\nimport torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f"SPEC = {spec!r}\next = load_inline(**SPEC)\n\n\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    )


async def pipeline_builds(root: Path, timeout: float) -> dict[str, dict[str, Any]]:
    """Each candidate through the evaluator's build path: the builder jail sends the request, the
    parent primes the toolchain directory (trusted) and compiles in a compile jail, cached by key.

    ``pipeline_first`` (another extension name, so another key) is the first build on a fresh
    machine: it starts the shared precompiled header in the background and does not wait for it;
    ``settle`` waits for that header; ``pipeline`` is then a cold build with it; ``pipeline_hit``
    resubmits it from another source."""
    sys.path.insert(0, str(ROOT))
    from stark_mcp.evaluator import Evaluator
    from stark_mcp.problems import source_hash

    out: dict[str, dict[str, Any]] = {}
    async with Evaluator(root / "pipeline-cache") as ev:
        info = await ev.device_info("cuda")
        isolation = await ev.isolation()
        for label, cand in CANDIDATES.items():
            rows: dict[str, Any] = {}
            for mode, suffix in (("pipeline_first", "_prime"), ("pipeline", ""), ("pipeline_hit", "")):
                source = candidate_module(cand["spec"], suffix, f"{label} {mode}")
                t0 = time.perf_counter()
                outcome = await ev.builds.build(source, source_hash(source), info, timeout, isolation)
                rows[mode] = {
                    "ok": outcome.ok,
                    "build_s": time.perf_counter() - t0,
                    "message": outcome.message,
                    "extensions": outcome.extensions,
                    "isolation": isolation.level,
                }
                print(
                    f"[{label}] {mode}: {rows[mode]['build_s']:.1f} s ok={outcome.ok} "
                    f"{outcome.message[:300]} {outcome.extensions}",
                    flush=True,
                )
                if mode == "pipeline_first":
                    t0 = time.perf_counter()
                    await ev.settle()
                    rows["settle_s"] = time.perf_counter() - t0
                    print(f"[{label}] background header ready {rows['settle_s']:.1f} s later", flush=True)
            out[label] = rows
    return out


def bench(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_builds_"))
    pch_dir = root / "toolchain"
    shutil.rmtree(pch_dir, ignore_errors=True)
    results: dict[str, Any] = {"arch_list": os.environ["TORCH_CUDA_ARCH_LIST"], "candidates": {}}
    for label, cand in CANDIDATES.items():
        rows: dict[str, Any] = {}
        for mode in ("plain", "first", "ours", "hit"):
            if mode == "first" and pch_dir.exists():
                continue  # the toolchain directory is made once, by the first candidate
            cache = root / label / ("cache-first" if mode == "first" else "cache")
            job = {
                "spec": cand["spec"],
                "call": cand["call"],
                "evaluator_dir": str(EVALUATOR_DIR),
                "cache_dir": str(cache),
                "pch_dir": str(pch_dir),
                "build_dir": str(root / label / "plain-build"),
            }
            print(f"[{label}] {mode} ...", flush=True)
            rows[mode] = run_child(job, mode, root / label / f"run-{mode}", args.timeout)
            r = rows[mode]
            print(
                f"[{label}] {mode}: load_inline {fmt(r.get('load_inline_s'))} s, ok={r['ok']}"
                + ("" if r["ok"] else f"\n{r.get('error', '')}"),
                flush=True,
            )
        rows["equal_outputs"] = same_output(rows["plain"], rows["ours"])
        results["candidates"][label] = rows
    import asyncio

    for label, rows in asyncio.run(pipeline_builds(root, args.timeout)).items():
        results["candidates"][label].update(rows)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        f"TORCH_CUDA_ARCH_LIST={results['arch_list']}",
        "",
        (
            "| candidate | plain cold s | pipeline cold s | ratio | target | result | pipeline hit s "
            "| pipeline first build s (ratio; header ready s later) | buildkit alone: cold s, hit s, first s "
            "| outputs equal | ours: steps |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, rows in results["candidates"].items():
        plain, ours, hit = rows["plain"], rows["ours"], rows["hit"]
        pipe = rows.get("pipeline", {})
        p, o = plain.get("load_inline_s"), pipe.get("build_s") if pipe.get("ok") else None
        ratio = o / p if p and o else None
        if label == "torch_header":
            target, ok = f"ratio <= {RATIO_TARGET}", ratio is not None and ratio <= RATIO_TARGET
        else:
            target, ok = f"ours <= {FAST_LAYOUT_TARGET_S:g} s", o is not None and o <= FAST_LAYOUT_TARGET_S
        ok = ok and rows["equal_outputs"] is not False and plain["ok"] and ours["ok"]
        first = rows.get("first", {}).get("load_inline_s")
        alone = f"{fmt(ours.get('load_inline_s'))}, {fmt(hit.get('load_inline_s'))}, {fmt(first)}"
        pipe_hit = rows.get("pipeline_hit", {}).get("build_s")
        first_s = rows.get("pipeline_first", {}).get("build_s")
        pipe_first = fmt(first_s)
        if first_s and p:
            pipe_first += f" ({first_s / p:.2f}x; {fmt(rows.get('settle_s'))})"
        steps = ", ".join(f"{s['target']}:{s['variant']} {s['seconds']:.1f}s" for s in ours.get("steps", []))
        if ours.get("fallbacks"):
            steps += " [" + "; ".join(ours["fallbacks"]) + "]"
        lines.append(
            f"| {label} | {fmt(p)} | {fmt(o)} | {'-' if ratio is None else f'{ratio:.2f}'} | {target} | "
            f"{'PASS' if ok else 'FAIL'} | {fmt(pipe_hit)} | {pipe_first} | {alone} | "
            f"{rows['equal_outputs']} | {steps} |"
        )
    return "\n".join(lines)


def dry_run() -> int:
    """No GPU: build the requests, their keys and nvcc's step plans; compile nothing."""
    sys.path.insert(0, str(EVALUATOR_DIR))
    import buildkit
    from buildkit import nvccplan, torchplan

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    toolchain = buildkit.Toolchain.detect()
    print(
        f"torch {toolchain.torch} (CUDA {toolchain.torch_cuda}), "
        f"nvcc: {toolchain.nvcc_version or 'not found'}"
    )
    print("| candidate | key | layout | nvcc plan (host / device steps) |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, cand in CANDIDATES.items():
            request = buildkit.ExtensionRequest.from_load_inline(**cand["spec"])
            key = buildkit.request_key(request, toolchain)
            plan = "nvcc not found"
            if toolchain.nvcc:
                rendered = torchplan.render(request, os.path.join(tmp, label))
                cu = next(s for s in rendered.sources if s.endswith(".cu"))
                argv = [
                    toolchain.nvcc,
                    "-std=c++17",
                    "-gencode=arch=compute_90,code=sm_90",
                    "-c",
                    cu,
                    "-o",
                    cu + ".o",
                ]
                try:
                    p = nvccplan.parse_dry_run(nvccplan.dry_run(argv, os.path.join(tmp, label, "kd"), tmp))
                    plan = f"{len(p.host)} / {len(p.device)}, then the host compile"
                except nvccplan.PlanUnavailable as exc:
                    plan = f"unavailable: {exc}"
            print(f"| {label} | {key} | {buildkit.layout(request)} | {plan} |")
    print("dry run ok")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="no GPU: requests, keys and nvcc plans only")
    parser.add_argument("--json", help="write all measurements to this file")
    parser.add_argument("--keep", help="work in this directory and keep it (default: a temp dir, removed)")
    parser.add_argument("--timeout", type=float, default=400.0, help="seconds for one measurement")
    args = parser.parse_args()
    if args.dry_run:
        return dry_run()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: use --dry-run", file=sys.stderr)
        return 2
    results = bench(args)
    text = table(results)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "table": text}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

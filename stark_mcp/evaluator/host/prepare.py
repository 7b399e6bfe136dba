"""Made ahead of any agent's attempt: the shared files a machine's first extension build would make.

A torch-header build on a fresh machine (or toolchain directory) first makes the shared precompiled
header and include profiles (``extension_builds.ExtensionCache.prime``): 68.7 s of an 84.5 s first
``eval`` on an H200, all of it inside an agent's first attempt. ``Evaluator.prepare`` primes the
toolchain directory for ``load_inline`` calls of our own, written the way models write theirs
(torch headers in the ``.cu``, ``functions=`` bindings, with and without ``-O3``), as a first build
with those flags would, and waits for what it starts in the background. What it makes is keyed by
flags and toolchain, so a candidate with other flags still makes its own; the common ones find
theirs made.

Trusted: the requests are ours; priming compiles torch's headers, never a candidate's source.
"""

from __future__ import annotations

from stark_mcp.evaluator.buildkit.request import ExtensionRequest

_CUDA = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void stark_warm_scale_kernel(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

torch::Tensor stark_warm_scale(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.numel();
    if (n == 0) return y;
    stark_warm_scale_kernel<<<(int)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''

_CPP = r'''
#include <torch/extension.h>

torch::Tensor stark_warm_scale(torch::Tensor x) { return x * 2; }
'''

# (label, host flags, CUDA flags): the combinations candidates use most
FLAG_SETS: tuple[tuple[str, list[str], list[str]], ...] = (
    ("no flags", [], []),
    ("-O3", ["-O3"], ["-O3"]),
)


def warmup_requests(kind: str) -> list[tuple[str, ExtensionRequest]]:
    """``(label, request)``: the ``load_inline`` calls whose shared files are made ahead, for a device
    kind (``cuda``: torch headers in the ``.cu``; ``cpu``: a C++ source)."""
    out = []
    for label, cflags, cuda_flags in FLAG_SETS:
        if kind == "cuda":
            request = ExtensionRequest(
                name="stark_warm_scale", cpp_sources=("torch::Tensor stark_warm_scale(torch::Tensor x);",),
                cuda_sources=(_CUDA,), functions=(("stark_warm_scale", "stark_warm_scale"),),
                extra_cflags=tuple(cflags), extra_cuda_cflags=tuple(cuda_flags),
            )
        else:
            request = ExtensionRequest(
                name="stark_warm_scale", cpp_sources=(_CPP,),
                functions=(("stark_warm_scale", "stark_warm_scale"),), extra_cflags=tuple(cflags),
            )
        out.append((f"{kind}, {label}", request))
    return out

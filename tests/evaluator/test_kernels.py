import pytest

from stark_mcp.evaluator.host.own_kernels import (
    base_name,
    cuda_kernel_names,
    is_own_kernel,
    own_kernel_names,
    own_kernel_share,
)

SOURCE = '''
cuda_src = r"""
__global__ void relu_add_kernel(const float* a, float* y, int n) {}
__global__ __launch_bounds__(256) void tiled_mm(const float* a) {}
"""
import triton
@triton.jit
def fused_softmax(x_ptr):
    pass
'''


def test_kernel_names_are_parsed_from_cuda_and_triton() -> None:
    assert own_kernel_names(SOURCE) == {"relu_add_kernel", "tiled_mm", "fused_softmax"}


@pytest.mark.parametrize("profiled,expected", [
    ("relu_add_kernel(float const*, float*, int)", "relu_add_kernel"),
    ("void ns::tiled_mm<float, 64>(float const*)", "tiled_mm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
     "vectorized_elementwise_kernel"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD"),
])
def test_base_name(profiled: str, expected: str) -> None:
    assert base_name(profiled) == expected


def test_share_counts_only_own_kernels() -> None:
    kernels = [("relu_add_kernel(float const*, float*, int)", 30.0),
               ("void at::native::elementwise_kernel<128>(int)", 10.0),
               ("sm90_xmma_gemm_f32f32", 60.0)]
    assert own_kernel_share(kernels, SOURCE) == pytest.approx(0.3)
    assert own_kernel_share([], SOURCE) is None
    assert own_kernel_share(kernels, "no kernels here") == 0.0


ALIASED = '''
import triton as tt
from triton import jit as triton_jit
import triton.language as tl

@tt.autotune(configs=[], key=["n"])
@tt.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr):
    pass

@triton_jit(do_not_specialize=["n"])
def plain(x_ptr, n):
    pass

def helper(x):  # not a kernel
    return x
'''


def test_triton_kernels_are_found_under_any_import_name() -> None:
    assert own_kernel_names(ALIASED) == {"tuned", "plain"}


def test_triton_kernels_count_as_own_and_library_kernels_never_do() -> None:
    source = SOURCE + "\n@triton.jit\ndef vectorized_elementwise_kernel(x):\n    pass\n"
    profile = [
        ("fused_softmax", 30.0),  # Triton 3: the function's name
        ("relu_add_kernel(float const*, float*, int)", 30.0),
        ("fused_softmax_0d1d2de", 10.0),  # Triton 2 appended the specialization
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)", 20.0),
        ("triton_poi_fused_add_relu_0", 10.0),  # torch.compile's Inductor kernel
    ]
    assert own_kernel_share(profile, source) == pytest.approx(0.7)


def test_candidate_languages() -> None:
    from stark_mcp.evaluator import check_candidate

    assert check_candidate(ALIASED + "\nclass ModelNew: pass\n").languages == {"triton"}
    assert check_candidate(SOURCE + "\nclass ModelNew: pass\n").languages == {"triton", "cuda"}
    cpp = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='x', cpp_sources='')\n"
    assert check_candidate(cpp + "class ModelNew: pass\n").languages == {"cpp"}
    assert check_candidate("import torch\nclass ModelNew: pass\n").languages == set()


@pytest.mark.parametrize(
    "declaration, name",
    [
        ("__global__ void __launch_bounds__(256) mse_partial(const float* p, int n)", "mse_partial"),
        ("__global__ void __launch_bounds__(NT, 1)\n    wino_main(const float* x)", "wino_main"),
        ('extern "C" __global__ void __launch_bounds__(256, 2) tril_mm (float* c)', "tril_mm"),
        ("static __global__ void scan(float* y)", "scan"),
        ("template <int N>\n__global__ __launch_bounds__(128) void tile(float* y)", "tile"),
        ("void __global__ odd_order(float* y)", "odd_order"),
        ("__global__ void __attribute__((noinline)) k2(float* y)", "k2"),
    ],
)
def test_cuda_kernel_names_whatever_stands_between_global_and_the_name(declaration: str,
                                                                       name: str) -> None:
    """Launch bounds between ``void`` and the name (the form most kernels of the kernel-quality
    rounds used) hid every kernel, so each attempt read 0% of its device time as its own."""
    assert cuda_kernel_names(declaration + " {}") == {name}
    assert is_own_kernel(f"void {name}(float const*, int)", own_kernel_names(declaration))

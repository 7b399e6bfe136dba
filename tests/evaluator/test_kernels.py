import pytest

from stark_mcp.evaluator.kernels import base_name, own_kernel_names, own_kernel_share

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

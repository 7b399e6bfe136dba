"""The reference's bytes and FLOPs, counted per aten op in the trusted worker's code: known answers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator.reference.problem_code import ProblemCode
from stark_mcp.evaluator.reference.sol_count import count_call, count_problem


class _MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


@pytest.mark.parametrize(("m", "k", "n"), [(8, 16, 4), (32, 64, 128), (1, 7, 3)])
def test_a_matmul_counts_two_flops_per_multiply_add_and_its_operands_bytes(m: int, k: int, n: int) -> None:
    counts = count_call(_MatMul(), [torch.randn(m, k), torch.randn(k, n)])
    assert counts["flops"] == {"matmul": 2.0 * m * k * n}
    assert counts["input_bytes"] == 4 * (m * k + k * n)
    assert counts["output_bytes"] == 4 * m * n
    assert counts["param_bytes"] == 0


def test_a_linear_layer_counts_its_weights_and_bias_as_parameters() -> None:
    layer = torch.nn.Linear(64, 32)
    counts = count_call(layer, [torch.randn(8, 64)])
    assert counts["flops"]["matmul"] == 2.0 * 8 * 64 * 32
    assert counts["param_bytes"] == 4 * (64 * 32 + 32)


def test_a_convolution_counts_exactly_as_tf32_work_where_torch_lets_cudnn_use_it() -> None:
    conv = torch.nn.Conv2d(3, 8, 3, bias=False)
    exact = 2.0 * (2 * 8 * 8 * 8) * 3 * 3 * 3
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):  # torch's defaults
        assert count_call(conv, [torch.randn(2, 3, 10, 10)])["flops"] == {"matmul_tf32": exact}
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        assert count_call(conv, [torch.randn(2, 3, 10, 10)])["flops"] == {"matmul": exact}


def test_a_float32_matmul_is_full_fp32_work_under_torchs_defaults() -> None:
    assert not torch.backends.cuda.matmul.allow_tf32
    counts = count_call(_MatMul(), [torch.randn(16, 32), torch.randn(32, 8)])
    assert counts["flops"] == {"matmul": 2.0 * 16 * 32 * 8}


def test_16_bit_matmuls_are_counted_apart_as_tensor_core_work() -> None:
    counts = count_call(_MatMul(), [torch.randn(16, 32).bfloat16(), torch.randn(32, 8).bfloat16()])
    assert counts["flops"] == {"matmul_lowp": 2.0 * 16 * 32 * 8}
    assert counts["dtypes"] == ["bfloat16"]


class _Pointwise(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + y).transpose(0, 1).contiguous()


def test_pointwise_ops_count_one_flop_per_output_element_and_layout_ops_none() -> None:
    x = torch.randn(100, 30)
    counts = count_call(_Pointwise(), [x, torch.randn(100, 30)])
    assert counts["flops"] == {"pointwise": 2.0 * 3000}
    assert set(counts["flops_by_op"]) == {"add", "gelu"}
    assert counts["input_bytes"] == 2 * 3000 * 4 and counts["output_bytes"] == 3000 * 4


class _Reduce(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1).sum(dim=0)


def test_reductions_count_one_flop_per_input_element() -> None:
    counts = count_call(_Reduce(), [torch.randn(50, 20)])
    assert counts["flops"] == {"reduction": 2.0 * 1000}
    assert counts["output_bytes"] == 20 * 4


PROBLEM = '''
import torch
from torch import nn

SHAPES = [{"rows": 8, "cols": 64}, {"rows": 32, "cols": 256}]


class Model(nn.Module):
    def __init__(self, cols_out):
        super().__init__()
        self.proj = nn.Linear(64, cols_out, bias=False)

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs(rows=8, cols=64):
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [16]
'''


def _loaded(path: Path) -> ProblemCode:
    """A problem as its reference jail holds it: loaded, every shape probed."""
    problem = ProblemCode(str(path), "stark_problem_k", "cpu")
    problem.load(1)
    for index in range(len(problem.kwargs)):
        problem.probe(index, (2, 3))
    return problem


def test_every_declared_shape_gets_its_own_counts_from_the_loaded_reference(tmp_path: Path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    problem = _loaded(path)
    answer = count_problem(problem, 7)
    assert answer["kind"] == "sol_counts"
    first, second = answer["shapes"]
    assert (first["label"], second["label"]) == ("rows=8,cols=64", "rows=32,cols=256")
    for entry, elements in ((first, 8 * 64), (second, 32 * 256)):
        assert entry["counted_on"] == "meta"  # nothing allocated, nothing computed
        assert entry["input_bytes"] == entry["output_bytes"] == 4 * elements
        assert entry["flops"] == {"pointwise": 2.0 * elements}
        assert entry["param_bytes"] == 4 * 64 * 16  # read once, whether forward uses it or not


class _InPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        out.copy_(x)
        return out.relu_()


def test_in_place_ops_count_like_their_functional_twins_and_copies_count_nothing() -> None:
    counts = count_call(_InPlace(), [torch.randn(10, 10)])
    assert counts["flops"] == {"pointwise": 100.0}
    assert set(counts["flops_by_op"]) == {"relu_"}


DATA_DEPENDENT = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 1e9:  # reads the data: meta tensors cannot answer
            return x
        return torch.relu(x) @ x.t()


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''


def test_a_forward_that_reads_its_data_is_counted_on_one_real_call(tmp_path: Path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(DATA_DEPENDENT)
    problem = _loaded(path)
    (entry,) = count_problem(problem, 7)["shapes"]
    assert entry["counted_on"] == "device"
    assert entry["flops"]["matmul"] == 2.0 * 16 * 32 * 16
    assert entry["flops"]["pointwise"] == 16 * 32 + 1  # relu, and the comparison's one element

"""The parent's comparison, fed by the child's own encoder so both sides of the channel are real."""

import importlib.util
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator.compare import Contract, check_trial, rel_norm, summarize
from stark_mcp.records import Status

_PROTO = Path(__file__).resolve().parents[2] / "stark_mcp" / "evaluator" / "child" / "sc_proto.py"
_spec = importlib.util.spec_from_file_location("sc_proto_under_test", _PROTO)
assert _spec is not None and _spec.loader is not None
proto = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proto)

C = Contract()


def refs(fn, *inputs):
    """(native, ref64) trees of ``fn`` applied like the reference process does."""
    native = proto.encode(fn(*inputs))
    ref64 = proto.encode(fn(*[x.double() for x in inputs]))
    return native, ref64


def check(out, native, ref64=None):
    return check_trial(proto.encode(out), native, ref64, C)


@pytest.fixture
def mm():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 256, generator=g), torch.randn(256, 64, generator=g)
    return a, b, *refs(torch.matmul, a, b)


def test_identical_fp32_computation_passes(mm) -> None:
    a, b, native, ref64 = mm
    result = check(a @ b, native, ref64)
    assert result.ok
    assert result.rel_norm_error is not None and result.rel_norm_error < result.tolerance
    assert result.allclose_1e2 and result.allclose_1e4


def test_tolerance_is_calibrated_from_the_reference_error(mm) -> None:
    a, b, native, ref64 = mm
    expected = max(8 * rel_norm(native["t"], ref64["t"]), 1e-5)
    assert check(a @ b, native, ref64).tolerance == pytest.approx(expected)


def test_bf16_downcast_fails_the_fp32_contract(mm) -> None:
    a, b, native, ref64 = mm
    result = check((a.bfloat16() @ b.bfloat16()).float(), native, ref64)
    assert (result.status, result.reason) == (Status.WRONG_OUTPUT, "tolerance")
    assert "exceeds the tolerance" in result.message


def test_zeros_on_a_small_output_fail_rel_norm_though_allclose_passes() -> None:
    x = torch.rand(8, 8192)
    native, ref64 = refs(lambda t: torch.softmax(t, -1), x)
    result = check(torch.zeros(8, 8192), native, ref64)
    assert result.reason == "tolerance" and result.rel_norm_error == pytest.approx(1.0)
    assert result.allclose_1e2 is True  # the loose KernelBench verdict is fooled; ours is not


@pytest.mark.parametrize("out,reason", [
    (torch.zeros(128, 63), "shape"),
    (torch.zeros(64, 128), "shape"),
    (torch.zeros(128, 64, dtype=torch.float64), "dtype"),
    ([torch.zeros(128, 64)], "type"),
])
def test_structural_mismatches(mm, out, reason) -> None:
    _, _, native, ref64 = mm
    result = check(out, native, ref64)
    assert (result.status, result.reason) == (Status.WRONG_OUTPUT, reason)


def test_device_mismatch(mm) -> None:
    a, b, native, ref64 = mm
    cand = proto.encode(a @ b)
    cand["device"] = "cuda:0"
    assert check_trial(cand, native, ref64, C).reason == "device"


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_value_where_reference_is_finite(mm, bad) -> None:
    a, b, native, ref64 = mm
    out = a @ b
    out[3, 5] = bad
    assert check(out, native, ref64).reason == "nonfinite"


def test_reference_nans_must_be_matched() -> None:
    x = torch.tensor([1.0, -1.0, 4.0])
    native, ref64 = refs(torch.log, x)
    assert check(torch.log(x), native, ref64).ok
    assert check(torch.tensor([0.0, 0.0, float(torch.log(torch.tensor(4.0)))]), native,
        ref64).reason == "tolerance"


def test_tensor_subclass_is_rejected(mm) -> None:
    class Lazy(torch.Tensor):
        pass

    a, b, native, ref64 = mm
    result = check((a @ b).as_subclass(Lazy), native, ref64)
    assert (result.status, result.reason) == (Status.REJECTED, "tensor_subclass")


def test_tuple_outputs_are_matched_structurally() -> None:
    x = torch.randn(16, 8)
    native, ref64 = refs(lambda t: (t.sum(0), t.amax(1)), x)
    assert check((x.sum(0), x.amax(1)), native, ref64).ok
    assert check([x.sum(0), x.amax(1)], native, ref64).ok  # list for tuple is accepted
    assert check((x.sum(0),), native, ref64).reason == "type"
    assert check((x.sum(0), x.amax(1) + 1), native, ref64).reason == "tolerance"


def test_integer_outputs_must_match_exactly() -> None:
    x = torch.randn(32, 10)
    native, ref64 = refs(lambda t: t.argmax(1), x)
    assert check(x.argmax(1), native, ref64).ok
    wrong = x.argmax(1).clone()
    wrong[0] = (wrong[0] + 1) % 10
    result = check(wrong, native, ref64)
    assert result.reason == "tolerance" and "1 of 32 elements differ" in result.message


def test_without_fp64_reference_the_fallback_tolerance_applies(mm) -> None:
    a, b, native, _ = mm
    result = check(a @ b, native, None)
    assert result.ok and result.tolerance == C.fallback and not result.used_fp64


def test_summary_over_trials(mm) -> None:
    a, b, native, ref64 = mm
    good = check(a @ b, native, ref64)
    bad = check((a.bfloat16() @ b.bfloat16()).float(), native, ref64)
    report = summarize([good, bad])
    assert (report.trials, report.trials_passed) == (2, 1)
    assert report.rel_norm_error == bad.rel_norm_error
    assert report.allclose_1e4 is False

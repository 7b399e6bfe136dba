"""The worker's comparison, fed through the real channel: the runner's describe-and-publish, then the
worker's validation of that untrusted description."""

import pytest
import torch

from stark_mcp.evaluator.trusted.compare import (
    ChannelError,
    Contract,
    check_structure,
    check_trial,
    encode_reference,
    rel_norm,
    summarize,
    validate_tree,
)
from stark_mcp.evaluator.untrusted.outputs import describe_and_publish

C = Contract()


def refs(fn, *inputs):
    """(native, ref64) trees of ``fn`` applied as the trusted worker does."""
    return encode_reference(fn(*inputs)), encode_reference(fn(*[x.double() for x in inputs]))


def leaves(tree):
    if tree["k"] == "tensor":
        return [tree]
    if tree["k"] == "seq":
        return [leaf for item in tree["items"] for leaf in leaves(item)]
    return []


def channel(out, native, inputs=()):
    """What the worker sees of ``out``: published buffers laid out like the reference's outputs."""
    buffers = [torch.empty(r["shape"], dtype=getattr(torch, r["dtype"])) for r in leaves(native)]
    tree, _flags = describe_and_publish(out, buffers, list(inputs))
    return validate_tree(tree, buffers)


def check(out, native, ref64=None):
    return check_trial(channel(out, native), native, ref64, C)


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


def one_pass_variance(x):
    return (x * x).mean(-1) - x.mean(-1) ** 2


def two_pass_variance(x):
    return ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1)


def test_a_candidate_more_accurate_than_the_reference_passes() -> None:
    """The error is measured against float64, not against the reference's own fp32 output."""
    g = torch.Generator().manual_seed(1)
    x = 1000.0 + torch.randn(64, 4096, generator=g)  # a large mean: one-pass variance cancels badly in fp32
    native, ref64 = refs(one_pass_variance, x)
    accurate = two_pass_variance(x)
    assert rel_norm(accurate, native["t"]) > 10 * rel_norm(accurate, ref64["t"])  # the outputs really differ
    result = check(accurate, native, ref64)
    assert result.ok, result.message
    assert result.rel_norm_error == pytest.approx(rel_norm(accurate, ref64["t"]))


def test_a_candidate_as_inaccurate_as_the_reference_passes_and_a_worse_one_fails() -> None:
    g = torch.Generator().manual_seed(2)
    x = 1000.0 + torch.randn(64, 4096, generator=g)
    native, ref64 = refs(one_pass_variance, x)
    assert check(one_pass_variance(x), native, ref64).ok
    # The reference's own fp32 error is ~10% here, so the contract allows ~80%: a constant is still worse.
    assert check(torch.full((64,), 0.1), native, ref64).reason == "tolerance"


def test_bf16_downcast_fails_the_fp32_contract(mm) -> None:
    a, b, native, ref64 = mm
    result = check((a.bfloat16() @ b.bfloat16()).float(), native, ref64)
    assert (result.status, result.reason) == ("wrong_output", "tolerance")
    assert "exceeds the tolerance" in result.message and "float64 reference" in result.message


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
    assert (result.status, result.reason) == ("wrong_output", reason)
    assert check_structure(channel(out, native), native).reason == reason


def test_device_mismatch(mm) -> None:
    a, b, native, ref64 = mm
    cand = channel(a @ b, native)
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


def test_tensor_subclass_is_rejected_without_touching_it(mm) -> None:
    class Lazy(torch.Tensor):
        def __torch_function__(self, *args, **kwargs):
            raise AssertionError("the harness called into the subclass")

    a, b, native, ref64 = mm
    out = torch.Tensor._make_subclass(Lazy, a @ b)
    result = check(out, native, ref64)
    assert (result.status, result.reason) == ("rejected", "tensor_subclass")


def test_lazy_tuple_is_rejected_without_iterating_it() -> None:
    x = torch.randn(16, 8)
    native, ref64 = refs(lambda t: (t.sum(0), t.amax(1)), x)

    class LazyTuple(tuple):
        def __iter__(self):
            raise AssertionError("the harness iterated the lazy tuple")

    result = check(LazyTuple((x.sum(0), x.amax(1))), native, ref64)
    assert (result.status, result.reason) == ("rejected", "output_type")


def test_tuple_outputs_are_matched_exactly() -> None:
    x = torch.randn(16, 8)
    native, ref64 = refs(lambda t: (t.sum(0), t.amax(1)), x)
    assert check((x.sum(0), x.amax(1)), native, ref64).ok
    assert check([x.sum(0), x.amax(1)], native, ref64).reason == "type"
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


def test_summary_over_calls(mm) -> None:
    a, b, native, ref64 = mm
    good = check(a @ b, native, ref64)
    bad = check((a.bfloat16() @ b.bfloat16()).float(), native, ref64)
    report = summarize([good, bad])
    assert (report["trials"], report["trials_passed"]) == (2, 1)
    assert report["rel_norm_error"] == bad.rel_norm_error
    assert report["allclose_1e4"] is False


@pytest.mark.parametrize("tree", [
    None, [], {"k": 5}, {"k": "tensor", "shape": [1], "dtype": "float32", "device": "cpu", "leaf": 7},
    {"k": "tensor", "shape": [-1], "dtype": "float32", "device": "cpu", "leaf": 0},
    {"k": "tensor", "shape": [1], "dtype": "os.system", "device": "cpu", "leaf": 0},
    {"k": "seq", "type": "dict", "items": []}, {"k": "seq", "type": "tuple", "items": 5},
    {"k": "scalar", "v": [1]}, {"k": "phase", "phase": [1]},
])
def test_malformed_descriptions_are_channel_errors(tree) -> None:
    with pytest.raises(ChannelError):
        validate_tree(tree, [torch.zeros(1)])


def test_a_description_nested_too_deep_is_a_channel_error() -> None:
    tree = {"k": "scalar", "v": 1}
    for _ in range(20):
        tree = {"k": "seq", "type": "list", "items": [tree]}
    with pytest.raises(ChannelError):
        validate_tree(tree, [])


@pytest.mark.parametrize("special", [False, True], ids=["finite", "nonfinite-reference"])
@pytest.mark.parametrize("chunk", [7, 64, 1 << 24])
def test_chunked_statistics_equal_the_whole_tensor_ones(monkeypatch, chunk, special) -> None:
    """The statistics are summed chunk by chunk on the leaf's device; they must be those of the whole
    tensor over the elements where the reference is finite, whatever the chunk's edges cut."""
    import stark_mcp.evaluator.trusted.compare as compare

    monkeypatch.setattr(compare, "CHUNK", chunk)
    g = torch.Generator().manual_seed(3)
    n = torch.randn(1000, generator=g)
    base = n.double() + 1e-7 * torch.randn(1000, generator=g, dtype=torch.float64)
    c = n + 1e-3 * torch.randn(1000, generator=g)
    if special:
        base[[6, 7, 63, 64, 500]] = torch.tensor(
            [float("inf"), float("nan"), float("-inf"), 1e30, float("nan")], dtype=torch.float64
        )
    finite = torch.isfinite(base)
    e = compare._errors(c, n, base, finite if special else None)

    cm, nm, bm = c.double()[finite], n.double()[finite], base[finite]
    den = torch.linalg.vector_norm(bm)
    assert e.err == pytest.approx(float(torch.linalg.vector_norm(cm - bm) / den), rel=1e-12)
    assert e.ref_err == pytest.approx(float(torch.linalg.vector_norm(nm - bm) / den), rel=1e-12)
    assert e.max_abs == pytest.approx(float((cm - bm).abs().max()), rel=1e-12)
    assert e.scale == float(bm.abs().max())
    assert (e.close_1e2, e.close_1e4) == (True, False)
    assert rel_norm(c, n) == pytest.approx(
        float(torch.linalg.vector_norm(c.double() - n.double()) / torch.linalg.vector_norm(n.double())),
        rel=1e-12,
    )


@pytest.mark.parametrize(
    "gap,close", [(0.5e-4, (True, True)), (0.5e-2, (True, False)), (2e-2, (False, False))]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.complex64])
def test_allclose_flags_are_those_of_torch_allclose(gap, close, dtype) -> None:
    """The KernelBench-style allclose flags, however they are computed, agree with torch.allclose on
    the raw outputs at both tolerances, for values of every magnitude."""
    import stark_mcp.evaluator.trusted.compare as compare

    g = torch.Generator().manual_seed(4)
    n = (torch.randn(4096, generator=g) * torch.logspace(-3, 3, 4096)).to(dtype)
    c = n + (gap * (1 + n.abs())).to(dtype)
    assert (torch.allclose(c, n, 1e-2, 1e-2), torch.allclose(c, n, 1e-4, 1e-4)) == close
    wide = n.to(torch.complex128 if dtype.is_complex else torch.float64)
    e = compare._errors(c, n, wide, None)
    assert (e.close_1e2, e.close_1e4) == close


@pytest.mark.parametrize(
    "t,finite",
    [
        (torch.tensor([1.0, 2.0]), True),
        (torch.tensor([1.0, float("nan")]), False),
        (torch.tensor([float("-inf"), 1.0]), False),
        (torch.tensor([3e38, -3e38]), True),
        (torch.tensor([1.0, float("nan")], dtype=torch.float16), False),
        (torch.tensor([1 + 1j, complex(float("nan"), 0)]), False),
        (torch.empty(0), True),
    ],
)
def test_all_finite_in_one_reduction(t, finite) -> None:
    import stark_mcp.evaluator.trusted.compare as compare

    assert compare._all_finite(t) is finite


def test_a_nan_error_fails_even_past_the_finite_checks(monkeypatch, mm) -> None:
    """Defence in depth: were the finiteness shortcut ever to miss a NaN, the NaN it leaves in the
    error still fails the precision contract rather than comparing as within it."""
    import stark_mcp.evaluator.trusted.compare as compare

    a, b, native, ref64 = mm
    out = a @ b
    out[0, 0] = float("nan")
    monkeypatch.setattr(compare, "_all_finite", lambda t: True)
    result = check(out, native, ref64)
    assert (result.status, result.reason) == ("wrong_output", "tolerance")

"""Input specs, constructor arguments and shapes: the compact forms and their refusals (pure)."""

from __future__ import annotations

import pytest

from stark_mcp.usercode import SpecError, TargetError
from stark_mcp.usercode.render import tensor_expression
from stark_mcp.usercode.specs import InputSpec, check_inputs_fit_shapes, input_spec, parse_call, parse_shape
from stark_mcp.usercode.target import parse_target


def test_compact_inputs_read_as_specs_and_render_as_torch() -> None:
    cases = {
        "x:float32[batch,seq,512]": ("x: float32[batch, seq, 512]", "torch.randn((batch, seq, 512))"),
        "w:float16[64]~normal(1,0.5)": (
            "w: float16[64]",
            "torch.randn((64,), dtype=torch.float16) * 0.5 + 1",
        ),
        "u:bfloat16[4,4]~uniform(-1,1)": (
            "u: bfloat16[4, 4]",
            "torch.empty((4, 4), dtype=torch.bfloat16).uniform_(-1, 1)",
        ),
        "ids:int64[batch,seq]~randint(0,32000)": (
            "ids: int64[batch, seq]",
            "torch.randint(0, 32000, (batch, seq))",
        ),
        "ids:int32[8]~randint(100)": ("ids: int32[8]", "torch.randint(0, 100, (8,), dtype=torch.int32)"),
        "mask:bool[batch]": ("mask: bool[batch]", "torch.rand((batch,)) < 0.5"),
        "mask:bool[batch]~bernoulli(0.9)": ("mask: bool[batch]", "torch.rand((batch,)) < 0.9"),
        "z:float32[]~zeros": ("z: float32[]", "torch.zeros((), dtype=torch.float32)"),
        "eps=1e-5": ("eps=1e-05", "1e-05"),
        "mode='tanh'": ("mode='tanh'", "'tanh'"),
    }
    for text, (described, expression) in cases.items():
        spec = input_spec(text)
        assert spec.describe() == described, text
        assert tensor_expression(spec) == expression, text
    assert input_spec("x:float32[batch,4]").describe({"batch": 8}) == "x: float32[8, 4]"
    as_dict = input_spec(
        {"name": "x", "shape": ["n", 3], "dtype": "float64", "dist": "uniform", "low": 2, "high": 3}
    )
    assert tensor_expression(as_dict) == "torch.empty((n, 3), dtype=torch.float64).uniform_(2, 3)"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("x", "expected NAME:DTYPE[DIMS]"),
        ("x:float33[4]", "unknown dtype 'float33'"),
        ("x:float32[4,-1]", "neither a size nor a shape key name"),
        ("x:float32[4]~gamma(1)", "unknown distribution 'gamma'"),
        ("x:float32[4]~randint(0,5)", "float32 takes normal or uniform or ones or zeros, not randint"),
        ("ids:int64[4]", "an integer tensor needs an upper bound"),
        ("ids:int64[4]~randint(5,5)", "randint needs low < high"),
        ("ids:int64[4]~randint(0.5,5)", "whole numbers"),
        ("x:float32[4]~normal(0,0)", "normal needs std > 0"),
        ("m:bool[4]~bernoulli(2)", "bernoulli needs 0 <= p <= 1"),
        ("x:float32[4]~normal(0,1,2)", "normal takes mean, std"),
        ("x:float32[4]~normal('a')", "normal takes mean, std"),
        ("self:float32[4]", "'self' is not a usable Python parameter name"),
        ("eps=foo()", "'foo()' is not a Python literal"),
        ("x:float32[torch,4]", "dimension name 'torch' is taken by the problem file"),
    ],
)
def test_bad_inputs_are_refused_with_the_reason(text: str, needle: str) -> None:
    with pytest.raises(SpecError) as caught:
        input_spec(text)
    assert needle in str(caught.value)


def test_a_plain_value_must_be_a_literal() -> None:
    with pytest.raises(SpecError, match="object is not a plain value"):
        input_spec({"name": "cfg", "value": object()})


def test_call_arguments_and_shapes() -> None:
    assert parse_call("512, 2048, dropout=0.0, act='gelu', dims=(1, 2)") == (
        [512, 2048],
        {"dropout": 0.0, "act": "gelu", "dims": (1, 2)},
    )
    assert parse_call("  ") == ([], {})
    assert parse_shape("batch=8,seq=128") == {"batch": 8, "seq": 128}
    for text, needle in [
        ("512,", None),
        ("*sizes", "*unpacking"),
        ("**cfg", "**unpacking"),
        ("nn.GELU()", "only literals"),
        ("512 2048", "do not read as a Python call"),
    ]:
        if needle is None:
            assert parse_call(text) == ([512], {})
            continue
        with pytest.raises(SpecError, match=needle.replace("*", r"\*")):
            parse_call(text)
    with pytest.raises(SpecError, match="give keyword arguments"):
        parse_shape("8, 128")


def test_inputs_must_fit_the_shapes() -> None:
    x = input_spec("x:float32[batch,seq,64]")
    check_inputs_fit_shapes([x], [{"batch": 8, "seq": 16}, {"batch": 2, "seq": 4}])
    with pytest.raises(SpecError, match="no shapes were given; add shapes such as batch=8,seq=8"):
        check_inputs_fit_shapes([x], [])
    with pytest.raises(SpecError, match=r"shape 2 \(batch=2\) gives no value for seq"):
        check_inputs_fit_shapes([x], [{"batch": 8, "seq": 16}, {"batch": 2}])
    with pytest.raises(SpecError, match="key\\(s\\) heads feed no input dimension"):
        check_inputs_fit_shapes([x], [{"batch": 8, "seq": 16, "heads": 4}])
    with pytest.raises(SpecError, match="seq must be a size"):
        check_inputs_fit_shapes([x], [{"batch": 8, "seq": "long"}])
    with pytest.raises(SpecError, match="more than 2147483647 elements"):
        check_inputs_fit_shapes([x], [{"batch": 2**20, "seq": 2**20}])
    with pytest.raises(SpecError, match="input name\\(s\\) x given more than once"):
        check_inputs_fit_shapes([x, InputSpec(name="x", value=1)], [{"batch": 8, "seq": 16}])


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("mylib.layers.ScaledMLP", "did you mean mylib.layers:ScaledMLP?"),
        ("mylib/layers.py:ScaledMLP", "not a file path"),
        ("mylib.layers:Scaled-MLP", "is not a dotted Python name"),
        ("__main__:Net", "run as __main__"),
    ],
)
def test_bad_targets(text: str, needle: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_target(text)
    assert needle in str(caught.value)
    assert parse_target(" mylib.models:Outer.Model ").local_name == "ModelTarget"

"""Fitting a request to a target and writing the problem file; the drop-in export's text (pure)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stark_mcp
from stark_mcp.orchestrator.dropin_export import dropin_source, is_dropin
from stark_mcp.orchestrator.errors import RunError
from stark_mcp.orchestrator.own_module import problem_request
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Action, Evaluation, Node, ShapeResult, Status, TimingStats
from stark_mcp.usercode import SpecError, SwapError
from stark_mcp.usercode.introspect import CapturedValue, CaptureInfo, Param, TargetInfo
from stark_mcp.usercode.plan import default_name, plan_problem
from stark_mcp.usercode.render import render_problem
from stark_mcp.usercode.target import parse_target


def params(*specs: str) -> list[Param]:
    """``x``, ``mask=`` (has a default), ``*args``, ``**kw``, ``/`` and ``*`` markers as in a def."""
    out, kind = [], "positional_or_keyword"
    for spec in specs:
        if spec == "*":
            kind = "keyword_only"
        elif spec.startswith("**"):
            out.append(Param(name=spec[2:], kind="var_keyword", has_default=False))
        elif spec.startswith("*"):
            out.append(Param(name=spec[1:], kind="var_positional", has_default=False))
            kind = "keyword_only"
        else:
            out.append(Param(name=spec.rstrip("="), kind=kind, has_default=spec.endswith("=")))
    return out


def info(
    target: str = "mylib.layers:ScaledMLP",
    kind: str = "module",
    init: list[Param] | None = None,
    forward: list[Param] | None = None,
) -> TargetInfo:
    return TargetInfo(
        target=parse_target(target),
        kind=kind,
        module_file="/p/src/mylib/layers.py",
        defined_file="/p/src/mylib/layers.py",
        defined_sha256="ab" * 32,
        init_params=init if init is not None else params("d_model", "hidden", "scale="),
        forward_params=forward if forward is not None else params("x", "mask="),
        source="class ScaledMLP(nn.Module):\n    ...\n",
        import_root="/p/src",
    )


def render(target_info: TargetInfo, **fields: object) -> str:
    request = problem_request(target=target_info.target.spec, **fields)
    source = render_problem(plan_problem(request, target_info))
    problem_from_source(source)  # what create_run will accept
    return source


def test_a_module_target_keeps_its_constructor_and_passes_keywords_only_where_needed() -> None:
    source = render(
        info(),
        init_args=[32],
        init_kwargs={"hidden": 64},
        inputs=["x:float32[n,32]", "mask:bool[n]"],
        shapes=[{"n": 4}, {"n": 16}],
    )
    assert "class Model(ScaledMLP):" in source
    assert (
        "    def __init__(self, d_model, hidden):\n        super().__init__(d_model, hidden=hidden)" in source
    )
    assert "INIT_INPUTS = [32, 64]" in source and "MODULE_DTYPE = 'float32'" in source
    assert "def forward" not in source  # x and mask fill the forward's slots in order
    assert "SHAPES = [{'n': 4}, {'n': 16}]" in source and "def get_inputs(n=4) -> list:" in source
    keyword = render(info(), init_args=[32, 64], inputs=["mask:bool[4]", "x:float32[4,32]"])
    assert "    def forward(self, mask, x):\n        return super().forward(mask=mask, x=x)" in keyword


def test_forward_and_constructor_mismatches_name_the_parameters() -> None:
    with pytest.raises(SpecError, match="ScaledMLP needs constructor argument\\(s\\) d_model, hidden"):
        render(info(), inputs=["x:float32[4]"])
    with pytest.raises(SpecError, match="ScaledMLP takes at most 3 positional constructor argument"):
        render(info(), init_args=[1, 2, 3, 4], inputs=["x:float32[4]"])
    with pytest.raises(SpecError, match="given both by position and by keyword"):
        render(info(), init_args=[1, 2], init_kwargs={"d_model": 3}, inputs=["x:float32[4]"])
    with pytest.raises(
        SpecError, match="the forward of ScaledMLP has no parameter 'bias'; its parameters are x, mask"
    ):
        render(info(), init_args=[1, 2], inputs=["mask:bool[4]", "bias:float32[4]"])
    with pytest.raises(SpecError, match="the forward of ScaledMLP needs x, which no input gives"):
        render(info(), init_args=[1, 2], inputs=["mask:bool[4]"])
    with pytest.raises(SpecError, match="it takes no constructor arguments"):
        render(info("mylib.ops:gelu", kind="function", init=[]), init_args=[1], inputs=["x:float32[4]"])
    with pytest.raises(SpecError, match="it has no parameters to convert to bfloat16"):
        render(
            info("mylib.ops:gelu", kind="function", init=[]), module_dtype="bfloat16", inputs=["x:float32[4]"]
        )
    # Unreadable signatures (*args, **kwargs) take what they are given, by position.
    loose = info(init=params("*args", "**kwargs"), forward=params("*inputs"))
    source = render(loose, init_args=[1], init_kwargs={"k": 2}, inputs=["a:float32[2]", "b:float32[2]"])
    assert "super().__init__(d_model, k=k)" not in source and "super().__init__(arg0, k=k)" in source


def test_a_function_a_nested_class_and_a_reserved_name() -> None:
    gelu = info("mylib.ops:gelu", kind="function", init=[], forward=params("x", "*", "approximate="))
    function = render(gelu, inputs=["x:float32[4]", "approximate='tanh'"])
    assert "class Model(nn.Module):" in function and "return gelu(x, approximate=approximate)" in function
    assert "MODULE_DTYPE" not in function and "INIT_INPUTS = []" in function
    nested = render(
        info("mylib.models:Outer.Model"), init_args=[1, 2], inputs=["x:float32[4]"], module_dtype="bfloat16"
    )
    assert "from mylib.models import Outer as _Outer  # noqa: E402\n\nModelTarget = _Outer.Model" in nested
    assert "class Model(ModelTarget):" in nested and "MODULE_DTYPE = 'bfloat16'" in nested
    assert default_name(parse_target("a.b:HTTPServerMLP")) == "http_server_mlp"


def node(status: Status = Status.PASSED, shapes: list[ShapeResult] | None = None) -> Node:
    stats = TimingStats(median_ms=1.0, iqr_ms=0.1, mean_ms=1.0, min_ms=0.9, max_ms=1.2, samples=10)
    evaluation = Evaluation(
        status=status,
        runtime=stats if status is Status.PASSED else None,
        speedups={"eager": 2.0},
        device="cuda",
        device_name="NVIDIA H100",
        shapes=shapes or [],
    )
    return Node(id="n4", run_id="r-abcdef", action=Action.PLAN, source=KERNEL, evaluation=evaluation)


KERNEL = (
    "import torch\nfrom torch import nn\n\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
)


def test_the_drop_in_claims_what_was_evaluated_and_refuses_failing_nodes() -> None:
    problem = problem_from_source(
        render(info(), init_args=[32, 64], inputs=["x:float32[n,32]"], shapes=[{"n": 4}, {"n": 16}])
    )
    text = dropin_source(problem, node())
    compile(text, "fast.py", "exec")
    assert (
        "# Proven by the evaluator on cuda (NVIDIA H100), parameters in float32, constructed as "
        "ScaledMLP(32, 64)," in text
    )
    assert (
        "#   n=4: x: float32[4, 32]\n# Declared by the problem but not reported by the evaluator, "
        "so not proven: n=16\n# Speedup: eager 2.00x." in text
    )
    both = dropin_source(
        problem,
        node(
            shapes=[
                ShapeResult(label="n=4", speedups={"eager": 1.0}),
                ShapeResult(label="n=16", speedups={"eager": 4.0}),
            ]
        ),
    )
    assert (
        "#   n=16: x: float32[16, 32]\n# Speedup (geometric mean over the input sets): eager 2.00x." in both
    )
    assert "'speedups_per_set': {'n=4': {'eager': 1.0}, 'n=16': {'eager': 4.0}}" in both
    with pytest.raises(RunError, match="node n4 did not pass \\(wrong_output\\)"):
        dropin_source(problem, node(Status.WRONG_OUTPUT))
    # A hand-written problem naming a target but no INIT_INPUTS is exported as a plain script.
    hand_written = problem_from_source(
        problem.source.replace("INIT_INPUTS = [32, 64]", "ARGS = [32, 64]").replace(
            "copy.deepcopy(INIT_INPUTS)", "list(ARGS)"
        )
    )
    assert is_dropin(problem) and hand_written.target and not is_dropin(hand_written)
    function = problem_from_source(
        render(info("mylib.ops:gelu", kind="function", init=[]), inputs=["x:float32[4]"])
    )
    text = dropin_source(function, node())
    assert "def from_module" not in text
    assert "# Use it:  where the code calls gelu(...), call ModelNew()(...) with the same arguments." in text


def capture(
    path: str, target: str = "mylib.layers:ScaledMLP", init: list | None = None, dtype: str = "float32"
) -> CaptureInfo:
    x = CapturedValue(tensor=True, shape=[2, 32], dtype=dtype, fresh=True)
    return CaptureInfo(
        path=path,
        sha256="cd" * 32,
        target=target,
        kind="module",
        args=[x],
        kwargs={},
        init_args=init,
        init_kwargs={} if init is not None else None,
        init_note="" if init else "the constructor arguments of ScaledMLP are unknown",
    )


def test_captures_must_agree_and_know_their_constructor_arguments() -> None:
    def plan_of(*captures: CaptureInfo, **fields: object) -> object:
        request = problem_request(captures=[c.path for c in captures], **fields)
        return plan_problem(request, info().model_copy(update={"captures": list(captures)}))

    plan = plan_of(capture("/c/a.pt", init=[32, 64]), capture("/c/b.pt", init=[32, 64]))
    assert plan.shapes == [{"capture": "a"}, {"capture": "b"}] and plan.init_values == [32, 64]
    with pytest.raises(SpecError, match="/c/b.pt captured mylib.ops:gelu, not mylib.layers:ScaledMLP"):
        plan_of(capture("/c/a.pt", init=[1, 2]), capture("/c/b.pt", "mylib.ops:gelu", init=[1, 2]))
    with pytest.raises(SpecError, match="built with different constructor arguments"):
        plan_of(capture("/c/a.pt", init=[1, 2]), capture("/c/b.pt", init=[1, 3]))
    with pytest.raises(SpecError, match="call the forward with different arguments"):
        plan_of(capture("/c/a.pt", init=[1, 2]), capture("/c/b.pt", init=[1, 2], dtype="float16"))
    with pytest.raises(SpecError, match="/c/a.pt: the constructor arguments of ScaledMLP are unknown"):
        plan_of(capture("/c/a.pt"))
    given = plan_of(capture("/c/a.pt"), init_args=[32, 64])  # given ones stand in for the capture's
    assert given.init_values == [32, 64] and given.module_dtype == "float32"


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(2, 2))


def test_swap_refuses_what_it_cannot_do() -> None:
    model = Holder()
    with pytest.raises(SwapError, match="needs the dotted path of a submodule"):
        stark_mcp.swap(model, "", nn.Linear)
    with pytest.raises(SwapError, match="torch.nn.modules.linear has no from_module"):
        stark_mcp.swap(model, "inner.0", nn.Linear)
    fake = type(torch)("fake_export")
    fake.from_module = lambda original: nn.Identity()
    with pytest.raises(SwapError, match="model has no submodule 'inner.9'"):
        stark_mcp.swap(model, "inner.9", fake)
    new = stark_mcp.swap(model, "inner.0", fake)
    assert isinstance(model.inner[0], nn.Identity) and new is model.inner[0]

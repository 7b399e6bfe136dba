"""Write a ``ProblemPlan`` as an ordinary, readable problem file (pure).

The file imports the user's code from ``STARK_IMPORT_ROOTS`` (and puts them on ``sys.path``
itself, so it also runs on its own), refuses to run once the target's file has changed, shows
the target's source in a comment for whoever writes the kernel, and defines ``Model``,
``get_init_inputs``, ``get_inputs`` and, with several input sets, ``SHAPES``.
"""

from __future__ import annotations

from typing import Any

from stark_mcp.usercode.plan import ForwardArg, ProblemPlan
from stark_mcp.usercode.specs import InputSpec

MAX_SOURCE_LINES = 200
# In every problem file's first line; an existing file is replaced only if it carries this.
MADE_BY = "made by `stark-mcp problem new`"


def render_problem(plan: ProblemPlan) -> str:
    head = [_docstring(plan), _imports(plan), _header(plan), _target_import(plan)]
    body = [_source_comment(plan), _model(plan), _init(plan), _inputs(plan)]
    return "\n\n".join(head) + "\n\n\n" + "\n\n\n".join(p.strip("\n") for p in body if p) + "\n"


def _docstring(plan: ProblemPlan) -> str:
    what = (
        f"Model is {plan.target.local_name} itself, built from INIT_INPUTS and put in eval() mode"
        if plan.kind == "module"
        else f"Model calls the function {plan.target.local_name}"
    )
    sets = (
        "\nThe evaluator calls get_inputs(**shape) for every entry of SHAPES: ModelNew must match\n"
        "Model on each of them, and its speedup is their geometric mean."
        if plan.shapes
        else "\nThe evaluator calls get_inputs() for the forward arguments."
    )
    drop_in = (
        "\nModelNew takes the same constructor arguments and keeps the target's parameter and buffer\n"
        "names and shapes, so that it loads the original's state_dict and can replace it in place."
        if plan.kind == "module"
        else ""
    )
    return (
        f'"""{plan.name}: {plan.target.spec} as a stark-mcp problem ({MADE_BY}).\n\n'
        f"{what}.{sets}{drop_in}\n" + '"""'
    )


def _imports(plan: ProblemPlan) -> str:
    modules = ["copy", "hashlib", "os", "sys"]
    if plan.captures:
        modules = ["copy", "hashlib", "io", "os", "sys"]
    lines = [f"import {m}" for m in modules]
    lines += ["from pathlib import Path", "", "import torch"]
    if plan.kind == "function":
        lines.append("from torch import nn")
    return "\n".join(lines)


def _header(plan: ProblemPlan) -> str:
    lines = [f"STARK_TARGET = {plan.target.spec!r}", f"STARK_IMPORT_ROOTS = {plan.import_roots!r}"]
    if plan.target_file and plan.target_sha256:
        lines += [
            "# The file defining the target as it was when this problem was made: results and cached",
            "# baselines are keyed by this problem's text, so a changed module needs a new problem.",
            "TARGET_FILE = (",
            f"    {plan.target_file!r},",
            f"    {plan.target_sha256!r},",
            ")",
        ]
    lines += [
        "",
        "",
        "def _unchanged(path: str, sha256: str) -> bytes:",
        "    data = Path(path).read_bytes()",
        "    if hashlib.sha256(data).hexdigest() != sha256:",
        '        raise RuntimeError(f"{path} changed since this problem was made; make it again with "',
        '                           "stark-mcp problem new")',
        "    return data",
        "",
        "",
        "sys.path[:0] = [root for root in STARK_IMPORT_ROOTS if root not in sys.path]",
        'os.environ["STARK_CAPTURE"] = "off"  # a @stark_mcp.capture left on the target writes nothing here',
    ]
    if plan.target_file and plan.target_sha256:
        lines.append("_unchanged(*TARGET_FILE)")
    return "\n".join(lines)


def _target_import(plan: ProblemPlan) -> str:
    target = plan.target
    head, _, rest = target.qualname.partition(".")
    if not rest:
        alias = "" if target.local_name == head else f" as {target.local_name}"
        return f"from {target.module} import {head}{alias}  # noqa: E402"
    return (
        f"from {target.module} import {head} as _{head}  # noqa: E402\n\n{target.local_name} = _{head}.{rest}"
    )


def _source_comment(plan: ProblemPlan) -> str:
    if not plan.target_source:
        return ""
    lines = plan.target_source.rstrip().splitlines()
    cut = len(lines) > MAX_SOURCE_LINES
    lines = lines[:MAX_SOURCE_LINES]
    where = f" in {plan.target_file}" if plan.target_file else ""
    text = [f"# {plan.target.spec} as defined{where}", "# (for reading; the import above is what runs):", "#"]
    text += [f"#     {line}".rstrip() for line in lines]
    if cut:
        text.append(f"#     ... ({MAX_SOURCE_LINES} lines shown)")
    return "\n".join(text)


def _model(plan: ProblemPlan) -> str:
    name = plan.target.local_name
    args = ", ".join(a.name for a in plan.forward)
    call = ", ".join(f"{a.name}={a.name}" if a.keyword else a.name for a in plan.forward)
    if plan.kind == "function":
        return "\n".join(
            [
                "class Model(nn.Module):",
                f'    """Calls {plan.target.spec}."""',
                "",
                f"    def forward(self, {args}):" if args else "    def forward(self):",
                f"        return {name}({call})",
            ]
        )
    params = ", ".join(["self", *plan.init_names])
    super_call = ", ".join(f"{n}={n}" if n in plan.init_keywords else n for n in plan.init_names)
    lines = [
        (
            f"MODULE_DTYPE = {plan.module_dtype or 'float32'!r}  # the parameters' dtype "
            "(`stark-mcp export` states it)"
        ),
        "",
        "",
        f"class Model({name}):",
        f'    """{plan.target.spec} in eval() mode, its parameters in MODULE_DTYPE."""',
        "",
        f"    def __init__({params}):",
        f"        super().__init__({super_call})",
        "        self.to(getattr(torch, MODULE_DTYPE))",
        "        self.eval()",
    ]
    if any(a.keyword for a in plan.forward):
        lines += ["", f"    def forward(self, {args}):", f"        return super().forward({call})"]
    return "\n".join(lines)


def _init(plan: ProblemPlan) -> str:
    return "\n".join(
        [
            f"INIT_INPUTS = {plan.init_values!r}",
            "",
            "",
            "def get_init_inputs():",
            "    return copy.deepcopy(INIT_INPUTS)",
        ]
    )


def _inputs(plan: ProblemPlan) -> str:
    lines: list[str] = []
    if plan.captures:
        lines += _captures_table(plan)
    if plan.shapes:
        lines.append(f"SHAPES = {plan.shapes!r}")
    lines.append("# What get_inputs returns for each input set (repeated by `stark-mcp export`).")
    lines.append("SIGNATURES = {")
    lines += [f"    {label!r}: {text!r}," for label, text in plan.signatures.items()]
    lines.append("}")
    lines += ["", ""]
    lines += _captured_get_inputs(plan) if plan.captures else _spec_get_inputs(plan)
    return "\n".join(lines)


def _captures_table(plan: ProblemPlan) -> list[str]:
    lines = [
        "# The captured calls (stark_mcp.capture), each with its file's sha256 when this problem was",
        "# made.",
        "CAPTURES = {",
    ]
    for ref in plan.captures:
        lines += [f"    {ref.name!r}: (", f"        {ref.path!r},", f"        {ref.sha256!r},", "    ),"]
    lines += [
        "}",
        "_CALLS: dict = {}",
        "",
        "",
        "def _captured(name: str) -> dict:",
        "    if name not in _CALLS:",
        "        data = _unchanged(*CAPTURES[name])",
        "        _CALLS[name] = torch.load(io.BytesIO(data), weights_only=True)",
        "    return _CALLS[name]",
        "",
        "",
        "def _fresh_like(t: torch.Tensor) -> torch.Tensor:",
        '    """New values with the captured tensor\'s shape, dtype, mean and standard deviation."""',
        "    sample = t.double()",
        "    return (torch.randn(t.shape, dtype=torch.float64) * sample.std() + sample.mean()).to(t.dtype)",
        "",
        "",
    ]
    return lines


def _captured_get_inputs(plan: ProblemPlan) -> list[str]:
    first = plan.captures[0].name
    lines = [
        f"def get_inputs(capture: str = {first!r}) -> list:",
        "    call = _captured(capture)",
        "    return [",
    ]
    for arg in plan.forward:
        ref = f"call[{arg.captured!r}][{arg.key!r}]"
        if arg.fresh:
            lines.append(f"        _fresh_like({ref}),  # {arg.name}: fresh values like the captured ones")
        elif arg.tensor:
            lines.append(f"        {ref}.clone(),  # {arg.name}: the captured values")
        else:
            lines.append(f"        copy.deepcopy({ref}),  # {arg.name}")
    lines.append("    ]")
    return lines


def _spec_get_inputs(plan: ProblemPlan) -> list[str]:
    defaults = plan.shapes[0] if plan.shapes else {}
    params = ", ".join(f"{k}={v!r}" for k, v in defaults.items())
    lines = [f"def get_inputs({params}) -> list:", "    return ["]
    for arg in plan.forward:
        assert arg.spec is not None
        lines.append(f"        {tensor_expression(arg.spec)},  # {_comment(arg)}")
    lines.append("    ]")
    return lines


def _comment(arg: ForwardArg) -> str:
    assert arg.spec is not None
    return arg.spec.describe() + (" (by keyword)" if arg.keyword else "")


def tensor_expression(spec: InputSpec) -> str:
    """The torch expression that draws one input (or the plain value)."""
    if spec.shape is None:
        return repr(spec.value)
    dims = ", ".join(str(d) for d in spec.shape)
    size = f"({dims},)" if len(spec.shape) == 1 else f"({dims})"
    dtype = f", dtype=torch.{spec.dtype}"
    dist = spec.effective_dist
    if dist == "normal":
        expr = f"torch.randn({size}{dtype})" if spec.dtype != "float32" else f"torch.randn({size})"
        if spec.std != 1.0:
            expr += f" * {_num(spec.std)}"
        if spec.mean != 0.0:
            expr += f" + {_num(spec.mean)}"
        return expr
    if dist == "uniform":
        low = spec.low if spec.low is not None else 0.0
        high = spec.high if spec.high is not None else 1.0
        return f"torch.empty({size}{dtype}).uniform_({_num(low)}, {_num(high)})"
    if dist == "randint":
        low = int(spec.low) if spec.low is not None else 0
        assert spec.high is not None
        suffix = "" if spec.dtype == "int64" else dtype
        return f"torch.randint({low}, {int(spec.high)}, {size}{suffix})"
    if dist == "bernoulli":
        expr = f"torch.rand({size}) < {_num(spec.p)}"
        return expr if spec.dtype == "bool" else f"({expr}).to(torch.{spec.dtype})"
    return f"torch.{dist}({size}{dtype})"


def _num(value: Any) -> str:
    return repr(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))

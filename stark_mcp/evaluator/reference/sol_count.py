"""What the reference's computation costs: bytes a correct implementation must move and FLOPs by
operator, counted per aten op while the reference jail runs the reference once per declared shape.

Runs only in the reference jail (it runs the problem's code), so: standard library and torch only.
The answer is plain JSON; the roofline math on it lives in ``stark_mcp.sol.roofline`` (pure).

Counting rules (docs/sol.md):
- matmul and convolution: exactly, by torch's own formulas (``torch.utils.flop_counter``), 2 per
  multiply-add; split by whether the operands are 16-bit (tensor-core work), float32 that torch's
  flags in this process let run as TF32 on a GPU (``matmul_tf32``: cuDNN convolutions under torch's
  defaults, matmuls only where ``cuda.matmul.allow_tf32`` is set), or neither.
- pointwise ops (``torch.Tag.pointwise``): one FLOP per output element.
- reductions and normalizations: one FLOP per input element.
- view, layout and copy ops: none (their cost is bytes, which the floor counts once, at the edges).
- anything else that produces a tensor: one FLOP per output element (a lower bound).
Changing a rule means bumping ``stark_mcp.sol.calibration.COUNTS_VERSION`` (cached counts go stale).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from stark_mcp.evaluator.common.reference_wire import ShapeCounts, SolCounts

try:  # torch's exact formulas for matmuls, convolutions and attention
    from torch.utils.flop_counter import flop_registry as _FLOP_REGISTRY
except ImportError:  # pragma: no cover - every torch we support has it
    _FLOP_REGISTRY = {}

_FREE = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "as_strided",
    "squeeze", "unsqueeze", "detach", "alias", "slice", "select", "split", "split_with_sizes",
    "chunk", "unbind", "narrow", "contiguous", "clone", "copy_", "_to_copy", "to", "empty",
    "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_zeros", "new_ones", "new_full", "lift_fresh", "_reshape_alias", "cat", "stack",
    "index_select", "gather", "flatten", "unflatten", "view_as", "expand_as", "movedim", "fill_",
    "zero_", "resize_", "set_", "pad", "constant_pad_nd", "repeat", "roll", "flip", "tril", "triu",
    "_local_scalar_dense", "item", "arange", "scalar_tensor", "diagonal", "unfold", "im2col",
}
_REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
    "norm", "linalg_vector_norm", "logsumexp", "argmax", "argmin", "cumsum", "cumprod", "all", "any",
    "_softmax", "softmax", "_log_softmax", "log_softmax", "native_layer_norm", "layer_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "batch_norm", "native_group_norm", "group_norm", "instance_norm", "_batch_norm_impl_index",
    "cudnn_batch_norm", "rms_norm", "_fused_rms_norm", "max_pool2d_with_indices", "max_pool1d",
    "max_pool2d", "max_pool3d", "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "_adaptive_avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d",
    "mse_loss", "smooth_l1_loss", "huber_loss", "nll_loss_forward", "nll_loss2d_forward",
    "binary_cross_entropy", "kl_div", "cosine_similarity", "_cdist_forward", "topk", "sort",
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _tf32_allowed(name: str, operands: list[Any]) -> bool:
    """Whether a float32 product runs as TF32 on a GPU under this process's flags, which are the
    reference's own: torch lets cuDNN convolutions use TF32 by default, matmuls only when asked.
    The reference's precision, and so the tolerance and the floor, follow from that."""
    if not any(isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in operands):
        return False
    if "conv" in name:
        return bool(torch.backends.cudnn.enabled and torch.backends.cudnn.allow_tf32)
    return bool(torch.backends.cuda.matmul.allow_tf32)


def _numel(tensors: list[Any]) -> int:
    return sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


class OpCounter(TorchDispatchMode):
    """Counts FLOPs per operator and per class while the ops run (on real, fake or meta tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_op: dict[str, float] = {}
        self.by_class: dict[str, float] = {"matmul": 0.0, "matmul_lowp": 0.0, "matmul_tf32": 0.0,
                                           "pointwise": 0.0, "reduction": 0.0, "other": 0.0}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._count(func, args, kwargs, out)
        except Exception:  # noqa: BLE001 - a formula that cannot read an op's arguments counts it as other
            self._add(func, "other", float(_numel(_tensors(out))))
        return out

    def _add(self, func: Any, klass: str, flops: float) -> None:
        if flops <= 0:
            return
        name = str(func.overloadpacket.__name__)
        self.by_op[name] = self.by_op.get(name, 0.0) + flops
        self.by_class[klass] += flops

    def _count(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        packet = func.overloadpacket
        raw = str(packet.__name__)
        name = raw if raw in _FREE or raw in _REDUCTIONS else raw.rstrip("_")  # relu_ counts as relu
        if packet in _FLOP_REGISTRY:
            flops = float(_FLOP_REGISTRY[packet](*args, out_val=out, **kwargs))
            shapes = tree_flatten((args, kwargs))[0]
            low = any(isinstance(a, torch.Tensor) and a.dtype in _LOW_PRECISION for a in shapes)
            if low:
                self._add(func, "matmul_lowp", flops)
            elif _tf32_allowed(raw, shapes):
                self._add(func, "matmul_tf32", flops)
            else:
                self._add(func, "matmul", flops)
            return
        if name in _FREE:
            return
        if name in _REDUCTIONS:
            self._add(func, "reduction", float(_numel(_tensors(args))))
            return
        outputs = _tensors(out)
        if torch.Tag.pointwise in getattr(func, "tags", ()):
            self._add(func, "pointwise", float(_numel(outputs)))
            return
        self._add(func, "other", float(_numel(outputs)))


def _param_bytes(model: Any) -> int:
    if not isinstance(model, torch.nn.Module):
        return 0
    seen: set[int] = set()
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() in seen and t.data_ptr() != 0:
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total


def _dtypes(tensors: list[torch.Tensor]) -> list[str]:
    return sorted({str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()})


def count_call(
    model: Any, inputs: list[Any], label: str = "default", state: dict[str, torch.Tensor] | None = None
) -> ShapeCounts:
    """One forward of ``model`` on ``inputs``, counted: the JSON the parent's roofline reads.
    ``state`` (parameters and buffers by name) runs the module on those instead of its own."""
    counter = OpCounter()
    with torch.no_grad(), counter:
        if state is not None:
            out = torch.func.functional_call(model, state, tuple(inputs))
        else:
            out = model(*inputs)
    in_tensors = _tensors(inputs)
    out_tensors = _tensors(out)
    params = [t for t in (list(model.parameters()) + list(model.buffers()))] if isinstance(
        model, torch.nn.Module) else []
    return {
        "label": label,
        "input_bytes": sum(t.numel() * t.element_size() for t in in_tensors),
        "param_bytes": _param_bytes(model),
        "output_bytes": sum(t.numel() * t.element_size() for t in out_tensors),
        "flops": {k: v for k, v in counter.by_class.items() if v},
        "flops_by_op": dict(sorted(counter.by_op.items(), key=lambda kv: -kv[1])[:16]),
        "dtypes": _dtypes(in_tensors + out_tensors + params),
        "counted_on": "meta" if state is not None else "device",
    }


def _on_meta(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return torch.empty_like(obj, device="meta")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_meta(x) for x in obj)
    return obj


def _count_on_meta(problem: Any, index: int) -> ShapeCounts:
    """The counts without allocating or computing anything: inputs made by ``get_inputs`` under
    the meta device, the module run on meta copies of its parameters and buffers."""
    model = problem.model
    if not isinstance(model, torch.nn.Module):
        raise TypeError("not an nn.Module")
    with torch.device("meta"):
        inputs = _on_meta(list(problem.module.get_inputs(**problem.kwargs[index])))
    state = {name: _on_meta(t) for name, t in [*model.named_parameters(), *model.named_buffers()]}
    counts = count_call(model, inputs, problem.shapes[index].label, state)
    counts["param_bytes"] = _param_bytes(model)
    return counts


def count_problem(problem: Any, seed: int) -> SolCounts:
    """Counts for every declared shape of a loaded problem (``reference.problem_code.ProblemCode``,
    its shapes probed): on meta tensors where the module runs there (no memory, no compute), else
    on one fresh draw of its inputs from ``seed`` (a forward that reads its data, or makes tensors
    on a device of its own)."""
    shapes = []
    for index, spec in enumerate(problem.shapes):
        try:
            counts = _count_on_meta(problem, index)
            if (counts["input_bytes"], counts["output_bytes"]) != (spec.input_bytes, spec.output_bytes):
                raise ValueError("meta run disagrees with the loaded shapes")
        except Exception:  # noqa: BLE001 - anything meta cannot run is counted on the device
            inputs = problem.generate(index, seed)
            counts = count_call(problem.model, inputs, spec.label)
            del inputs
        shapes.append(counts)
    return {"kind": "sol_counts", "shapes": shapes}

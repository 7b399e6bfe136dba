"""A problem loaded in the trusted worker: its reference model, fresh inputs per call, and their layout.

Only the problem's own code runs here. Everything a candidate needs about the problem leaves this
process as data: constructor arguments plus the RNG state to build with, tensors written into shared
regions just before each call, and output layouts. Standard library and torch only (and NumPy's
generator, seeded with the others, where NumPy is installed).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import random
import secrets
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch

from stark_mcp.evaluator.common.regions import dtype_name, layout_for, nbytes_of

# What a worker's first problem would import: imported with this module, the zygote that preloads it
# pays that once for all the workers it forks (tests/evaluator/test_preloads.py). Sizing the inputs
# runs the problem's get_inputs on the meta device, where torch's factories are its Python
# references; their argument checks (torch._check) import torch's symbolic shapes, and with them
# sympy and mpmath: about 500 modules, 0.7 CPU-s a worker. (A module of torch's rather than an API:
# where it is gone, only the time is lost.) seed_all seeds NumPy's generator, a lazy submodule.
with contextlib.suppress(ImportError):
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
with contextlib.suppress(ImportError):
    import numpy.random  # noqa: F401


class ProblemFailure(Exception):
    """The problem's own code failed at ``step``: the problem is broken, not a candidate."""

    def __init__(self, step: str, message: str, tb: str = "") -> None:
        super().__init__(f"{step}: {message}")
        self.step, self.message, self.tb = step, message, tb


class ResourceExhausted(Exception):
    """The device ran out of memory while the problem's code ran here: the machine's state (other
    problems kept warm, another process) is to blame until the problem fails alone."""


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError))


def fresh_seed() -> int:
    return secrets.randbits(62)


# torch.manual_seed also seeds every accelerator torch was built for, and queues the seed of a CUDA
# not yet initialised with the caller's stack (traceback.format_stack): 1-3 ms a call, a seventh of
# a CPU worker's time, which seeds afresh for every input it makes. A torch built without CUDA, ROCm
# and XPU has one generator to seed: the CPU's.
_CPU_ONLY = all(getattr(torch.version, name, None) is None for name in ("cuda", "hip", "xpu"))


def seed_all(seed: int) -> None:
    random.seed(seed)
    if _CPU_ONLY:
        torch.random.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _to_device(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    return obj


def _to_double(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.double() if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_double(x) for x in obj)
    return obj


class default_dtype:
    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __enter__(self) -> None:
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc: object) -> None:
        torch.set_default_dtype(self.saved)


@dataclass
class ShapeSpec:
    """One declared shape: how its inputs are laid out and what its outputs look like."""

    label: str
    kwargs: dict[str, Any]
    tree: dict[str, Any]  # input structure: tensor leaves by index, non-tensor args by position
    tensors: list[tuple[list[int], torch.dtype]]  # input tensor leaves (shape, dtype)
    arg_count: int
    output_tree: dict[str, Any]  # the reference's output structure (encoded, without values)
    outputs: list[tuple[list[int], torch.dtype]]  # output tensor leaves
    input_bytes: int = 0
    output_bytes: int = 0
    # get_inputs() gave the same values under two different seeds: every call then repeats them,
    # and a candidate that memoizes on input values is fast without working (its speedup is void).
    inputs_repeat: bool = False


@dataclass
class Call:
    """One call's private, pristine inputs (tensors on the device) and its non-tensor arguments."""

    shape: int
    tensors: list[torch.Tensor]
    args: list[Any]
    inputs: list[Any] = field(default_factory=list)  # the full argument list, for the reference


class LoadedProblem:
    def __init__(self, key: str, name: str, path: str, device: str) -> None:
        self.key, self.name, self.path, self.device = key, name, path, device
        self.module: Any = None
        self.model: Any = None
        self.model64: Any = None
        self.fp64_note = ""
        self.init: dict[str, Any] = {}
        self.shapes: list[ShapeSpec] = []
        self.planned_input_bytes = 0
        self.need_bytes = 0  # device memory this problem's evaluations need (the worker's size check)
        self.on_sizes: Any = None  # called once the inputs' size is known, before they exist

    # -- loading -------------------------------------------------------------------------------------
    def load(self) -> None:
        step = "import"
        try:
            spec = importlib.util.spec_from_file_location(f"stark_problem_{self.key}", self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            self.module = module
            step = "get_init_inputs() / Model(...)"
            self._build_model()
            step = "SHAPES"
            shapes = self._declared_shapes()
            self.planned_input_bytes = max(self._planned_bytes(kwargs) for kwargs in shapes)
            if self.on_sizes is not None:
                self.on_sizes(self)  # refuse before anything large is allocated
            for kwargs in shapes:
                step = f"get_inputs({_label(kwargs) if kwargs else ''})"
                self.shapes.append(self._shape(kwargs, step))
        except (ProblemFailure, ResourceExhausted):
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of the problem's code
            if _out_of_memory(exc):
                raise ResourceExhausted(f"{step}: {_describe(exc)}") from None
            raise ProblemFailure(step, _describe(exc), traceback.format_exc()) from None

    def _build_model(self) -> None:
        seed_all(fresh_seed())
        args = list(self.module.get_init_inputs())
        rng = {
            "torch": torch.get_rng_state(),
            "python": list(random.getstate()),
            "cuda": torch.cuda.get_rng_state() if self.device.startswith("cuda") else None,
        }
        rng["python"][1] = list(rng["python"][1])
        self.init = {"args": args, "rng": rng}
        model = self.module.Model(*args)
        self.model = model.to(self.device) if isinstance(model, torch.nn.Module) else model
        try:
            self.model64 = (
                copy.deepcopy(self.model).double() if isinstance(self.model, torch.nn.Module) else None
            )
            if self.model64 is None:
                self.fp64_note = "the model is not an nn.Module"
        except BaseException as exc:  # noqa: BLE001
            self.fp64_note = f"the model cannot be converted to float64: {_describe(exc)}"

    def _declared_shapes(self) -> list[dict[str, Any]]:
        shapes = getattr(self.module, "SHAPES", None)
        if shapes is None:
            return [{}]
        if (
            not isinstance(shapes, (list, tuple))
            or not shapes
            or not all(isinstance(s, dict) for s in shapes)
        ):
            raise ProblemFailure("SHAPES", "SHAPES must be a non-empty list of dicts of keyword arguments")
        return [dict(s) for s in shapes]

    def _planned_bytes(self, kwargs: dict[str, Any]) -> int:
        """The inputs' size without allocating them (factories on the meta device); 0 if unknown."""
        try:
            seed_all(fresh_seed())
            with torch.device("meta"):
                raw = self.module.get_inputs(**kwargs)
            _tree, tensors, _args = _input_tree(list(raw))
        except Exception:  # noqa: BLE001 - get_inputs that cannot run on meta is sized after generation
            return 0
        return sum(t.numel() * t.element_size() for t in tensors)

    def _generate(self, kwargs: dict[str, Any], seed: int) -> list[Any]:
        seed_all(seed)
        if self.device.startswith("cuda"):
            with torch.device(self.device):  # factory calls without a device draw on the GPU: fast
                raw = self.module.get_inputs(**kwargs)
        else:
            raw = self.module.get_inputs(**kwargs)
        return list(_to_device(list(raw), self.device))

    def _shape(self, kwargs: dict[str, Any], step: str) -> ShapeSpec:
        first = self._generate(kwargs, fresh_seed())
        second = self._generate(kwargs, fresh_seed())
        tree, tensors, args = _input_tree(first)
        if _input_tree(second)[0] != tree or [(list(t.shape), t.dtype) for t in _tensors(second)] != [
            (list(t.shape), t.dtype) for t in tensors
        ]:
            raise ProblemFailure(step, "get_inputs() returns differently shaped inputs for different seeds")
        repeat = _same_values(first, second)
        del second
        with torch.no_grad():
            out = self.model(*first)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        out_tree, out_tensors = _output_tree(out)
        tensor_specs = [(list(t.shape), t.dtype) for t in tensors]
        output_specs = [(list(t.shape), t.dtype) for t in out_tensors]
        del out, out_tensors
        self._try_float64(first, step)
        return ShapeSpec(
            label=_label(kwargs),
            kwargs=kwargs,
            tree=tree,
            tensors=tensor_specs,
            arg_count=len(args),
            output_tree=out_tree,
            outputs=output_specs,
            input_bytes=sum(nbytes_of(s, d) for s, d in tensor_specs),
            output_bytes=sum(nbytes_of(s, d) for s, d in output_specs),
            inputs_repeat=repeat,
        )

    # -- calls ---------------------------------------------------------------------------------------
    def new_call(self, shape: int) -> Call:
        """Fresh inputs from a secret seed, generated just before the call that uses them."""
        spec = self.shapes[shape]
        try:
            inputs = self._generate(spec.kwargs, fresh_seed())
        except BaseException as exc:  # noqa: BLE001
            where = f"get_inputs({spec.label if spec.kwargs else ''})"
            if _out_of_memory(exc):
                raise ResourceExhausted(f"{where}: {_describe(exc)}") from None
            raise ProblemFailure(where, _describe(exc), traceback.format_exc()) from None
        tree, tensors, args = _input_tree(inputs)
        if tree != spec.tree:
            raise ProblemFailure(
                f"get_inputs({spec.label})", "get_inputs() changed its structure between calls"
            )
        return Call(shape, tensors, args, inputs)

    def reference(self, call: Call) -> tuple[Any, Any | None, str]:
        """(native output, float64 output or None, note) for a call's pristine inputs."""
        try:
            with torch.no_grad():
                native = self.model(*call.inputs)
        except BaseException as exc:  # noqa: BLE001
            if _out_of_memory(exc):
                raise ResourceExhausted(f"Model.forward: {_describe(exc)}") from None
            raise ProblemFailure("Model.forward", _describe(exc), traceback.format_exc()) from None
        ref64 = None
        if self.model64 is not None:
            try:
                ref64 = self._forward64(call.inputs)
            except BaseException as exc:  # noqa: BLE001
                # It ran at load, alone: failing now is this call's trouble (a candidate holding the
                # memory it needs, say), never a reason to judge later candidates without it.
                if _out_of_memory(exc):
                    raise ResourceExhausted(f"Model.forward in float64: {_describe(exc)}") from None
                raise ProblemFailure(
                    "Model.forward in float64", _describe(exc), traceback.format_exc()
                ) from None
        return native, ref64, self.fp64_note

    def _try_float64(self, inputs: list[Any], step: str) -> None:
        """Run the float64 twin once at load, before any candidate exists: a model that cannot run
        in float64 is judged against its own precision from then on, with a note saying why."""
        if self.model64 is None:
            return
        try:
            self._forward64(inputs)
        except BaseException as exc:  # noqa: BLE001
            if _out_of_memory(exc):
                raise ResourceExhausted(f"{step} in float64: {_describe(exc)}") from None
            self.fp64_note = f"the model cannot run in float64: {_describe(exc)}"
            self.model64 = None

    def _forward64(self, inputs: list[Any]) -> Any:
        with torch.no_grad(), default_dtype(torch.float64):
            return self.model64(*_to_double(inputs))

    # -- layouts -------------------------------------------------------------------------------------
    def input_layout(self, slots: int) -> tuple[list[list[list[dict[str, Any]]]], int]:
        """Per shape, per slot, the leaves of its input tensors; all shapes share one region."""
        per_shape, end = [], 0
        for spec in self.shapes:
            slot_leaves, offset = [], 0
            for _ in range(slots):
                leaves, offset = layout_for(spec.tensors, offset)
                slot_leaves.append(leaves)
            per_shape.append(slot_leaves)
            end = max(end, offset)
        return per_shape, end

    def output_layout(self) -> tuple[list[list[dict[str, Any]]], int]:
        per_shape, end = [], 0
        for spec in self.shapes:
            leaves, offset = layout_for(spec.outputs)
            per_shape.append(leaves)
            end = max(end, offset)
        return per_shape, end


def _label(kwargs: dict[str, Any]) -> str:
    """``batch=8,dims=2x3``: the same text as ``problems.declarations.shape_label`` (which this side
    may not import), so the labels results carry match the ones the problem and its export name."""

    def text(value: Any) -> str:
        return "x".join(text(v) for v in value) if isinstance(value, (list, tuple)) else str(value)

    return ",".join(f"{k}={text(v)}" for k, v in kwargs.items()) or "default"


def _same_values(first: list[Any], second: list[Any]) -> bool:
    """Two draws of the inputs hold the same values: at least one non-empty tensor, every tensor
    equal, every other argument equal. One pass per tensor, stopping at the first that differs."""
    _tree, a, a_args = _input_tree(first)
    _tree, b, b_args = _input_tree(second)
    if not any(t.numel() for t in a) or a_args != b_args:
        return False
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _tensors(obj: Any) -> list[torch.Tensor]:
    return _input_tree(obj)[1]


def _input_tree(inputs: list[Any]) -> tuple[dict[str, Any], list[torch.Tensor], list[Any]]:
    tensors: list[torch.Tensor] = []
    args: list[Any] = []

    def walk(node: Any) -> dict[str, Any]:
        if isinstance(node, torch.Tensor):
            tensors.append(node.detach().contiguous())
            return {"k": "tensor", "leaf": len(tensors) - 1}
        if isinstance(node, (list, tuple)):
            return {
                "k": "seq",
                "type": "tuple" if isinstance(node, tuple) else "list",
                "items": [walk(x) for x in node],
            }
        if node is None or isinstance(node, (bool, int, float, str)):
            args.append(node)
            return {"k": "arg", "i": len(args) - 1}
        raise TypeError(
            f"get_inputs() returned a {type(node).__name__}; inputs must be tensors, numbers, "
            "strings, None, or lists/tuples of them"
        )

    return {"k": "seq", "type": "list", "items": [walk(x) for x in inputs]}, tensors, args


def _output_tree(out: Any) -> tuple[dict[str, Any], list[torch.Tensor]]:
    tensors: list[torch.Tensor] = []

    def walk(node: Any) -> dict[str, Any]:
        if isinstance(node, torch.Tensor):
            tensors.append(node)
            return {
                "k": "tensor",
                "dtype": dtype_name(node.dtype),
                "shape": list(node.shape),
                "device": str(node.device),
            }
        if isinstance(node, (list, tuple)):
            return {"k": "seq", "type": type(node).__name__, "items": [walk(x) for x in node]}
        if node is None or isinstance(node, (bool, int, float)):
            return {"k": "scalar", "v": node}
        return {"k": "other", "type": type(node).__name__}

    return walk(out), tensors

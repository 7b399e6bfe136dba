"""The problem's objects, in the reference jail: its module, the reference model and its float64
twin, and the inputs of the calls the worker has not released yet.

Every seed comes from the worker with the request that uses it; what leaves is data (shape specs,
an init file, tensors written into the worker's exchange region). A failure of the problem's code
is a ``ProblemCodeFailure`` naming the step. Standard library and torch only (and NumPy's
generator, seeded with the others, where NumPy is installed).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import random
import sys
from typing import Any

import torch

from stark_mcp.evaluator.common.reference_wire import ModelInit, RngState
from stark_mcp.evaluator.common.regions import nbytes_of
from stark_mcp.evaluator.common.shapes import (
    SeqInput,
    ShapeSpec,
    input_tree,
    label,
    output_tree,
    specs_of,
    without_leaves,
)

# What a first problem would import: imported with this module, the zygote that preloads it pays
# that once for all the jails it forks (tests/evaluator/test_preloads.py). Sizing the inputs runs
# the problem's get_inputs on the meta device, where torch's factories are its Python references;
# their argument checks (torch._check) import torch's symbolic shapes, and with them sympy and
# mpmath: about 500 modules, 0.7 CPU-s a process. (A module of torch's rather than an API: where it
# is gone, only the time is lost.) seed_all seeds NumPy's generator, a lazy submodule.
with contextlib.suppress(ImportError):
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
with contextlib.suppress(ImportError):
    import numpy.random  # noqa: F401


class ProblemCodeFailure(Exception):
    """The problem's code failed at ``step`` (``oom``: it ran out of memory)."""

    def __init__(self, step: str, message: str, tb: str = "", oom: bool = False) -> None:
        super().__init__(f"{step}: {message}")
        self.step, self.message, self.tb, self.oom = step, message, tb, oom


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError))


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# torch.manual_seed also seeds every accelerator torch was built for, and queues the seed of a CUDA
# not yet initialised with the caller's stack (traceback.format_stack): 1-3 ms a call, a seventh of
# a CPU call's time, which seeds afresh for every input it makes. A torch built without CUDA, ROCm
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


def _restore_rng(rng: RngState) -> None:
    torch.set_rng_state(rng["torch"])
    python = rng["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])


class default_dtype:
    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __enter__(self) -> None:
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc: object) -> None:
        torch.set_default_dtype(self.saved)


def _jsonable(kwargs: dict[str, Any]) -> dict[str, Any]:  # free-form: a SHAPES entry (user metadata)
    """A shape's keyword arguments as data (the label is made from the originals)."""
    return json.loads(json.dumps(kwargs, default=repr))


class ProblemCode:
    """One problem, imported in this process. Each method names the step a failure belongs to."""

    def __init__(self, path: str, module_name: str, device: str) -> None:
        self.path, self.module_name, self.device = path, module_name, device
        self.module: Any = None
        self.model: Any = None
        self.model64: Any = None
        self.fp64_note = ""
        self.init: ModelInit | None = None
        # free-form: each declared shape's keyword arguments, as the problem's SHAPES declares them
        self.kwargs: list[dict[str, Any]] = []
        self.shapes: list[ShapeSpec] = []  # filled by probe(), in order (sol_count reads them)
        self.calls: dict[int, list[Any]] = {}  # inputs of the calls the worker keeps, by its number

    # -- load ----------------------------------------------------------------------------------------
    def load(self, seed: int, init: ModelInit | None = None) -> None:
        """Import, build the reference (from ``init`` where the worker has one already: a jail
        started again builds the same weights) and its float64 twin, read SHAPES."""
        self._step("import", self._import)
        self._step("get_init_inputs() / Model(...)", lambda: self._build(seed, init))
        self.kwargs = self._step("SHAPES", self._declared_shapes)

    def _step(self, step: str, work: Any) -> Any:
        try:
            return work()
        except ProblemCodeFailure:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of the problem's code
            raise ProblemCodeFailure(step, describe(exc), _traceback(), out_of_memory(exc)) from None

    def _import(self) -> None:
        spec = importlib.util.spec_from_file_location(self.module_name, self.path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        self.module = module

    def _build(self, seed: int, init: ModelInit | None) -> None:
        if init is None:
            seed_all(seed)
            args = list(self.module.get_init_inputs())
            rng: RngState = {
                "torch": torch.get_rng_state(),
                "python": list(random.getstate()),
                "cuda": torch.cuda.get_rng_state() if self.device.startswith("cuda") else None,
            }
            rng["python"][1] = list(rng["python"][1])
            init = {"args": args, "rng": rng}
        else:
            _restore_rng(init["rng"])
        self.init = init
        model = self.module.Model(*init["args"])
        self.model = model.to(self.device) if isinstance(model, torch.nn.Module) else model
        try:
            self.model64 = (
                copy.deepcopy(self.model).double() if isinstance(self.model, torch.nn.Module) else None
            )
            if self.model64 is None:
                self.fp64_note = "the model is not an nn.Module"
        except BaseException as exc:  # noqa: BLE001
            self.fp64_note = f"the model cannot be converted to float64: {describe(exc)}"

    def _declared_shapes(self) -> list[dict[str, Any]]:  # free-form: SHAPES (user metadata)
        shapes = getattr(self.module, "SHAPES", None)
        if shapes is None:
            return [{}]
        if (
            not isinstance(shapes, (list, tuple))
            or not shapes
            or not all(isinstance(s, dict) for s in shapes)
        ):
            raise ProblemCodeFailure(
                "SHAPES", "SHAPES must be a non-empty list of dicts of keyword arguments"
            )
        return [dict(s) for s in shapes]

    def param_bytes(self) -> int:
        if not isinstance(self.model, torch.nn.Module):
            return 0
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def planned_input_bytes(self, seed: int) -> int:
        """The largest shape's inputs, sized without allocating them (factories on the meta
        device); 0 if unknown."""
        return max(self._planned_bytes(kwargs, seed) for kwargs in self.kwargs)

    def _planned_bytes(self, kwargs: dict[str, Any], seed: int) -> int:  # free-form: a SHAPES entry
        try:
            seed_all(seed)
            with torch.device("meta"):
                raw = self.module.get_inputs(**kwargs)
            _tree, tensors, _args = input_tree(list(raw))
        except Exception:  # noqa: BLE001 - get_inputs that cannot run on meta is sized after generation
            return 0
        return sum(t.numel() * t.element_size() for t in tensors)

    def shape_step(self, index: int) -> str:
        kwargs = self.kwargs[index]
        return f"get_inputs({label(kwargs) if kwargs else ''})"

    # -- shapes --------------------------------------------------------------------------------------
    def generate(self, index: int, seed: int) -> list[Any]:
        kwargs = self.kwargs[index]
        seed_all(seed)
        if self.device.startswith("cuda"):
            with torch.device(self.device):  # factory calls without a device draw on the GPU: fast
                raw = self.module.get_inputs(**kwargs)
        else:
            raw = self.module.get_inputs(**kwargs)
        return list(_to_device(list(raw), self.device))

    def probe(self, index: int, seeds: tuple[int, int]) -> ShapeSpec:
        """Two draws of a shape's inputs under two seeds, the reference once on the first, and the
        float64 twin once (a model that cannot run in float64 is judged against its own precision
        from then on, with a note saying why)."""
        step = self.shape_step(index)
        return self._step(step, lambda: self._probe(index, seeds, step))

    def _probe(self, index: int, seeds: tuple[int, int], step: str) -> ShapeSpec:
        kwargs = self.kwargs[index]
        first = self.generate(index, seeds[0])
        second = self.generate(index, seeds[1])
        tree, tensors, args = input_tree(first)
        tree2, tensors2, _ = input_tree(second)
        if tree2 != tree or specs_of(tensors2) != specs_of(tensors):
            raise ProblemCodeFailure(
                step, "get_inputs() returns differently shaped inputs for different seeds"
            )
        repeat = _same_values(first, second)
        del second, tensors2
        with torch.no_grad():
            out = self.model(*first)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        out_tree, out_tensors = output_tree(out)
        outputs = specs_of(out_tensors)
        del out, out_tensors
        outputs64 = self._try_float64(first, step)
        spec = ShapeSpec(
            label=label(kwargs),
            kwargs=_jsonable(kwargs),
            tree=tree,
            tensors=specs_of(tensors),
            arg_count=len(args),
            output_tree=without_leaves(out_tree),
            outputs=outputs,
            inputs_repeat=repeat,
            outputs64=outputs64,
        )
        spec.input_bytes = sum(t.numel() * t.element_size() for t in tensors)
        spec.output_bytes = sum(nbytes_of(s, d) for s, d in outputs)
        self.shapes.append(spec)
        return spec

    def _try_float64(self, inputs: list[Any], step: str) -> Any:
        if self.model64 is None:
            return None
        try:
            out = self._forward64(inputs)
        except BaseException as exc:  # noqa: BLE001
            if out_of_memory(exc):
                raise ProblemCodeFailure(f"{step} in float64", describe(exc), _traceback(), True) from None
            self.fp64_note = f"the model cannot run in float64: {describe(exc)}"
            self.model64 = None
            return None
        return specs_of(output_tree(out)[1])

    def drop_float64(self, note: str) -> None:
        self.model64 = None
        self.fp64_note = note

    # -- calls ---------------------------------------------------------------------------------------
    def new_call(
        self, number: int, index: int, seed: int
    ) -> tuple[SeqInput, list[torch.Tensor], list[Any]]:
        """Fresh inputs for the worker's call ``number`` from its seed, kept until released."""
        inputs = self._step(self.shape_step(index), lambda: self.generate(index, seed))
        self.calls[number] = inputs
        return self._step(self.shape_step(index), lambda: input_tree(inputs))

    def release(self, numbers: list[int]) -> None:
        for number in numbers:
            self.calls.pop(number, None)

    def reference(self, number: int) -> tuple[Any, Any | None]:
        """(native output, float64 output or None) on call ``number``'s inputs."""
        inputs = self.calls.get(number)
        if inputs is None:
            raise ProblemCodeFailure("Model.forward", f"no inputs kept for call {number}")

        def native() -> Any:
            with torch.no_grad():
                return self.model(*inputs)

        out = self._step("Model.forward", native)
        # It ran at load, alone: failing now is this call's trouble (a candidate holding the memory
        # it needs, say), never a reason to judge later candidates without it.
        ref64 = (
            self._step("Model.forward in float64", lambda: self._forward64(inputs))
            if self.model64 is not None
            else None
        )
        return out, ref64

    def _forward64(self, inputs: list[Any]) -> Any:
        with torch.no_grad(), default_dtype(torch.float64):
            return self.model64(*_to_double(inputs))


def _traceback() -> str:
    import traceback

    return traceback.format_exc()


def _same_values(first: list[Any], second: list[Any]) -> bool:
    """Two draws of the inputs hold the same values: at least one non-empty tensor, every tensor
    equal, every other argument equal. One pass per tensor, stopping at the first that differs."""
    _tree, a, a_args = input_tree(first)
    _tree, b, b_args = input_tree(second)
    if not any(t.numel() for t in a) or a_args != b_args:
        return False
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

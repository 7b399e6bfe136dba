"""A problem as the trusted worker holds it: its shapes, each call's secret seed and pristine inputs,
and the reference outputs it compares, with the problem's code kept in its reference jail.

The worker never imports the problem. Its module-level code, ``get_init_inputs``, ``Model``, the
float64 twin and ``get_inputs`` run in a jail of their own (``evaluator/reference/``), asked over a
frame connection (``reference_jail.py``); tensors come through an exchange region the worker
creates and maps, and are copied into memory of the worker's own at once. Everything a candidate
needs about the problem leaves the worker as data: constructor arguments plus the RNG state to
build with (the jail's ``init.pt``, which the worker only copies), tensors written into shared
regions just before each call, and output layouts. Standard library and torch only.
"""

from __future__ import annotations

import os
import secrets
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from stark_mcp.evaluator.common.reference_wire import JailPlaces, Request
from stark_mcp.evaluator.common.regions import Leaf, Region, layout_for, layout_groups
from stark_mcp.evaluator.common.shapes import OutputNode, ShapeSpec, specs_from_wire
from stark_mcp.evaluator.trusted.reference_jail import ReferenceGone, ReferenceJail

__all__ = [
    "Call",
    "LoadedProblem",
    "ProblemFailure",
    "ResourceExhausted",
    "ShapeSpec",
    "calls_per_request",
    "fresh_seed",
]

# A small problem's timing makes up to two thousand calls (the candidate's and the baseline's), and
# each draw of inputs is a round trip to the reference jail: another process, and on a GPU another
# context the device switches to, about 1 ms on an H200 against 0.2-0.4 ms when the worker drew
# them itself. So small inputs are drawn several calls at a time (each call its own secret seed, as
# before; the candidate sees none of them before its call). What is drawn ahead is held three times
# (in the jail, in the exchange region, and here), so the batch is bounded in bytes.
BATCH_BYTES = 32 << 20
MAX_CALLS_PER_REQUEST = 16


def calls_per_request(input_bytes: int) -> int:
    """How many calls' inputs one request to the jail draws, for one call's ``input_bytes``."""
    if input_bytes <= 0:
        return MAX_CALLS_PER_REQUEST
    return max(1, min(MAX_CALLS_PER_REQUEST, BATCH_BYTES // input_bytes))


def drawn_ahead_bytes(input_bytes: int) -> int:
    """The inputs of calls drawn before their turn, in each of the three places that hold them."""
    return (calls_per_request(input_bytes) - 1) * max(0, input_bytes)


class ProblemFailure(Exception):
    """The problem's own code failed at ``step``: the problem is broken, not a candidate."""

    def __init__(self, step: str, message: str, tb: str = "") -> None:
        super().__init__(f"{step}: {message}")
        self.step, self.message, self.tb = step, message, tb


class ResourceExhausted(Exception):
    """The device ran out of memory while the problem's code ran: the machine's state (other
    problems kept warm, another process) is to blame until the problem fails alone."""


def fresh_seed() -> int:
    return secrets.randbits(62)


@dataclass
class Call:
    """One call's private, pristine inputs (tensors on the device) and its non-tensor arguments;
    ``number`` names the raw inputs the reference jail keeps for it until the call is let go."""

    shape: int
    tensors: list[torch.Tensor]
    args: list[Any]
    inputs: list[Any] = field(default_factory=list)
    number: int = -1


@dataclass
class JailRequestTimes:
    """How long the jail may take to answer: loading and probing a shape (import, model, inputs,
    two forwards), and one call's inputs or reference."""

    load_s: float = 600.0
    call_s: float = 600.0


class LoadedProblem:
    def __init__(
        self,
        key: str,
        name: str,
        device: str,
        jail: ReferenceJail,
        load_request: JailPlaces,
        times: JailRequestTimes | None = None,
        start_jail: Callable[[], ReferenceJail] | None = None,
    ) -> None:
        self.key, self.name, self.device = key, name, device
        self.jail = jail
        self.start_jail = start_jail  # a fresh jail for this problem (``reopen``)
        self.load_request = load_request  # path, module, sys_path, out: as the jail sees them
        self.times = times or JailRequestTimes()
        self.fp64 = False  # the float64 twin runs for every reference
        self.fp64_note = ""
        self.param_bytes = 0
        self.shapes: list[ShapeSpec] = []
        self.planned_input_bytes = 0
        self.need_bytes = 0  # device memory this problem's evaluations need (the worker's size check)
        self.on_sizes: Any = None  # called once the inputs' size is known, before they exist
        self.exchange: Region | None = None
        self._exchange_fd = -1
        self._numbers = 0
        self.kept_in_jail = 0  # calls whose raw inputs the jail held at the last draw
        # Per shape, calls drawn ahead of their turn (``calls_per_request``), handed out in order.
        self._drawn: dict[int, deque[Call]] = {}
        # Calls let go here (collected), for the jail to drop with the next request: one list for the
        # problem's life, which each call's finalizer appends to.
        self._released: list[int] = []

    # -- loading -------------------------------------------------------------------------------------
    def load(self) -> None:
        """Load in the jail; size-check (``on_sizes``) before any shape's inputs exist and again
        once all are known; then the exchange region, sized for the largest shape."""
        self._ask_hello()
        loaded = self._ask(
            {"op": "load", "seed": fresh_seed(), "plan_seed": fresh_seed(), **self.load_request},
            "import",
            self.times.load_s,
        )
        self.param_bytes = int(loaded["param_bytes"])
        self.planned_input_bytes = int(loaded["planned_input_bytes"])
        self.fp64, self.fp64_note = bool(loaded["fp64"]), str(loaded["fp64_note"])
        if self.on_sizes is not None:
            self.on_sizes(self)  # refuse before anything large is allocated
        for index in range(int(loaded["shapes"])):
            answer = self._ask(
                {"op": "probe", "shape": index, "seeds": [fresh_seed(), fresh_seed()]},
                f"get_inputs() of shape {index + 1}",
                self.times.load_s,
            )
            self.shapes.append(ShapeSpec.from_wire(answer["spec"]))
            self.fp64, self.fp64_note = bool(answer["fp64"]), str(answer["fp64_note"])
        if self.on_sizes is not None:
            self.on_sizes(self)
        self._open_exchange()

    def suspend(self) -> None:
        """End the jail to give its memory back (a CUDA context, the models); ``reopen`` starts it
        again. The worker's side (shapes, the exchange region) stays."""
        self._drawn.clear()  # their raw inputs, which a reference needs, end with the jail
        self.jail.close()

    def reopen(self) -> None:
        """Start the jail again if it is not running (suspended to make room, or died): it builds
        the same reference from the init file the first jail saved, and its shapes must be the
        ones loaded. Calls made before are gone with the old jail."""
        if self.jail.alive():
            return
        if self.start_jail is None:
            raise ProblemFailure("start", "the problem's reference jail is gone and cannot be started again")
        self._drawn.clear()
        self.jail.close()
        self.jail = self.start_jail()
        self._released.clear()
        self._ask_hello()
        init = f"{self.load_request['out']}/init.pt"
        request = {"op": "load", "seed": fresh_seed(), "plan": False, "init": init, **self.load_request}
        self._ask(request, "import", self.times.load_s)
        for index, spec in enumerate(self.shapes):
            answer = self._ask(
                {"op": "probe", "shape": index, "seeds": [fresh_seed(), fresh_seed()]},
                f"get_inputs({spec.label})",
                self.times.load_s,
            )
            again = ShapeSpec.from_wire(answer["spec"])
            # (The output tree's scalars are values, which differ between draws.)
            if (again.tree, again.tensors, again.outputs) != (spec.tree, spec.tensors, spec.outputs):
                self.jail.close()
                raise ProblemFailure(f"get_inputs({spec.label})", "its shapes changed since it loaded")
        if not self.fp64:
            self._ask({"op": "drop_fp64", "note": self.fp64_note}, "float64 reference", self.times.load_s)
        self._send_exchange()

    def drop_float64(self, note: str) -> None:
        """Judge against the problem's own precision from now on (the twin does not fit)."""
        self.fp64, self.fp64_note = False, note
        self._ask({"op": "drop_fp64", "note": note}, "float64 reference", self.times.load_s)

    def exchange_bytes(self) -> int:
        """The exchange region: the largest shape's inputs for one request's calls, or its outputs
        and their float64 twins."""
        need = 0
        for spec in self.shapes:
            outputs = spec.outputs + (spec.outputs64 or [] if self.fp64 else [])
            inputs = layout_groups([spec.tensors] * calls_per_request(spec.input_bytes))[1]
            need = max(need, inputs, layout_for(outputs)[1])
        return need

    def _open_exchange(self) -> None:
        """The exchange region, kept with its descriptor: a jail started again maps it too."""
        self.exchange, self._exchange_fd = Region.create(self.exchange_bytes(), self.device)
        self._send_exchange()

    def _send_exchange(self) -> None:
        assert self.exchange is not None
        self._ask(
            {"op": "region", "nbytes": self.exchange.size}, "exchange region", self.times.load_s,
            fds=(self._exchange_fd,),
        )

    # -- calls ---------------------------------------------------------------------------------------
    def new_call(self, shape: int) -> Call:
        """Fresh inputs from a secret seed, drawn just before the call that uses them (or with the
        few calls before it, for small inputs), copied at once into tensors of the worker's own (the
        pristine inputs every check compares with)."""
        drawn = self._drawn.setdefault(shape, deque())
        if drawn and not self.jail.alive():
            drawn.clear()  # their raw inputs died with the jail: no reference could be made for them
        if not drawn:
            drawn.extend(self._draw(shape, calls_per_request(self.shapes[shape].input_bytes)))
        return drawn.popleft()

    def _draw(self, shape: int, count: int) -> list[Call]:
        spec = self.shapes[shape]
        step = f"get_inputs({spec.label if spec.kwargs else ''})"
        numbers = list(range(self._numbers + 1, self._numbers + 1 + count))
        self._numbers += count
        answer = self._ask(
            {"op": "call", "shape": shape, "calls": [[n, fresh_seed()] for n in numbers]},
            step,
            self.times.call_s,
        )
        drawn = answer.get("calls")
        if not isinstance(drawn, list) or len(drawn) != count:
            self._released.extend(numbers)
            raise ProblemFailure(step, f"the reference jail answered {str(drawn)[:200]} for {count} calls")
        for one in drawn:
            if one["tree"] != spec.tree or specs_from_wire(
                [[leaf["shape"], leaf["dtype"]] for leaf in one["leaves"]]
            ) != spec.tensors:
                self._released.extend(numbers)
                raise ProblemFailure(step, "get_inputs() changed its structure between calls")
        copies = self._copy_out([leaf for one in drawn for leaf in one["leaves"]])
        self.kept_in_jail = int(answer.get("kept", 0))
        calls, at = [], 0
        for number, one in zip(numbers, drawn, strict=True):
            width = len(one["leaves"])
            call = Call(shape, copies[at : at + width], list(one["args"]), number=number)
            at += width
            weakref.finalize(call, self._released.append, number)
            calls.append(call)
        return calls

    def reference(self, call: Call) -> tuple[Any, Any | None, str]:
        """(native output, float64 output or None, note) for a call's pristine inputs."""
        answer = self._ask({"op": "reference", "number": call.number}, "Model.forward", self.times.call_s)
        views = self._copy_out(answer["leaves"])
        native = _rebuild(answer["native"], views)
        ref64 = _rebuild(answer["ref64"], views) if answer.get("ref64") is not None else None
        return native, ref64, self.fp64_note

    # free-form: the jail's raw answer, decoded by the worker as a ``wire.SolCounts`` (or SolMissing)
    def sol_counts(self) -> dict[str, Any]:
        """The reference's bytes and FLOPs per shape, counted in the jail (``reference/sol_count.py``)."""
        return self._ask({"op": "counts", "seed": fresh_seed()}, "counting the reference", self.times.load_s)

    def trim(self) -> None:
        """The jail hands its allocator's unused memory back to the device (a GPU's: runners need it).
        Best effort: a jail that fails at it has failed, and the next request says so."""
        if self.device.startswith("cuda") and self.jail.alive():
            try:
                self._ask({"op": "trim"}, "giving memory back", self.times.call_s)
            except (ProblemFailure, ResourceExhausted):
                pass

    def _copy_out(self, leaves: list[Leaf]) -> list[torch.Tensor]:
        """Private copies of the exchange region's leaves, finished before the jail may write again."""
        assert self.exchange is not None
        copies = [self.exchange.view(leaf).clone() for leaf in leaves]
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return copies

    # -- the jail ------------------------------------------------------------------------------------
    def _ask_hello(self) -> None:
        try:
            self.jail.hello(self.times.load_s)
        except ReferenceGone as gone:
            raise ProblemFailure("start", self._gone(gone)) from None

    def _ask(
        self, frame: Request, step: str, timeout: float, fds: tuple[int, ...] = ()
    ) -> dict[str, Any]:  # free-form: the jail's raw answer (``reference_wire``), checked where read
        released = self._released[:]
        del self._released[: len(released)]
        if released:
            frame = {**frame, "release": released}
        try:
            answer = self.jail.request(frame, timeout, fds)
        except ReferenceGone as gone:
            raise ProblemFailure(step, self._gone(gone)) from None
        if answer.get("kind") == "failure":
            where, message = str(answer.get("step") or step), str(answer.get("message", ""))
            if answer.get("oom"):
                raise ResourceExhausted(f"{where}: {message}")
            raise ProblemFailure(where, message, str(answer.get("traceback", "")))
        return answer

    def _gone(self, gone: ReferenceGone) -> str:
        out = self.jail.output()
        return f"the problem's process (its reference jail) {gone}" + (f"; its output:\n{out}" if out else "")

    def close(self) -> None:
        """End the jail, then let go of the exchange region (idempotent)."""
        self._drawn.clear()
        self.jail.close()
        if self.exchange is not None:
            self.exchange.close()
            self.exchange = None
        if self._exchange_fd >= 0:
            os.close(self._exchange_fd)
            self._exchange_fd = -1

    # -- layouts -------------------------------------------------------------------------------------
    def input_layout(self, slots: int) -> tuple[list[list[list[Leaf]]], int]:
        """Per shape, per slot, the leaves of its input tensors; all shapes share one region."""
        per_shape: list[list[list[Leaf]]] = []
        end = 0
        for spec in self.shapes:
            slot_leaves, offset = layout_groups([spec.tensors] * slots)
            per_shape.append(slot_leaves)
            end = max(end, offset)
        return per_shape, end

    def output_layout(self) -> tuple[list[list[Leaf]], int]:
        per_shape: list[list[Leaf]] = []
        end = 0
        for spec in self.shapes:
            leaves, offset = layout_for(spec.outputs)
            per_shape.append(leaves)
            end = max(end, offset)
        return per_shape, end


def _rebuild(node: OutputNode, tensors: list[torch.Tensor]) -> Any:
    """The reference's output as objects again, from its encoded structure: what
    ``compare.encode_reference`` sees is what it saw when the worker ran the reference itself."""
    kind = node.get("k")
    if kind == "tensor":
        tensor = tensors[int(node["leaf"])]
        return tensor.cpu() if node.get("device") == "cpu" else tensor
    if kind == "seq":
        items = [_rebuild(x, tensors) for x in node["items"]]
        name = str(node.get("type"))
        if name in ("tuple", "list"):
            return tuple(items) if name == "tuple" else items
        return _named(name, tuple)(items)  # a named tuple (torch.return_types.max, say)
    if kind == "scalar":
        return node.get("v")
    return _named(str(node.get("type")), object)()  # compared by its type's name only


def _named(name: str, base: type) -> type:
    return type(name, (base,), {})

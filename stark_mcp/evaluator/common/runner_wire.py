"""What the trusted worker and a runner (``untrusted/runner.py``) say to each other, as typed dicts.

They stay dicts: each is plain JSON the other side already reads, in a frame (``common/frames.py``:
the setup, then ``ready`` or ``error``) or in DONE's metadata (``common/control.py``: one answer per
call). The worker writes ``RunnerSetup``; the runner writes the rest, and since a candidate controls
the runner's process, these say only what an honest runner sends: the worker reads every answer as
untrusted JSON and checks each field where it reads it (``compare.validate_tree``, the session).

Standard library only (the tree and leaf types are named for the reader, never imported at run time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

if TYPE_CHECKING:
    from stark_mcp.evaluator.common.regions import Leaf
    from stark_mcp.evaluator.common.shapes import InputNode, OtherOutput, ScalarOutput


# -- the setup frame (worker -> runner) ----------------------------------------------------------------


class ShapeInputs(TypedDict):
    tree: InputNode
    slots: list[list[Leaf]]  # per slot, the call's input tensors in the inputs region


class ShapeOutputs(TypedDict):
    leaves: list[Leaf]  # where the outputs are published in the outputs region


class ShapeSetup(TypedDict):
    inputs: ShapeInputs
    outputs: ShapeOutputs


class TimingSetup(TypedDict):
    sleep_cycles: int  # GPU sleep launched first in a call (``wire.GPU_SLEEP_CYCLES``; 0: none)
    spin_s: float  # how long to spin on the GO doorbell before sleeping on it


class ProfilingSetup(TypedDict):
    nvtx: str  # the NVTX range an outside profiler replays


class RegionSetup(TypedDict):
    index: int  # which of the descriptors sent with the frame
    nbytes: int


class RunnerSetup(TypedDict):
    mode: Literal["candidate", "reference"]  # import ModelNew from a candidate, or the problem's Model
    device: str
    module_path: str
    init_path: str  # the reference jail's init.pt (``reference_wire.ModelInit``)
    shapes: list[ShapeSetup]
    timing: TimingSetup
    threads: int  # torch's intra-op threads (0: leave torch's default)
    poison: bool  # fill the CUDA allocator's free blocks with NaN before the first call
    sys_path: list[str]
    env: NotRequired[dict[str, str]]  # a candidate's: where its builds and caches are
    compile: NotRequired[str | None]  # a baseline's torch.compile mode (None: eager)
    profiling: NotRequired[ProfilingSetup | None]  # set when an outside tool wraps the runner
    # added by ``RunnerHandle.setup`` as it sends the frame:
    regions: NotRequired[dict[str, RegionSetup]]  # "inputs" and "outputs"
    publish: NotRequired[Literal["address", "copy"]]  # how CPU outputs reach the worker


# -- the runner's answer to its setup (runner -> worker, a frame) ----------------------------------------


class Ready(TypedDict):
    kind: Literal["ready"]
    flags_changed: list[str]  # global numerics switches the import changed (``FlagWatch``)


class SetupError(TypedDict):
    kind: Literal["error"]
    status: str  # a verdict: load_error, build_error, runtime_error
    reason: str
    message: str
    traceback: str


# -- a call's description of its outputs (in DONE) -----------------------------------------------------


class DescribedTensor(TypedDict):
    k: Literal["tensor"]
    dtype: str
    shape: list[int]
    device: str
    leaf: int  # the output leaf it was published to, or -1 (it did not fit one)
    addr: NotRequired[int]  # where a CPU runner left its bytes, when it publishes by address


class DescribedSubclass(TypedDict):
    k: Literal["subclass"]
    type: str  # a torch.Tensor subclass's name (never called into)


class DescribedSeq(TypedDict):
    k: Literal["seq"]
    type: str
    items: list[Described]


Described: TypeAlias = "DescribedTensor | DescribedSubclass | DescribedSeq | ScalarOutput | OtherOutput"


# -- DONE's metadata (runner -> worker) -----------------------------------------------------------------


class CallDone(TypedDict):
    ok: Literal[True]
    out: Described
    flags: list[str]  # e.g. output_aliases_input, output_in_harness_region
    jit: NotRequired[int]  # Triton compilations and autotuning runs so far


class CallFailed(TypedDict):
    ok: Literal[False]
    status: str  # runtime_error, rejected
    reason: str
    message: str


class Launch(TypedDict):
    """One kernel launch as the torch profiler's trace gave it (``kernel_list.launches_from_trace``)."""

    name: str
    us: float
    grid: list[int] | None
    block: list[int] | None
    registers: int | None
    shared_memory: int | None


class ProfileDone(TypedDict):
    ok: Literal[True]
    kernels: NotRequired[list[list[Any]]]  # [[name, us], ...] (``kernel_list.kernel_totals``)
    launches: NotRequired[list[Launch]]


class ProfileFailed(TypedDict):
    ok: Literal[False]
    message: str


Done = CallDone | CallFailed | ProfileDone | ProfileFailed  # an exit's DONE is ProfileDone's {"ok": true}

"""What the trusted worker and a problem's reference jail (``reference/serve.py``) say to each other.

One frame each way per request (``common/frames.py``); tensors travel through the worker's exchange
region, never in frames. The frames stay dicts (TypedDicts here): plain JSON that both ends already
read. The worker (``trusted/problem.py`` through ``trusted/reference_jail.py``) sends a request; the
jail answers with the request's answer or a ``Failure`` (the problem's own code failed):

  LoadRequest       -> Loaded (and the jail writes ``ModelInit`` to ``out``/init.pt)
  ProbeRequest      -> ShapeProbed
  DropFp64Request   -> Ok
  RegionRequest     -> Ok (the region's descriptor follows the frame, SCM_RIGHTS)
  CallRequest       -> Inputs: several calls' inputs at once, packed one after another
  ReferenceRequest  -> Outputs
  CountsRequest     -> SolCounts | SolMissing (the worker reads them as ``wire`` answers)
  TrimRequest       -> Ok
  {"op": "close"}   (no answer: the jail exits)

Every request may carry ``release``: the calls whose kept inputs the jail may now drop. Standard
library only (the tree and leaf types are named for the reader, never imported at run time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    import torch

    from stark_mcp.evaluator.common.regions import Leaf
    from stark_mcp.evaluator.common.shapes import OutputNode, SeqInput, ShapeSpecFrame


# -- requests (worker -> jail) ---------------------------------------------------------------------------


class Request(TypedDict):
    release: NotRequired[list[int]]  # call numbers the worker let go


class JailPlaces(TypedDict):
    """Where the jail sees the problem, said once (``LoadedProblem.load_request``) and sent with each
    load."""

    path: str  # the problem's file
    module: str  # the name it is imported as
    device: str
    sys_path: list[str]  # the problem's import roots
    out: str  # the folder the jail writes init.pt to


class LoadRequest(Request, JailPlaces):
    op: Literal["load"]
    seed: int  # for get_init_inputs() and the model's weights
    plan_seed: NotRequired[int]  # for sizing the largest shape's inputs on the meta device
    plan: NotRequired[bool]  # False: skip that sizing (a jail started again)
    init: NotRequired[str]  # a jail started again: build from this init.pt, not from ``seed``


class ProbeRequest(Request):
    op: Literal["probe"]
    shape: int
    seeds: list[int]  # two: inputs that repeat under both are flagged


class DropFp64Request(Request):
    op: Literal["drop_fp64"]
    note: str


class RegionRequest(Request):
    op: Literal["region"]
    nbytes: int


class CallRequest(Request):
    op: Literal["call"]
    shape: int
    calls: list[list[int]]  # [[call number, secret seed], ...]


class ReferenceRequest(Request):
    op: Literal["reference"]
    number: int  # the call whose kept inputs to run the reference on


class CountsRequest(Request):
    op: Literal["counts"]
    seed: int


class TrimRequest(Request):
    op: Literal["trim"]


# -- answers (jail -> worker) ------------------------------------------------------------------------------


class Hello(TypedDict):
    kind: Literal["hello"]
    pid: int


class Loaded(TypedDict):
    kind: Literal["loaded"]
    shapes: int  # how many shapes the problem declares
    param_bytes: int
    planned_input_bytes: int  # the largest shape's inputs (0: not sized)
    fp64: bool  # the float64 twin was built
    fp64_note: str


class ShapeProbed(TypedDict):
    kind: Literal["shape"]
    spec: ShapeSpecFrame
    fp64: bool  # still: a probe may find the twin cannot run
    fp64_note: str


class Ok(TypedDict):
    kind: Literal["ok"]


class DrawnCall(TypedDict):
    tree: SeqInput
    args: list[Any]  # free-form: the problem's non-tensor arguments (numbers, strings, None)
    leaves: list[Leaf]  # its tensors in the exchange region


class Inputs(TypedDict):
    kind: Literal["inputs"]
    calls: list[DrawnCall]
    kept: int  # calls whose raw inputs the jail holds


class Outputs(TypedDict):
    kind: Literal["outputs"]
    native: OutputNode
    ref64: OutputNode | None  # its leaves numbered after the native output's
    leaves: list[Leaf]


class ShapeCounts(TypedDict):
    """One shape's cost as ``reference/sol_count.py`` counted it; the parent's roofline reads it."""

    label: str
    input_bytes: int
    param_bytes: int
    output_bytes: int
    flops: dict[str, float]  # by class: tensor (16-bit), tf32, fp32 and other
    flops_by_op: dict[str, float]  # the 16 costliest aten ops
    dtypes: list[str]  # floating dtypes of the inputs, outputs and parameters
    counted_on: str  # "meta" or "device"


class SolCounts(TypedDict):
    kind: Literal["sol_counts"]
    shapes: list[ShapeCounts]


class SolMissing(TypedDict):
    kind: Literal["sol_missing"]
    message: str


class Failure(TypedDict):
    kind: Literal["failure"]
    step: str  # what the problem's code was doing
    message: str
    traceback: str
    oom: bool  # it ran out of memory: the machine's state may be to blame


# -- the constructor's record (init.pt, written by the jail, read by runners and a jail started again) --


class RngState(TypedDict):
    torch: torch.Tensor
    python: list[Any]  # random.getstate() as lists: [version, internal state, gauss]
    cuda: torch.Tensor | None


class ModelInit(TypedDict):
    args: list[Any]  # free-form: what the problem's get_init_inputs() returned
    rng: RngState  # the RNG state right before Model(*args), so every copy gets the same weights

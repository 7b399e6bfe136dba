"""The reference jail's process: ``python -P -m stark_mcp.evaluator.reference.serve SOCK_FD``.

Started by the trusted worker in a jail of its own, one per loaded problem, the way it starts the
problem's baseline runner. It imports the problem and answers the worker's requests, one frame
each way on SOCK_FD (``trusted/reference_jail.py`` has the other end; ``common/reference_wire.py``
types every frame):

  {"op": "load", "path", "module", "device", "seed", "plan_seed", "sys_path", "out", "init"}
      -> {"kind": "loaded", "shapes", "param_bytes", "planned_input_bytes", "fp64", "fp64_note"}
  {"op": "probe", "shape", "seeds": [a, b]} -> {"kind": "shape", "spec"}
  {"op": "drop_fp64", "note"} -> {"kind": "ok"}
  {"op": "region", "nbytes"}, then the region's fd (SCM_RIGHTS) -> {"kind": "ok"}
  {"op": "call", "shape", "calls": [[number, seed], ...], "release"}
      -> {"kind": "inputs", "calls": [{"tree", "args", "leaves"}, ...], "kept"}: several calls' inputs
      at once, packed one after another (``trusted/problem.py``, ``calls_per_request``)
  {"op": "reference", "number", "release"} -> {"kind": "outputs", "native", "ref64", "leaves"}
  {"op": "counts", "seed"} -> {"kind": "sol_counts", ...} | {"kind": "sol_missing", "message"}
  {"op": "trim"} -> {"kind": "ok"}: give the device what this process's allocator caches unused

A failure is ``{"kind": "failure", "step", "message", "traceback", "oom"}``. Tensors travel through
the worker's exchange region, packed from its start (``leaves``), never through frames. Standard
library and torch only.
"""

from __future__ import annotations

import gc
import os
import socket
import sys
import traceback
from typing import Any

import torch

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.common import reference_wire as rw
from stark_mcp.evaluator.common.regions import Leaf, Region, layout_groups
from stark_mcp.evaluator.common.shapes import OutputNode, output_tree, specs_of
from stark_mcp.evaluator.reference import sol_count
from stark_mcp.evaluator.reference.problem_code import ProblemCode, ProblemCodeFailure, describe
from stark_mcp.evaluator.sandbox.launch import die_with_parent

MAX_ANSWER = frames.MAX_FRAME


class ReferenceServer:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.code: ProblemCode | None = None
        self.region: Region | None = None
        self.device = "cpu"

    def serve(self) -> None:
        while True:
            request = frames.recv(self.fd)  # the worker's: trusted, read as its reference_wire.Request
            if request is None or request.get("op") == "close":
                return
            op = str(request.get("op"))
            try:
                self.code_release(request.get("release"))
                answer = getattr(self, f"op_{op}")(request)
            except ProblemCodeFailure as fail:
                answer = _failure(fail.step, fail.message, fail.tb, fail.oom)
            except BaseException as exc:  # noqa: BLE001 - the problem's code can raise anything
                oom = isinstance(exc, (torch.OutOfMemoryError, MemoryError))
                answer = _failure(op, describe(exc), traceback.format_exc(), oom)
            try:
                frames.send(self.fd, answer)
            except ValueError as exc:  # an answer larger than a frame (a huge output structure)
                frames.send(self.fd, _failure(op, str(exc), "", False))

    def code_release(self, numbers: Any) -> None:
        if self.code is not None and isinstance(numbers, list):
            self.code.release([int(n) for n in numbers])

    # -- requests ------------------------------------------------------------------------------------
    def op_load(self, r: rw.LoadRequest) -> rw.Loaded:
        self.device = str(r["device"])
        if self.device.startswith("cuda"):
            # The context first, as the worker had it when it imported problems: the exchange
            # region is mapped through the driver API, which needs it current.
            torch.cuda.init()
            torch.zeros(1, device=self.device)
        # The problem's own files are imported afresh by every jail (a new process each time), and
        # no bytecode is left behind that a same-second edit of the same size would make stale.
        sys.dont_write_bytecode = True
        for path in reversed(r.get("sys_path") or []):
            if path not in sys.path:
                sys.path.insert(0, str(path))
        init = None
        if r.get("init"):  # started again: the same constructor arguments and RNG state as before
            init = torch.load(str(r["init"]), weights_only=True)
        code = self.code = ProblemCode(str(r["path"]), str(r["module"]), self.device)
        code.load(int(r["seed"]), init)
        if init is None:
            torch.save(code.init, os.path.join(str(r["out"]), "init.pt"))
        planned = code.planned_input_bytes(int(r["plan_seed"])) if r.get("plan", True) else 0
        return {
            "kind": "loaded",
            "shapes": len(code.kwargs),
            "param_bytes": code.param_bytes(),
            "planned_input_bytes": planned,
            "fp64": code.model64 is not None,
            "fp64_note": code.fp64_note,
        }

    def op_probe(self, r: rw.ProbeRequest) -> rw.ShapeProbed:
        code = self._code()
        a, b = (int(s) for s in r["seeds"])
        spec = code.probe(int(r["shape"]), (a, b))
        return {"kind": "shape", "spec": spec.to_wire(), "fp64": code.model64 is not None,
                "fp64_note": code.fp64_note}

    def op_drop_fp64(self, r: rw.DropFp64Request) -> rw.Ok:
        self._code().drop_float64(str(r.get("note", "")))
        return {"kind": "ok"}

    def op_region(self, r: rw.RegionRequest) -> rw.Ok:
        _msg, fds, _flags, _addr = socket.recv_fds(self.sock, 1, 1)
        if len(fds) != 1:
            raise RuntimeError("the exchange region's descriptor did not arrive")
        if self.region is not None:
            self.region.close()
        try:
            self.region = Region.attach(fds[0], int(r["nbytes"]), self.device)
        finally:
            os.close(fds[0])
        # the region comes after the shape probes: their inputs and outputs are garbage
        self.op_trim({"op": "trim"})
        return {"kind": "ok"}

    def op_trim(self, r: rw.TrimRequest) -> rw.Ok:
        """Runners are other processes: what this one's caching allocator keeps reserved but unused
        is memory their allocations cannot have (``driver.give_back_cached``, for the worker)."""
        if self.device.startswith("cuda"):
            gc.collect()
            torch.cuda.empty_cache()
        return {"kind": "ok"}

    def op_call(self, r: rw.CallRequest) -> rw.Inputs:
        code = self._code()
        shape = int(r["shape"])
        drawn = [code.new_call(int(number), shape, int(seed)) for number, seed in r["calls"]]
        packed = self._write([tensors for _tree, tensors, _args in drawn], code.shape_step(shape))
        calls: list[rw.DrawnCall] = [
            {"tree": tree, "args": args, "leaves": leaves}
            for (tree, _tensors, args), leaves in zip(drawn, packed, strict=True)
        ]
        # ``kept``: the calls whose inputs this jail holds (the worker lets them go as it judges them)
        return {"kind": "inputs", "calls": calls, "kept": len(code.calls)}

    def op_reference(self, r: rw.ReferenceRequest) -> rw.Outputs:
        code = self._code()
        native, ref64 = code.reference(int(r["number"]))
        tree, tensors = output_tree(native)
        answer: rw.Outputs = {"kind": "outputs", "native": tree, "ref64": None, "leaves": []}
        if ref64 is not None:
            tree64, tensors64 = output_tree(ref64)
            answer["ref64"] = _shift_leaves(tree64, len(tensors))
            tensors = tensors + tensors64
        answer["leaves"] = self._write([tensors], "Model.forward")[0]
        return answer

    def op_counts(self, r: rw.CountsRequest) -> rw.SolCounts | rw.SolMissing:
        try:
            return sol_count.count_problem(self._code(), int(r["seed"]))
        except BaseException as exc:  # noqa: BLE001 - a problem whose forward cannot be counted has no floor
            return {"kind": "sol_missing", "message": describe(exc)[:1500]}

    # -- helpers -------------------------------------------------------------------------------------
    def _code(self) -> ProblemCode:
        if self.code is None:
            raise RuntimeError("no problem loaded")
        return self.code

    def _write(self, groups: list[list[torch.Tensor]], step: str) -> list[list[Leaf]]:
        """Pack each group of tensors into the exchange region, one after another from its start,
        with one synchronisation for all; each group's leaves."""
        region = self.region
        if region is None:
            raise RuntimeError("no exchange region")
        packed, end = layout_groups([specs_of(tensors) for tensors in groups])
        if end > region.size:
            raise ProblemCodeFailure(
                step,
                f"{end} bytes of tensors where the shapes probed at load need at most {region.size}: "
                "the problem's tensors changed size between calls",
            )
        for tensors, leaves in zip(groups, packed, strict=True):
            for leaf, tensor in zip(leaves, tensors, strict=True):
                if int(leaf["nbytes"]):
                    region.view(leaf).copy_(tensor.detach())
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()  # written before the worker reads them (another process)
        return packed


def _shift_leaves(tree: OutputNode, by: int) -> OutputNode:
    if tree["k"] == "tensor":
        return {**tree, "leaf": int(tree["leaf"]) + by}
    if tree["k"] == "seq":
        return {**tree, "items": [_shift_leaves(x, by) for x in tree["items"]]}
    return tree


def _failure(step: str, message: str, tb: str, oom: bool) -> rw.Failure:
    return {"kind": "failure", "step": step, "message": message[:4000], "traceback": tb[-8000:], "oom": oom}


def main(argv: list[str]) -> None:
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    die_with_parent()
    home = os.environ.get("HOME", "/tmp")
    os.makedirs(home, exist_ok=True)
    os.environ["TRITON_HOME"] = home  # as in a runner: the zygote imported Triton under our HOME
    # The reference's own CPU work on one thread, as the worker did it: intra-op threads spinning
    # against the runners' on a small loaded machine slow everything down.
    torch.set_num_threads(1)
    sock = socket.socket(fileno=int(argv[0]))
    frames.send(sock.fileno(), {"kind": "hello", "pid": os.getpid()})
    ReferenceServer(sock).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # no interpreter teardown: the problem's atexit hooks have nothing to say

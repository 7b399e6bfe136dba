"""The worker's side of the reference jail (``trusted/problem.py`` over ``trusted/reference_jail.py``):
a real jail process, asked for inputs and reference outputs; what comes back through the exchange
region is the objects the comparison saw when the worker ran the reference itself."""

from __future__ import annotations

import gc
import os
import socket
import sys
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator.common.regions import Region
from stark_mcp.evaluator.common.shapes import ShapeSpec
from stark_mcp.evaluator.reference.problem_code import ProblemCode
from stark_mcp.evaluator.reference.serve import ReferenceServer
from stark_mcp.evaluator.sandbox.env import scrub_env
from stark_mcp.evaluator.sandbox.launch import JailSpec, Mount
from stark_mcp.evaluator.sandbox.levels import SandboxPolicy, detect
from stark_mcp.evaluator.trusted import compare
from stark_mcp.evaluator.trusted.problem import (
    MAX_CALLS_PER_REQUEST,
    JailRequestTimes,
    LoadedProblem,
    ProblemFailure,
    calls_per_request,
)
from stark_mcp.evaluator.trusted.reference_jail import ReferenceJail

PROBLEM = '''
import os

import torch
import torch.nn as nn

os.environ["STARK_REFJAIL_IMPORTED"] = str(os.getpid())  # module-level code: whose process is it?
SHAPES = [{"rows": 4}, {"rows": 6}]


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(width))

    def forward(self, a, pair, k):
        b = pair[1]
        out = a * self.scale + b
        return out, (float(a.sum()), (out * k).cpu()), None, torch.max(out, dim=0), object()


def get_inputs(rows=4):
    return [torch.randn(rows, 8), ("tag", torch.randn(rows, 8)), 3]


def get_init_inputs():
    return [8]
'''


def _problem(tmp_path: Path, source: str = PROBLEM, device: str = "cpu") -> LoadedProblem:
    folder, out = tmp_path / "ref", tmp_path / "ref" / "out"
    out.mkdir(parents=True)
    (folder / "problem.py").write_text(source)
    info = detect(SandboxPolicy(isolation="process"))  # host paths inside: the quickest jail

    def start() -> ReferenceJail:
        spec = JailSpec(argv=[], env=scrub_env(os.environ, {}), name="reference",
                        mounts=[Mount(str(folder), "/tmp/job"), Mount(str(out), "/tmp/out", writable=True)])
        jail = ReferenceJail()
        jail.start(spec, info)
        return jail

    request = {"path": str(folder / "problem.py"), "module": "stark_problem_t", "device": device,
               "sys_path": [], "out": str(out)}
    return LoadedProblem("t", "t", device, start(), request, JailRequestTimes(60.0, 60.0), start)


@pytest.mark.slow  # two jails, each importing torch
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")])])
def test_inputs_and_reference_outputs_come_back_as_the_objects_the_comparison_saw(
    tmp_path: Path, device: str
) -> None:
    # On a GPU the exchange region is device memory the jail maps through the driver (cudadrv.py).
    problem = _problem(tmp_path, device=device)
    try:
        problem.load()
        # The worker's process imported nothing of the problem and ran none of its code.
        assert "stark_problem_t" not in sys.modules and "STARK_REFJAIL_IMPORTED" not in os.environ
        assert [s.label for s in problem.shapes] == ["rows=4", "rows=6"] and problem.fp64
        assert problem.param_bytes == 8 * 4 and (tmp_path / "ref" / "out" / "init.pt").exists()
        assert all(isinstance(s, ShapeSpec) and s.arg_count == 2 for s in problem.shapes)
        call = problem.new_call(1)
        a, b = call.tensors
        assert a.shape == (6, 8) and call.args == ["tag", 3] and str(a.device) == device
        native, ref64, note = problem.reference(call)
        # Computed here from the pristine copies: the jail ran the reference on the same inputs.
        weights = torch.load(tmp_path / "ref" / "out" / "init.pt", weights_only=True)
        torch.set_rng_state(weights["rng"]["torch"])
        scale = torch.randn(8).to(device)
        out = a * scale + b
        # The problem hands its second output back on the CPU whatever the device: so must the jail.
        expected = (out, (float(a.sum()), (out * 3).cpu()), None, torch.max(out, dim=0), object())
        got, want = compare.encode_reference(native), compare.encode_reference(expected)
        assert _structure(got) == _structure(want)
        assert all(torch.equal(x, y) for x, y in zip(_leaves(got), _leaves(want), strict=True))
        assert type(native[3]).__name__ == "max" and native[1][0] == pytest.approx(float(a.sum()))
        assert ref64 is not None and ref64[0].dtype == torch.float64 and note == ""
        assert torch.allclose(ref64[0].float(), out, atol=1e-5) and native[1][1].device.type == "cpu"
        # A call let go is dropped by the jail with the next request.
        del call, a, b
        gc.collect()
        assert problem._released
        kept = problem.new_call(0)
        # (Small inputs come several calls to a request: shape 1's request drew numbers 1 to n.)
        assert problem._released == [] and kept.number == calls_per_request(problem.shapes[1].input_bytes) + 1
        # A jail that died is started again from its init file: the same weights, the same shapes.
        problem.jail.close()
        with pytest.raises(ProblemFailure, match="reference jail"):
            problem.new_call(0)
        problem.reopen()
        again = problem.new_call(0)
        native, _, _ = problem.reference(again)
        assert torch.equal(native[0], again.tensors[0] * scale[: 8] + again.tensors[1])
    finally:
        problem.close()
    assert not problem.jail.alive()


def test_a_request_draws_inputs_for_several_small_calls_and_large_ones_come_one_at_a_time() -> None:
    assert calls_per_request(0) == calls_per_request(1024) == MAX_CALLS_PER_REQUEST
    sizes = [1 << k for k in range(10, 36)]
    counts = [calls_per_request(n) for n in sizes]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 1
    # What is drawn ahead, held in the jail, the exchange region and the worker, stays bounded.
    assert max((calls_per_request(n) - 1) * n for n in sizes) <= 32 << 20


@pytest.mark.slow  # a jail importing torch
def test_calls_drawn_together_each_have_their_own_inputs_and_reference(tmp_path: Path) -> None:
    problem = _problem(tmp_path)
    requests: list[dict] = []
    try:
        problem.load()
        ask = problem.jail.request

        def counted(frame: dict, *args: object, **kwargs: object) -> dict:
            requests.append(frame)
            return ask(frame, *args, **kwargs)

        problem.jail.request = counted  # type: ignore[method-assign]
        per_request = calls_per_request(problem.shapes[0].input_bytes)
        assert per_request == MAX_CALLS_PER_REQUEST
        assert problem.exchange is not None
        assert problem.exchange.size >= per_request * problem.shapes[0].input_bytes
        calls = [problem.new_call(0) for _ in range(per_request + 1)]
        draws = [f for f in requests if f["op"] == "call"]
        assert len(draws) == 2 and len(draws[0]["calls"]) == per_request
        seeds = [seed for f in draws for _number, seed in f["calls"]]
        assert len(set(seeds)) == len(seeds)  # a secret seed of its own for every call
        assert len({c.number for c in calls}) == len(calls)
        assert len({float(c.tensors[0].sum()) for c in calls}) == len(calls)
        weights = torch.load(tmp_path / "ref" / "out" / "init.pt", weights_only=True)
        torch.set_rng_state(weights["rng"]["torch"])
        scale = torch.randn(8)
        # The reference of a call from the middle of a batch, and of the last: each on its own inputs.
        for call in (calls[per_request // 2], calls[per_request - 1], calls[-1]):
            native, _ref64, _note = problem.reference(call)
            assert torch.equal(native[0], call.tensors[0] * scale + call.tensors[1])
        # Calls let go are dropped by the jail, drawn-ahead ones kept until their turn.
        kept_before = problem.kept_in_jail
        del calls, call, native
        gc.collect()
        problem.new_call(1)
        assert problem.kept_in_jail < kept_before + per_request
        # A suspended jail's drawn calls are gone with it; the next call is drawn afresh.
        problem.suspend()
        problem.reopen()
        again = problem.new_call(0)
        native, _, _ = problem.reference(again)
        assert torch.equal(native[0], again.tensors[0] * scale + again.tensors[1])
    finally:
        problem.close()


def _structure(tree: dict) -> object:
    if tree["k"] == "tensor":
        return ("tensor", tree["dtype"], tuple(tree["shape"]), tree["device"])
    if tree["k"] == "seq":
        return (tree["type"], tuple(_structure(x) for x in tree["items"]))
    return (tree["k"], tree.get("type"), tree.get("v") if tree["k"] != "scalar" else "scalar")


def _leaves(tree: dict) -> list[torch.Tensor]:
    if tree["k"] == "tensor":
        return [tree["t"]]
    if tree["k"] == "seq":
        return [t for x in tree["items"] for t in _leaves(x)]
    return []


@pytest.mark.slow
def test_a_failure_of_the_problems_code_names_its_step_and_the_jail_serves_on(tmp_path: Path) -> None:
    line = "        b = pair[1]\n"
    source = PROBLEM.replace(line, line + "        assert a.shape[0] != 6, 'no six'\n")
    problem = _problem(tmp_path, source)
    try:
        with pytest.raises(ProblemFailure) as caught:
            problem.load()
        assert caught.value.step == "get_inputs(rows=6)", caught.value
        assert "no six" in caught.value.message
        assert "AssertionError" in caught.value.tb and problem.jail.alive()
    finally:
        problem.close()


def test_the_jail_holds_nothing_of_a_released_call_without_waiting_for_a_collection(tmp_path: Path) -> None:
    """Reference cycles hold tensors until the cyclic collector runs, which counts objects, not
    bytes: a jail under a 512 MiB cap was killed after a dozen references of 8 MB inputs."""
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    code = ProblemCode(str(path), "stark_problem_cycles", "cpu")
    code.load(1)
    code.probe(0, (2, 3))
    ours, theirs = socket.socketpair()
    server = ReferenceServer(ours)
    server.code, server.device = code, "cpu"
    server.region, fd = Region.create(1 << 20, "cpu")
    os.close(fd)

    def tensors() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor)

    gc.collect()
    gc.disable()
    try:
        server.op_call({"shape": 0, "calls": [[0, 0]]})
        server.op_reference({"number": 0})
        code.release([0])
        held = tensors()
        for number in range(1, 6):
            server.op_call({"shape": 0, "calls": [[number, number]]})
            server.op_reference({"number": number})
            code.release([number])
        assert tensors() == held
    finally:
        gc.enable()
        ours.close(), theirs.close()
        server.region.close()

"""The harness inside a sandboxed runner: ``python -P -m stark_mcp.evaluator.untrusted.runner FDS...``.

Loads one module (a candidate's ``ModelNew``, or the problem's ``Model`` for a baseline), maps the
shared input and output regions, then serves calls: wait for GO, run the forward on the inputs the
worker just wrote, publish the outputs, answer DONE with the time it measured. A candidate controls
this whole process, so the worker believes none of it: it brackets each call with its own clock,
checks published outputs itself, and treats this file's reports as cross-checks and honest feedback.

Standard library and torch only.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import sys
import time
import traceback
from typing import Any

import torch

from stark_mcp.evaluator.common import control, frames
from stark_mcp.evaluator.common.regions import Region, dtype_of
from stark_mcp.evaluator.common.runner_wire import CallDone, Done, ProfileDone, Ready, RunnerSetup, SetupError
from stark_mcp.evaluator.common.shapes import InputNode
from stark_mcp.evaluator.sandbox.launch import die_with_parent
from stark_mcp.evaluator.untrusted import loading
from stark_mcp.evaluator.untrusted.jitwatch import JitWatch
from stark_mcp.evaluator.untrusted.kernel_list import kernel_totals, launches_from_trace
from stark_mcp.evaluator.untrusted.outputs import HarnessSpans, OutputForm, describe_and_publish
from stark_mcp.evaluator.untrusted.watch import FlagWatch, FunctionWatch

SETUP_TIMEOUT_S = 60.0  # after the fds arrive, the frame follows at once
CONNECT_TIMEOUT_S = 60.0  # the worker's socket exists before the jail starts; this bounds a lost one


class Runner:
    def __init__(
        self, setup: RunnerSetup, frames_fd: int, block: Any, go_bell: int, done_bell: int
    ) -> None:
        self.setup = setup
        self.frames_fd = frames_fd
        self.side = control.RunnerSide(block)
        self.go_bell, self.done_bell = go_bell, done_bell
        self.device = str(setup["device"])
        self.cuda = self.device.startswith("cuda")
        timing = setup.get("timing") or {}
        self.sleep_cycles = int(timing.get("sleep_cycles", 0))
        self.spin_s = float(timing.get("spin_s", 0.0))
        # The worker reads published CPU outputs from this process's memory (outputs.py says why).
        self.by_address = not self.cuda and setup.get("publish") == "address"
        self.functions = FunctionWatch()
        self.flags = FlagWatch()
        self.jit = JitWatch()
        self.model: Any = None
        self.ready: dict[tuple[int, int], Any] = {}  # (shape, slot): views not yet handed out
        self.ready_shape = -1
        self.takes_args: dict[int, bool] = {}
        self.output_forms: dict[int, list[OutputForm]] = {}
        self.last: Any = None
        self.inputs_region: Region | None = None
        self.outputs_region: Region | None = None
        self.harness = HarnessSpans()
        # Set when an outside profiler (Nsight Compute) wraps this process: the range it replays.
        self.nvtx = str((setup.get("profiling") or {}).get("nvtx") or "")

    # -- setup ---------------------------------------------------------------------------------------
    def load(self, fds: list[int]) -> None:
        s = self.setup
        regions = s["regions"]
        for name in ("inputs", "outputs"):
            spec = regions[name]
            region = Region.attach(fds[int(spec["index"])], int(spec["nbytes"]), self.device)
            setattr(self, f"{name}_region", region)
        self.harness = HarnessSpans(_span(self.inputs_region), _span(self.outputs_region))
        os.environ.update({str(k): str(v) for k, v in (s.get("env") or {}).items()})
        for path in reversed(s.get("sys_path") or []):
            sys.path.insert(0, str(path))
        init = torch.load(s["init_path"], weights_only=True)
        if s["mode"] == "reference":
            module = loading.load_module(s["module_path"], "problem")
            cls = module.Model
        else:
            loading.install_prebuilt(os.environ.get("TORCH_EXTENSIONS_DIR"))
            module = loading.import_candidate(s["module_path"])
            cls = getattr(module, "ModelNew", None)
            if cls is None:
                raise loading.Verdict(
                    "load_error", "no_model_new", "the candidate module defines no ModelNew"
                )
        try:
            model = loading.construct(cls, init, self.device)
        except BaseException as exc:
            raise loading.Verdict(
                "load_error",
                "constructor",
                f"ModelNew(...) failed: {loading.describe(exc)}",
                traceback.format_exc(),
            ) from None
        if s["mode"] != "reference":
            self.jit.install()  # after the import: the candidate's own Triton, if it uses Triton
        compile_mode = s.get("compile")
        if compile_mode:
            model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
        self.model = model
        if self.cuda and s.get("poison", True):
            loading.poison_cuda_allocator()
            torch.cuda.synchronize()
        self.shapes = s["shapes"]
        torch.set_grad_enabled(False)  # once, rather than a no_grad context on every timed call
        self.events = (
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            if self.cuda
            else None
        )

    # -- calls ---------------------------------------------------------------------------------------
    def _inputs(self, shape: int, slot: int, args: list[Any]) -> list[Any]:
        """Fresh tensor objects over the slot's memory (built ahead of a call when possible)."""
        assert self.inputs_region is not None
        spec = self.shapes[shape]["inputs"]
        leaves = spec["slots"][slot]

        def build(node: InputNode) -> Any:
            kind = node["k"]
            if kind == "tensor":
                return self.inputs_region.view(leaves[node["leaf"]])
            if kind == "arg":
                return args[node["i"]]
            items = [build(x) for x in node["items"]]
            return tuple(items) if node["type"] == "tuple" else items

        return list(build(spec["tree"]))

    def _outputs(self, shape: int) -> list[torch.Tensor] | list[OutputForm]:
        """Where each output leaf goes: views of the output region, or, when the worker reads the
        outputs from this process's memory, only their shapes and dtypes (made once per shape)."""
        assert self.outputs_region is not None
        leaves = self.shapes[shape]["outputs"]["leaves"]
        if not self.by_address:
            return [self.outputs_region.view(leaf) for leaf in leaves]
        if shape not in self.output_forms:
            self.output_forms[shape] = [
                OutputForm([int(d) for d in leaf["shape"]], dtype_of(str(leaf["dtype"]))) for leaf in leaves
            ]
        return self.output_forms[shape]

    def prepare(self, shape: int) -> None:
        """Build the next calls' views before their GO: fresh tensor objects for each slot, made
        only for the slot the last call consumed. Every call's CPU bracket holds this work, and
        how long it takes depends on what the forward left in the caches (an honest candidate's
        share of the harness ran 1.4x the reference's), so the less of it, the closer the two
        runners' shares. Non-tensor arguments (known only at GO) are filled in then. On a GPU this
        runs after DONE, off the clock, so every slot is built afresh there, as before."""
        if shape != self.ready_shape or self.cuda:
            self.ready, self.ready_shape = {}, shape
        if shape not in self.takes_args:
            self.takes_args[shape] = any_arg(self.shapes[shape]["inputs"]["tree"])
        if self.takes_args[shape]:
            return
        for slot in range(len(self.shapes[shape]["inputs"]["slots"])):
            if (shape, slot) not in self.ready:
                self.ready[(shape, slot)] = (self._inputs(shape, slot, []), self._outputs(shape))

    def call(self, shape: int, slot: int, args: list[Any]) -> tuple[int, CallDone]:
        if self.cuda and self.sleep_cycles:
            # First: the GPU sleeps while this process prepares and launches, so the Python below
            # overlaps with device time instead of adding to every call's wall time.
            torch.cuda._sleep(self.sleep_cycles)
        ready = self.ready.pop((shape, slot), None)
        inputs, expected = (
            ready if ready is not None else (self._inputs(shape, slot, args), self._outputs(shape))
        )
        keep: list[torch.Tensor] | None = [] if self.by_address else None  # outputs the worker reads
        if self.cuda:
            start, end = self.events
            start.record()
            out = self.model(*inputs)
            end.record()
            tree, flags = describe_and_publish(out, expected, inputs, harness=self.harness)
            torch.cuda.synchronize()
            reported_ns = int(start.elapsed_time(end) * 1e6)
        else:
            t0 = time.process_time_ns()  # CPU time, as the worker measures it from outside
            # The previous call's outputs are freed inside the clock: returning their pages costs as
            # much as the forward's own allocations (a fresh 4 MB output: ~0.1 ms on a 2-core VM),
            # and outside it that cost would count as the harness's, unlike the baseline's, whose
            # allocator recycles its temporaries. Both runners' reports then hold the same work.
            self.last = None
            out = self.model(*inputs)
            reported_ns = time.process_time_ns() - t0
            tree, flags = describe_and_publish(out, expected, inputs, keep, self.harness)
        self.last = (out, inputs, keep)  # GPU: freed after DONE, off the timed path; CPU: by the next call
        meta: CallDone = {"ok": True, "out": tree, "flags": flags}
        if self.jit.installed:
            meta["jit"] = self.jit.count  # compilations and autotuning runs so far
        return reported_ns, meta

    def profile(self, shape: int, slot: int, args: list[Any]) -> ProfileDone:
        """One forward for a profiler. Under an outside tool (Nsight Compute), only an NVTX range
        around it, which tells the tool what to replay. Otherwise the torch profiler's device time
        per kernel name (the worker computes the own-kernel share) and the launches' shapes."""
        inputs = self._inputs(shape, slot, args)
        if self.nvtx:
            # Private copies, made outside the range: the replayed kernels then touch only memory of
            # this process's own allocator, never the worker's shared mapping.
            inputs = _private(inputs)
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push(self.nvtx)
            try:
                self.model(*inputs)
                if self.cuda:
                    torch.cuda.synchronize()
            finally:
                if self.cuda:
                    torch.cuda.nvtx.range_pop()
            return {"ok": True}
        if not self.cuda:
            return {"ok": True}
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self.model(*inputs)
            torch.cuda.synchronize()
        kernels = kernel_totals((evt.name, str(evt.device_type), _device_us(evt)) for evt in prof.events())
        meta: ProfileDone = {"ok": True, "kernels": kernels}
        try:  # launch shapes are only in the exported trace
            path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"stark-trace-{os.getpid()}.json")
            prof.export_chrome_trace(path)
            with open(path) as fh:
                meta["launches"] = launches_from_trace(json.load(fh))
            os.unlink(path)
        except Exception:  # noqa: BLE001 - shapes are a bonus; the kernel list stands without them
            traceback.print_exc()
        return meta

    def serve(self) -> None:
        seq, tampered = 0, []
        while True:
            control.wait_for(self.side.go_seq, seq + 1, self.go_bell, spin_s=self.spin_s, timeout=1e9)
            seq, shape, slot, args = self.side.go()
            if slot & control.EXIT:
                self.side.done(seq, 0, {"ok": True})
                control.ring(self.done_bell)
                self.exit()
            if slot & control.PROFILE:
                meta: Done
                try:
                    meta = self.profile(shape, slot & ~control.PROFILE, args)
                except BaseException as exc:  # noqa: BLE001 - a profile is optional
                    traceback.print_exc()
                    meta = {"ok": False, "message": loading.describe(exc)[:500]}
                self.side.done(seq, 0, meta)
                control.ring(self.done_bell)
                continue
            try:
                reported_ns, meta = self.call(shape, slot, args)
                if tampered:  # found after the previous call: reported now
                    meta = {
                        "ok": False,
                        "status": "rejected",
                        "reason": "tamper",
                        "message": f"harness function(s) replaced: {', '.join(tampered)}",
                    }
            except BaseException as exc:  # noqa: BLE001 - every failure of the forward is a verdict
                traceback.print_exc()
                reported_ns = 0
                meta = {
                    "ok": False,
                    "status": "runtime_error",
                    "reason": "exception",
                    "message": f"forward raised {loading.describe(exc)}"[:2000],
                }
            if not self.cuda:
                # The CPU's trusted clock is the jail's CPU time, read as soon as DONE lands: work
                # after DONE would fall on this call or the next by a race, which made every runner's
                # per-call brackets bimodal and the medians of two runners of the same code apart.
                tampered = self.between_calls(shape)
            self.side.done(seq, reported_ns, meta)
            control.ring(self.done_bell)
            if self.cuda:  # the GPU's trusted clock is wall time: this work stays off it
                tampered = self.between_calls(shape)

    def between_calls(self, shape: int) -> list[str]:
        """Free the last call's objects (on a GPU; the CPU's next call frees them on its clock),
        check our own functions, build the next views."""
        if self.cuda:
            self.last = None
        tampered = self.functions.replaced()
        self.prepare(shape)
        return tampered

    def exit(self) -> None:
        """Leave when the worker asks (a runner under an outside tool): through libc's exit, so the
        tool's injected library runs its exit handlers and writes out what it measured."""
        sys.stdout.flush()
        sys.stderr.flush()
        if self.cuda:
            with contextlib.suppress(BaseException):  # a faulted context cannot synchronize: leave anyway
                torch.cuda.synchronize()
        import ctypes

        ctypes.CDLL(None).exit(0)


def _span(region: Region | None) -> tuple[int, int]:
    if region is None or region.flat is None:
        return (0, 0)
    start = int(region.flat.data_ptr())
    return (start, start + int(region.size))


def _private(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_private(v) for v in value)
    return value


def _device_us(evt: Any) -> float:
    us = getattr(evt, "device_time", None)
    if us is None:
        us = getattr(evt, "cuda_time", 0.0)
    return float(us or 0.0)


def any_arg(node: InputNode) -> bool:
    if node["k"] == "arg":
        return True
    return any(any_arg(x) for x in node.get("items", []))


def connect(path: str, timeout: float = CONNECT_TIMEOUT_S) -> tuple[int, int, int, int]:
    """Under a launcher that may not pass file descriptors on (a profiler, a sanitizer), the runner
    fetches them itself: it connects to the worker's socket at ``path`` and receives the control
    block and the two doorbells; the connection then carries the frames."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    _msg, fds, _flags, _addr = socket.recv_fds(sock, 1, 3)
    if len(fds) != 3:
        os._exit(0)
    return sock.detach(), fds[0], fds[1], fds[2]


def main(argv: list[str]) -> None:
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    die_with_parent()
    if argv[0] == "--connect":
        frames_fd, block_fd, go_bell, done_bell = connect(argv[1])
    else:
        frames_fd, block_fd, go_bell, done_bell = (int(x) for x in argv[:4])
    home = os.environ.get("HOME", "/tmp")
    os.makedirs(home, exist_ok=True)
    # Triton reads its home folder's default when first imported, and the zygote this runner was
    # forked from imported it under the evaluator's own HOME (read-only in here): torch.compile's
    # baselines then failed with "Permission denied: '/root/.triton'". This jail's home it is.
    os.environ["TRITON_HOME"] = home
    if torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "x") != "":
        torch.zeros(1, device="cuda")  # a spare initializes CUDA while it waits for work
        with contextlib.suppress(ImportError):
            import triton  # noqa: F401  (likewise Triton, which candidates import: ~0.5 s of their load)
    sock = socket.socket(fileno=frames_fd)
    # Hello, before any candidate code: the kernel tells the worker which process sent it, and the
    # worker opens this process's memory to read published CPU outputs (trusted/runner_memory.py).
    sock.send(b"H")
    _msg, fds, _flags, _addr = socket.recv_fds(sock, 1, 8)  # blocks until the worker assigns work
    if not fds:
        os._exit(0)
    setup: RunnerSetup | None = frames.recv(frames_fd, timeout=SETUP_TIMEOUT_S)  # type: ignore[assignment]
    if setup is None:
        os._exit(0)
    threads = int(setup.get("threads") or 0)
    if threads:
        torch.set_num_threads(threads)
    runner = Runner(setup, frames_fd, control.attach(block_fd), go_bell, done_bell)
    try:
        runner.load(fds)
        changed = runner.flags.changed()
        # Collections then scan only what calls allocate, not everything imported so far: the harness's
        # share of each call's CPU time stops depending on what the candidate (or torch) loaded.
        gc.collect()
        gc.freeze()
        ready: Ready = {"kind": "ready", "flags_changed": changed}
        frames.send(frames_fd, ready)
    except loading.Verdict as v:
        frames.send(frames_fd, v.frame())
        sys.stderr.write(v.tb)
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        failed: SetupError = {
            "kind": "error",
            "status": "runtime_error",
            "reason": "exception",
            "message": f"setup failed: {loading.describe(exc)}"[:4000],
            "traceback": tb[-8000:],
        }
        frames.send(frames_fd, failed)
        os._exit(0)
    runner.serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # No interpreter teardown: candidate atexit hooks must not run after the last DONE.
        os._exit(0)

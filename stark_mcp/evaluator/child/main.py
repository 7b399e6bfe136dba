"""Entry point of every evaluator child process: ``python main.py MODE FD``.

The parent writes a JSON spec as the first stdin line and reads records from FD. This file and
its ``sc_*`` siblings import only the standard library and torch (the GPU box has nothing else).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import sc_guards as guards  # noqa: E402
import sc_harness as harness  # noqa: E402
import sc_proto as proto  # noqa: E402
from sc_timing import Timer  # noqa: E402

sys.path.remove(_HERE)  # candidate imports must not resolve to harness modules

import torch  # noqa: E402

Verdict = harness.Verdict


def run_probe(spec: dict[str, Any], ch: proto.Channel) -> None:
    info: dict[str, Any] = {"kind": "probe", "torch": str(torch.__version__), "cuda": torch.cuda.is_available()}
    if info["cuda"]:
        props = torch.cuda.get_device_properties(0)
        info.update(device_name=props.name, capability=f"{props.major}.{props.minor}",
                    l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0), count=torch.cuda.device_count())
    ch.send(info)


def run_check(spec: dict[str, Any], ch: proto.Channel) -> None:
    """Dynamic problem checks, step by step, so the error names the step that failed."""
    device = spec["device"]
    step = "import"
    try:
        problem = harness.load_module(spec["problem_path"], "stark_problem")
        step = "get_init_inputs() / Model(...)"
        model = harness.build_model(problem, problem.Model, spec["init_seed"], device)
        step = "get_inputs()"
        inputs = harness.make_inputs(problem, spec["trial_seed"], device)
        step = "Model.forward"
        with torch.no_grad():
            model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    except BaseException as exc:
        ch.send({"kind": "error", "status": "problem", "reason": step,
                 "message": harness.describe(exc), "traceback": traceback.format_exc()})
        return
    ch.send({"kind": "ok"})


def run_build(spec: dict[str, Any], ch: proto.Channel) -> None:
    try:
        harness.import_candidate(spec["candidate_path"])
    except Verdict as v:
        record = v.record()
        record["cuda_unavailable"] = harness.looks_like_cuda_unavailable(v.message + v.tb)
        ch.send(record)
        return
    ch.send({"kind": "ok"})


def run_reference(spec: dict[str, Any], ch: proto.Channel) -> None:
    device = spec["device"]
    try:
        problem = harness.load_module(spec["problem_path"], "stark_problem")
        model = harness.build_model(problem, problem.Model, spec["init_seed"], device)
    except BaseException as exc:
        ch.send({"kind": "error", "status": "problem", "reason": "load",
                 "message": harness.describe(exc), "traceback": traceback.format_exc()})
        return
    model64: Any = None
    note = ""
    try:
        model64 = harness.double_model(model)
    except BaseException as exc:
        note = f"the model cannot be converted to float64: {harness.describe(exc)}"
    for trial, seed in enumerate(spec["trial_seeds"]):
        try:
            inputs = harness.make_inputs(problem, seed, device)
            inputs64 = harness.to_double(harness.to_device(guards.clone_tree(inputs), device))
            with torch.no_grad():
                native = model(*inputs)
            native_rec = proto.encode(native)
            del native
        except BaseException as exc:
            ch.send({"kind": "error", "status": "problem", "reason": "forward",
                     "message": harness.describe(exc), "traceback": traceback.format_exc()})
            return
        ref64 = None
        if model64 is not None:
            try:
                with torch.no_grad(), harness.default_dtype(torch.float64):
                    ref64 = proto.encode(model64(*inputs64))
            except BaseException as exc:
                note = f"the model cannot run in float64: {harness.describe(exc)}"
                model64 = None
        ch.send({"kind": "reference", "trial": trial, "native": native_rec, "ref64": ref64, "note": note})
    ch.send({"kind": "done"})


def _forward_checked(model: Any, inputs: list[Any], device: str) -> tuple[Any, dict[str, Any] | None]:
    """One correctness call: returns the encoded output, or a rejection record."""
    pristine = guards.clone_tree(inputs)
    with torch.no_grad():
        out = model(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    changed = guards.mutated_inputs(inputs, pristine)
    if changed:
        return None, {"kind": "error", "status": "rejected", "reason": "input_mutated",
                      "message": f"forward modified its input argument(s) at position(s) {changed}"}
    if guards.aliases_input(out, inputs):
        return None, {"kind": "error", "status": "rejected", "reason": "output_aliases_input",
                      "message": "an output shares storage with an input tensor"}
    return proto.encode(out), None


def run_candidate(spec: dict[str, Any], ch: proto.Channel) -> None:
    device = spec["device"]
    refs = guards.capture_functions()
    flags_before = guards.snapshot_flags()
    timer = Timer(device, spec["timing"])

    def check_integrity(where: str) -> None:
        bad = guards.tampered(refs)
        if bad:
            raise Verdict("rejected", "tamper", f"{where}: harness function(s) replaced: {', '.join(bad)}")
        changes = guards.flag_changes(flags_before, guards.snapshot_flags())
        if changes:
            raise Verdict("rejected", "global_flag_changed", f"{where}: global torch flags changed: "
                          + "; ".join(changes))

    ch.send({"kind": "phase", "phase": "load"})
    try:
        problem = harness.load_module(spec["problem_path"], "stark_problem")
    except BaseException as exc:
        raise Verdict("problem", "import", harness.describe(exc), traceback.format_exc()) from None
    module = harness.import_candidate(spec["candidate_path"])
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        raise Verdict("load_error", "no_model_new", "the candidate module defines no ModelNew")
    try:
        model = harness.build_model(problem, cls, spec["init_seed"], device)
    except BaseException as exc:
        raise Verdict("load_error", "constructor", f"ModelNew(...) failed: {harness.describe(exc)}",
                      traceback.format_exc()) from None
    check_integrity("after import")
    if device == "cuda":
        guards.poison_cuda_allocator()

    ch.send({"kind": "phase", "phase": "correctness"})
    for trial, seed in enumerate(spec["trial_seeds"]):
        try:
            inputs = harness.make_inputs(problem, seed, device)
        except BaseException as exc:
            raise Verdict("problem", "get_inputs()", harness.describe(exc), traceback.format_exc()) from None
        try:
            encoded, rejection = _forward_checked(model, inputs, device)
        except BaseException as exc:
            raise Verdict("runtime_error", "exception", f"forward raised {harness.describe(exc)}",
                          traceback.format_exc()) from None
        if rejection is not None:
            ch.send(rejection)
            return
        ch.send({"kind": "outputs", "trial": trial, "outputs": encoded})
        check_integrity("after forward")

    ch.send({"kind": "await"})
    command = proto.read_json_line()
    if command is None or command.get("cmd") != "time":
        return

    ch.send({"kind": "phase", "phase": "timing"})
    try:
        input_sets = [harness.make_inputs(problem, s, device) for s in spec["timing_seeds"]]
        with torch.no_grad():
            result = timer.run(model, input_sets)
        del input_sets
        recheck_inputs = harness.make_inputs(problem, spec["trial_seeds"][0], device)
        encoded, rejection = _forward_checked(model, recheck_inputs, device)
    except BaseException as exc:
        raise Verdict("runtime_error", "exception", f"forward raised during timing: {harness.describe(exc)}",
                      traceback.format_exc()) from None
    if rejection is not None:
        ch.send(rejection)
        return
    check_integrity("after timing")
    ch.send({"kind": "timing", **result})
    ch.send({"kind": "outputs", "trial": "recheck", "outputs": encoded})
    if device == "cuda":
        ch.send({"kind": "kernels", "kernels": profile_kernels(model, recheck_inputs)})
    ch.send({"kind": "done"})


def profile_kernels(model: Any, inputs: list[Any]) -> list[list[Any]] | None:
    """Device time per kernel name over one forward (for own-kernel attribution in the parent)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
        totals: dict[str, float] = {}
        for evt in prof.events():
            if evt.device_type != torch.autograd.DeviceType.CUDA:
                continue
            us = getattr(evt, "device_time", None)
            if us is None:
                us = getattr(evt, "cuda_time", 0.0)
            totals[evt.name] = totals.get(evt.name, 0.0) + float(us or 0.0)
        return [[name, us] for name, us in totals.items()]
    except Exception:
        return None


def run_baseline(spec: dict[str, Any], ch: proto.Channel) -> None:
    import time

    device, name = spec["device"], spec["name"]
    timer = Timer(device, spec["timing"])
    try:
        problem = harness.load_module(spec["problem_path"], "stark_problem")
        model = harness.build_model(problem, problem.Model, spec["init_seed"], device)
        fn: Any = model
        if name == "compile_default":
            fn = torch.compile(model)
        elif name == "compile_max_autotune":
            fn = torch.compile(model, mode="max-autotune")
        input_sets = [harness.make_inputs(problem, s, device) for s in spec["timing_seeds"]]
        t0 = time.perf_counter()
        with torch.no_grad():
            for inputs in input_sets:  # compiles (and recompiles for any guard) outside the timing
                fn(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            result = timer.run(fn, input_sets)
    except BaseException as exc:
        ch.send({"kind": "error", "status": "baseline", "reason": name,
                 "message": harness.describe(exc), "traceback": traceback.format_exc()})
        return
    ch.send({"kind": "timing", "first_calls_s": first_s, **result})


MODES = {"probe": run_probe, "check": run_check, "build": run_build, "reference": run_reference,
         "candidate": run_candidate, "baseline": run_baseline}


def main() -> None:
    mode, fd = sys.argv[1], int(sys.argv[2])
    ch = proto.Channel(fd)
    spec = proto.read_json_line() or {}
    try:
        MODES[mode](spec, ch)
    except Verdict as v:
        ch.send(v.record())
    except BaseException as exc:
        ch.send({"kind": "error", "status": "runtime_error", "reason": "exception",
                 "message": harness.describe(exc), "traceback": traceback.format_exc()})
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: candidate atexit hooks and extension destructors must not run
    # after the verdict, and a clean exit is not needed once the records are on the pipe.
    os._exit(0)


if __name__ == "__main__":
    main()

"""The typed wire between the parent and its trusted worker (``common/wire.py``).

Every record survives a JSON round trip unchanged; an unknown command or answer, and each kind of
malformed frame (not an object, no name, a missing, unexpected or mistyped field, deep in a nested
record too), is a typed ``WireError`` whose message says why. A real worker process answers such a
frame as it answers any command it cannot serve: an ``infra_error`` with the command's id, the reason
and a traceback, and goes on serving; a command named after a worker method that is not a command is
unknown, never called."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, NotRequired, TypedDict

import pytest

from stark_mcp.evaluator.common import frames, wire
from stark_mcp.evaluator.common.wire_codec import _check
from stark_mcp.evaluator.host.settings import EvalSettings
from stark_mcp.evaluator.host.worker_handles import WorkerClient, WorkerCrashed
from stark_mcp.evaluator.trusted.worker import HANDLERS
from tests.evaluator.conftest import FIXTURES

SETTINGS = EvalSettings(trials=2, cpu_threads=0).worker_settings("cpu")
JOB = wire.Job(source_path="/tmp/c.py", build_dir="/tmp/b", deferred=True, build_in_place=False)

SHAPE: wire.ShapeTiming = {
    "label": "a", "samples_ms": [0.5, 0.25], "baseline_ms": [1.0, 1], "reported_ms": 0.4, "external_ms": None,
    "overhead_ms": 0.05, "source": "reported",
    "raw": {"candidate": [[0.5], [0.6]], "baseline": [[1], [1.25]]},
}  # fmt: skip
CORRECT: wire.CorrectnessSummary = {
    "trials": 2, "trials_passed": 2, "max_abs_error": 1e-6, "max_rel_error": 0, "rel_norm_error": 1e-7,
    "tolerance": 1e-5, "allclose_1e2": True, "allclose_1e4": None,
}  # fmt: skip
COUNTS = {"label": "a", "input_bytes": 4, "param_bytes": 0, "output_bytes": 4, "flops": {"pointwise": 2},
          "flops_by_op": {"aten.relu.default": 2.0}, "dtypes": ["float32"], "counted_on": "meta"}  # fmt: skip

SAMPLES: list[wire.Command | wire.Answer] = [
    wire.LoadCommand(key="k", name="relu", path="/tmp/p.py", settings=SETTINGS, hidden=["/h"], visible=[]),
    wire.EvaluateCommand(id="abc", key="k", settings=SETTINGS, job=JOB),
    wire.BaselineCommand(key="k", name="compile_default", settings=SETTINGS),
    wire.ProfileCommand(key="k", settings=EvalSettings().worker_settings("cuda"), fallback=False, job=JOB),
    wire.ProfileCommand(key="k", settings=SETTINGS, fallback=True),  # the reference
    wire.SanitizeCommand(key="k", settings=SETTINGS, job=wire.Job("/c.py", None, False, True)),
    wire.SolCountsCommand(key="k"),
    wire.CalibrateCommand(),
    wire.ShutdownCommand(),
    wire.Hello(device="cpu", isolation="process", isolation_note="no user namespaces", pid=7,
               tools={"ncu": None, "compute-sanitizer": "/usr/bin/compute-sanitizer"}),
    wire.Loaded(shapes=["a", "b"], fp64=True, fp64_note=""),
    wire.Progress(id="abc", phase="timing"),
    wire.Result(
        id="abc", isolation="sandbox", isolation_note="", status="passed", message="ok",
        shapes=[SHAPE], correctness=CORRECT, findings=["f"], flags=["timing_mismatch"],
        phase_seconds={"load": 0.25}, counts={"calls": 3}, kernels=[["k", 1.5]], launches=[{"name": "k"}],
    ),
    wire.Result(id="abc", isolation="process", isolation_note="n", status="load_error", reason="import"),
    wire.Baseline(name="eager", mode="eager",
                  shapes=[{"label": "a", "samples_ms": [1.0], "eager_ms": [1.0]}]),
    wire.Baseline(name="compile_default", mode="default", shapes=[], first_calls_s=2.5),
    wire.BaselineMissing(name="compile_default", message="compile_default failed"),
    wire.Profile(shape="a", source="ncu", reason="", seconds=1.5, command=["ncu", "--csv"], report="x,y"),
    wire.Profile(shape="a", source="torch_profiler", reason="no ncu", seconds=0.5, kernels=[["k", 2.0]],
                 launches=[{"name": "k", "grid": [1, 1, 1]}]),
    wire.Sanitized(report="", reason="no tool", seconds=0.0),
    wire.SolCounts(shapes=[COUNTS]),  # type: ignore[list-item]
    wire.SolMissing(message="RuntimeError: cannot count"),
    wire.Calibrated(bandwidth_bytes_per_s=1e10, fp32_flops_per_s=1e11, method="copy", seconds=0.5,
                    threads=1, cache_bytes=1 << 20),
    wire.Calibrated(bandwidth_bytes_per_s=1e12, fp32_flops_per_s=6e13, method="copy", seconds=0.5,
                    tensor_flops_per_s=9e14),
    wire.ProblemError(step="import", message="boom", traceback="Traceback ..."),
    wire.ProblemError(step="reference", message="boom", traceback="", id="abc"),
    wire.InfraError(message="problem not loaded", id="abc"),
    wire.InfraError(message="KeyError: 'x'", traceback="Traceback ..."),
]  # fmt: skip


def _through_json(frame: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(frame))


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_every_record_survives_the_wire_unchanged(record: wire.Command | wire.Answer) -> None:
    frame = _through_json(record.to_frame())
    if isinstance(record, wire.Command):
        assert frame["cmd"] == record.NAME and wire.decode_command(frame) == record
    else:
        assert frame["kind"] == record.NAME and wire.decode_answer(frame) == record
    assert type(record).from_frame(frame) == record
    assert None not in frame.values()  # a field left at None is not written


def test_the_samples_cover_every_record_and_the_worker_serves_every_command() -> None:
    sampled = {type(r) for r in SAMPLES}
    assert set(wire.COMMANDS.values()) <= sampled and set(wire.ANSWERS.values()) <= sampled
    assert set(HANDLERS) | {wire.ShutdownCommand} == set(wire.COMMANDS.values())


def test_the_worker_settings_are_the_devices_and_every_one_travels() -> None:
    s = EvalSettings(trials=3, timing_timeout_s=12.5)
    gpu, cpu = s.worker_settings("cuda"), s.worker_settings("cpu")
    assert (gpu.spin_s, gpu.sleep_cycles) == (wire.GPU_SPIN_S, wire.GPU_SLEEP_CYCLES)
    assert (cpu.spin_s, cpu.sleep_cycles) == (0.0, 0)
    assert gpu.abs_slack_ms == s.gpu_timing.abs_slack_ms and cpu.min_blocks == s.cpu_timing.min_blocks
    assert gpu.bracket_after_inputs is True and cpu.bracket_after_inputs is False
    assert cpu.trials == 3 and cpu.timing_timeout_s == 12.5 and cpu.check_rate == s.check_rate
    frame = wire.LoadCommand(key="k", name="n", path="/p", settings=cpu, hidden=[], visible=[]).to_frame()
    for name in ("spin_s", "sleep_cycles", "abs_slack_ms", "check_rate", "min_timed_checks"):
        settings = dict(frame["settings"])
        del settings[name]
        with pytest.raises(wire.MalformedFrame, match=f"load.settings: missing field '{name}'"):
            wire.decode_command({**frame, "settings": settings})


def _evaluate() -> dict[str, Any]:
    return _through_json(wire.EvaluateCommand(id="abc", key="k", settings=SETTINGS, job=JOB).to_frame())


def _with(frame: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(frame))
    inner = out
    for key in path[:-1]:
        inner = inner[key]
    if value is _DROP:
        del inner[path[-1]]
    else:
        inner[path[-1]] = value
    return out


_DROP = object()


@pytest.mark.parametrize(
    "frame,error,reason",
    [
        ({"cmd": "explode"}, wire.UnknownFrame, "unknown command 'explode'"),
        ({"cmd": 3}, wire.UnknownFrame, "unknown command 3"),
        # names of the worker's own methods that are not commands: once reachable through getattr
        ({"cmd": "send", "kind": "result"}, wire.UnknownFrame, "unknown command 'send'"),
        ({"cmd": "serve"}, wire.UnknownFrame, "unknown command 'serve'"),
        ({"cmd": "_exhausted"}, wire.UnknownFrame, "unknown command '_exhausted'"),
        ({"key": "k"}, wire.MalformedFrame, "no 'cmd'"),
        (["evaluate"], wire.MalformedFrame, "must be an object, got list"),
        (_with(_evaluate(), ("job",), _DROP), wire.MalformedFrame, "evaluate: missing field 'job'"),
        (_with(_evaluate(), ("id",), 7), wire.MalformedFrame, r"evaluate\.id: expected a string, got int"),
        (_with(_evaluate(), ("job",), "x"), wire.MalformedFrame,
         r"evaluate\.job: expected an object, got str"),
        (_with(_evaluate(), ("job", "deferred"), "yes"), wire.MalformedFrame,
         r"evaluate\.job\.deferred: expected a bool, got str"),
        (_with(_evaluate(), ("job", "build_dir"), 5), wire.MalformedFrame,
         r"evaluate\.job\.build_dir: expected a string, got int"),
        (_with(_evaluate(), ("settings", "min_calls"), True), wire.MalformedFrame,
         r"evaluate\.settings\.min_calls: expected an int, got bool"),
        (_with(_evaluate(), ("settings", "min_calls"), 2.5), wire.MalformedFrame,
         r"evaluate\.settings\.min_calls: expected an int, got float"),
        (_with(_evaluate(), ("settings", "check_rate"), "0.1"), wire.MalformedFrame,
         r"evaluate\.settings\.check_rate: expected a number, got str"),
        (_with(_evaluate(), ("settings", "spin"), 0.1), wire.MalformedFrame,
         r"evaluate\.settings: unexpected field 'spin'"),
        (_with(_evaluate(), ("reference",), True), wire.MalformedFrame,
         "evaluate: unexpected field 'reference'"),
        ({"cmd": "load", "key": "k", "name": "n", "path": "/p", "settings": dataclasses.asdict(SETTINGS),
          "hidden": ["/a", 2], "visible": []}, wire.MalformedFrame, r"load\.hidden\[1\]: expected a string"),
    ],
)  # fmt: skip
def test_an_unknown_or_malformed_command_is_a_typed_error_that_says_why(
    frame: Any, error: type[wire.WireError], reason: str
) -> None:
    with pytest.raises(error, match=reason):
        wire.decode_command(frame)


def _result(**fields: Any) -> dict[str, Any]:
    return {"kind": "result", "id": "a", "isolation": "", "isolation_note": "", "status": "passed", **fields}


def test_a_typed_json_object_reads_back_as_the_same_dict_it_was() -> None:
    """Checked, not converted: an int where a float is declared stays an int, so what the parent
    validates and stores is what the worker wrote, byte for byte."""
    frame = _through_json(wire.Result(id="a", isolation="", isolation_note="", status="passed",
                                      shapes=[SHAPE], correctness=CORRECT).to_frame())  # fmt: skip
    answer = wire.decode_answer(frame)
    assert isinstance(answer, wire.Result)
    assert answer.shapes == [SHAPE] and type(answer.shapes[0]) is dict
    assert answer.shapes[0]["baseline_ms"][1] == 1 and type(answer.shapes[0]["baseline_ms"][1]) is int
    assert json.dumps(answer.to_frame()) == json.dumps(frame)


class _Part(TypedDict):
    size: int
    note: NotRequired[str]


def test_a_typed_json_object_may_leave_out_only_what_its_type_says() -> None:
    Part = _Part
    assert _check({"size": 1}, Part, "p") == {"size": 1}
    assert _check({"size": 1, "note": "n"}, Part, "p") == {"size": 1, "note": "n"}
    with pytest.raises(wire.MalformedFrame, match="p: missing field 'size'"):
        _check({"note": "n"}, Part, "p")
    with pytest.raises(wire.MalformedFrame, match=r"p\.note: expected a string, got int"):
        _check({"size": 1, "note": 2}, Part, "p")


@pytest.mark.parametrize(
    "frame,expect,error,reason",
    [
        ({"kind": "verdict"}, None, wire.UnknownFrame, "unknown answer 'verdict'"),
        ({"phase": "timing"}, None, wire.MalformedFrame, "no 'kind'"),
        ({"kind": "loaded", "shapes": ["a"], "fp64": True, "fp64_note": ""}, {wire.Result},
         wire.UnknownFrame, r"unknown answer 'loaded'; expected one of \['result'\]"),
        ({"kind": "loaded", "shapes": "a", "fp64": True, "fp64_note": ""}, None, wire.MalformedFrame,
         r"loaded\.shapes: expected a list, got str"),
        ({"kind": "hello", "device": "cpu", "isolation": "x", "isolation_note": "", "pid": 1,
          "tools": {"ncu": 3}}, None, wire.MalformedFrame, r"hello\.tools\.ncu: expected a string"),
        ({"kind": "result", "id": "a", "isolation": "", "isolation_note": "", "status": "passed",
          "phase_seconds": {"load": "slow"}}, None, wire.MalformedFrame,
         r"result\.phase_seconds\.load: expected a number, got str"),
        ({"kind": "progress", "phase": "timing"}, None, wire.MalformedFrame, "progress: missing field 'id'"),
        # the JSON objects typed as TypedDicts: every key there, none other, each value of its type
        (_result(shapes=[{k: v for k, v in SHAPE.items() if k != "raw"}]), None, wire.MalformedFrame,
         r"result\.shapes\[0\]: missing field 'raw'"),
        (_result(shapes=[{**SHAPE, "median_ms": 1.0}]), None, wire.MalformedFrame,
         r"result\.shapes\[0\]: unexpected field 'median_ms'"),
        (_result(shapes=[{**SHAPE, "raw": {"candidate": [[0.5, "x"]]}}]), None, wire.MalformedFrame,
         r"result\.shapes\[0\]\.raw\.candidate\[0\]\[1\]: expected a number, got str"),
        (_result(correctness={**CORRECT, "allclose_1e2": 1}), None, wire.MalformedFrame,
         r"result\.correctness\.allclose_1e2: expected a bool, got int"),
        (_result(correctness=[CORRECT]), None, wire.MalformedFrame,
         r"result\.correctness: expected an object, got list"),
        ({"kind": "sol_counts", "shapes": [{**COUNTS, "input_bytes": 4.5}]}, None, wire.MalformedFrame,
         r"sol_counts\.shapes\[0\]\.input_bytes: expected an int, got float"),
        ({"kind": "baseline", "name": "eager", "mode": "eager", "shapes": [{"label": "a", "samples_ms": []}]},
         None, wire.MalformedFrame, r"baseline\.shapes\[0\]: missing field 'eager_ms'"),
    ],
)  # fmt: skip
def test_an_unknown_or_malformed_answer_is_a_typed_error_that_says_why(
    frame: Any, expect: set[type[wire.Answer]] | None, error: type[wire.WireError], reason: str
) -> None:
    with pytest.raises(error, match=reason):
        wire.decode_answer(frame, expect)


def test_a_record_read_as_another_is_refused() -> None:
    with pytest.raises(wire.MalformedFrame, match="the frame's cmd is 'calibrate'"):
        wire.SolCountsCommand.from_frame({"cmd": "calibrate"})


# -- a real worker ---------------------------------------------------------------------------------


async def _raw_answer(client: WorkerClient, frame: Any) -> dict[str, Any]:
    """Send ``frame`` as it is (no record makes it) and read the worker's answer as it is."""
    assert client._in_w is not None
    frames.send(client._in_w, frame)
    answer = await client._recv(60)
    assert answer is not None
    return answer


@pytest.mark.slow  # starts a worker and a reference jail
def test_a_real_worker_answers_malformed_commands_as_infra_errors_and_serves_on() -> None:
    async def scenario() -> None:
        client = WorkerClient("cpu", None, hidden=[])
        try:
            await client._start()
            assert client.hello is not None and client.hello.device == "cpu"
            evaluate = _evaluate()
            del evaluate["job"]
            for frame, id_, reason in [
                (evaluate, "abc", "MalformedFrame: evaluate: missing field 'job'"),
                ({"cmd": "send", "kind": "loaded", "id": "x"}, "x", "UnknownFrame: unknown command 'send'"),
                ({"cmd": "load"}, None, "MalformedFrame: load: missing field"),
                ({"id": 3}, None, "MalformedFrame: a command frame has no 'cmd'"),
            ]:
                answer = await _raw_answer(client, frame)
                assert answer["kind"] == "infra_error", answer
                assert answer.get("id") == id_ and answer["message"].startswith(reason), answer
                assert "Traceback" in answer["traceback"]
                # and the parent reads it as it reads any worker failure: a crash to retry, with why
                frames.send(client._in_w, frame)
                with pytest.raises(WorkerCrashed, match=reason.split(": ", 1)[1]):
                    await client._answer({wire.Result}, 60, None)
            # the worker lives on: a well-formed command is served
            problem = wire.LoadCommand(
                key="relu", name="relu_sum", path=str(FIXTURES / "relu_sum.py"), settings=SETTINGS,
                hidden=[], visible=[],
            )  # fmt: skip
            loaded = await client.load(problem)
            assert isinstance(loaded, wire.Loaded) and loaded.shapes
            assert client.proc is not None and client.proc.returncode is None
        finally:
            await client.shutdown()

    asyncio.run(scenario())

"""The outside tools around a runner: their commands, their reports, and the whole path through the
trusted worker with a stand-in for Nsight Compute (tests/fixtures/profiles/fake_ncu.py).

The stand-in runs the runner the way the least helpful launcher would (every inherited descriptor
closed), inside the real jail, and then writes the report ncu recorded on an H100. So the jail, the
runner fetching its descriptors from the socket, the warm-up and profiled calls, the exit, and the
reading of the report are all real; only the counters are replayed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.evaluator.common.outside_tools import ToolPaths
from stark_mcp.evaluator.common.profile_parse import METRICS
from stark_mcp.evaluator.host.sanitizer_report import first_report, is_memory_error
from stark_mcp.evaluator.trusted.profiling import (
    NVTX_RANGE,
    ncu_command,
    read_report,
    sanitizer_command,
)
from stark_mcp.problems import load_problem, source_hash
from tests.evaluator.conftest import FAST, FIXTURES, fixture_text
from tests.toolchain import shared_toolchain

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"


def test_ncu_command_profiles_only_our_range_at_running_clocks() -> None:
    argv = ncu_command("/opt/ncu", "/tmp/out/ncu.csv", 40)
    assert argv[0] == "/opt/ncu"
    options = {
        argv[i]: argv[i + 1]
        for i in range(1, len(argv) - 1)
        if argv[i].startswith("--") and not argv[i + 1].startswith("--")
    }
    assert options["--page"] == "raw" and options["--print-units"] == "base"
    assert options["--clock-control"] == "none" and options["--target-processes"] == "all"
    assert options["--nvtx-include"] == f"{NVTX_RANGE}/"  # a push/pop range
    assert options["--launch-count"] == "40" and options["--log-file"] == "/tmp/out/ncu.csv"
    assert options["--metrics"].split(",") == list(METRICS)
    assert "--csv" in argv and "--nvtx" in argv


def test_every_metric_we_parse_was_recorded_by_ncu() -> None:
    """The metric names are real: the recorded report has a column for each (or they are the peak
    and launch variants ncu's roofline section uses, which the recording did not ask for)."""
    header = (SAMPLES / "ncu_raw.csv").read_text().splitlines()[3]
    recorded = {name.strip('"') for name in header.split('","')}
    extra = {m for m in METRICS if m not in recorded}
    assert extra == {
        "dram__bytes.sum.peak_sustained",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
        *(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("dadd", "dmul", "hadd", "hmul")),
    }


def test_sanitizer_command_stops_after_the_first_error() -> None:
    argv = sanitizer_command("/opt/compute-sanitizer", "/tmp/out/sanitizer.log")
    assert argv[:3] == ["/opt/compute-sanitizer", "--tool", "memcheck"]
    assert argv[argv.index("--print-limit") + 1] == "1" and argv[-1] == "/tmp/out/sanitizer.log"


def test_tool_paths_honour_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = SAMPLES / "fake_ncu.py"
    assert ToolPaths(ncu=str(fake)).find("ncu") == str(fake)
    assert ToolPaths(ncu="off").find("ncu") is None
    assert ToolPaths(ncu=str(tmp_path / "missing")).find("ncu") is None
    assert "is turned off" in ToolPaths(ncu="off").missing("ncu")
    assert "is not installed" in ToolPaths().missing("compute-sanitizer")
    # Unset: looked up on PATH, then under CUDA_HOME.
    (tmp_path / "bin").mkdir()
    sanitizer = tmp_path / "bin" / "compute-sanitizer"
    sanitizer.write_text("#!/bin/sh\n")
    sanitizer.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert ToolPaths().find("compute-sanitizer") == str(sanitizer)
    paths = ToolPaths(ncu=str(fake), compute_sanitizer="off")
    assert ToolPaths.from_json(paths.to_json()) == paths  # how they reach the worker


def test_reports_are_read_as_untrusted_files(tmp_path: Path) -> None:
    report = tmp_path / "ncu.csv"
    report.write_text("x" * 100)
    assert read_report(str(report)) == "x" * 100
    assert read_report(str(report), limit=10) == "x" * 10
    secret = tmp_path / "secret"
    secret.write_text("the worker's secret")
    link = tmp_path / "planted.csv"
    link.symlink_to(secret)  # the jail owns the folder: it could plant a link to anything
    assert read_report(str(link)) == ""
    os.mkfifo(tmp_path / "fifo")
    assert read_report(str(tmp_path / "fifo")) == ""  # never blocks on a pipe
    assert read_report(str(tmp_path / "absent")) == ""


MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at fill_ones_buggy(float *, long)+0xb0 in cuda.cu:21
=========     by thread (100,0,0) in block (0,0,0)
=========     Access to 0x7f48d8800190 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f48d8800000 of size 400 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2d4b1f] in libcuda.so.1
=========         Host Frame: [0x15c3e] in libcudart.so.12
=========         Host Frame: [0x6a5d1] in libcudart.so.12
=========         Host Frame: [0x1b2c4] in python3.12
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call.
=========
========= ERROR SUMMARY: 2 errors
"""


def test_the_first_memcheck_report_is_kept_and_its_backtrace_cut() -> None:
    # The layout memcheck prints (as in NVIDIA's documentation); no GPU here to record one.
    report = first_report("some program output\n" + MEMCHECK)
    assert report is not None
    lines = report.splitlines()
    assert lines[0] == "========= Invalid __global__ write of size 4 bytes"
    assert "by thread (100,0,0) in block (0,0,0)" in report and "1 bytes after" in report
    assert sum("Host Frame" in line for line in lines) == 3
    assert "Program hit" not in report and lines[-1] == "========= ERROR SUMMARY: 2 errors"
    assert first_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") is None
    assert first_report("") is None


def test_memory_errors_are_recognised_in_torchs_messages() -> None:
    assert is_memory_error(
        "forward raised AcceleratorError: CUDA error: an illegal memory access was encountered"
    )
    assert is_memory_error("CUDA error: misaligned address")
    assert not is_memory_error("forward raised RuntimeError: shape mismatch")
    assert not is_memory_error("CUDA out of memory. Tried to allocate 2.00 GiB")


@pytest.fixture
def settings() -> EvalSettings:
    return FAST.model_copy(update={"profile_timeout_s": 60.0})


async def _profile_on_cpu(cache_dir: Path, settings: EvalSettings, reference: bool, ncu: str) -> object:
    """The worker's profile command on the CPU (Evaluator.profile itself refuses the CPU)."""
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    source = fixture_text("torch_ok.py")
    tools = ToolPaths(ncu=ncu)
    async with Evaluator(cache_dir, settings, tool_paths=tools, toolchain_dir=shared_toolchain()) as ev:
        info = await ev.device_info("cpu")

        async def quiet(_message: str) -> None:
            return None

        await ev.check_problem(problem, device="cpu")
        if reference:
            return await ev.profiles.profile_job(problem, None, info, settings, None)
        staged = await ev.staging.stage(source, source_hash(source), info, settings, False, quiet, {})
        return await ev.profiles.profile_job(problem, source, info, settings, staged.job)


@pytest.mark.anyio
async def test_the_worker_profiles_a_candidate_under_the_tool(
    cache_dir: Path, settings: EvalSettings
) -> None:
    ncu = str(SAMPLES / "fake_ncu.py")
    report = await asyncio.wait_for(_profile_on_cpu(cache_dir, settings, reference=False, ncu=ncu), 120)
    assert report.source == "ncu", report.reason
    assert [k.short_name for k in report.kernels][1] == "vectorized_elementwise_kernel"
    assert report.kernels[0].bound == "compute" and report.kernels[1].bound == "memory"
    assert report.kernels[0].own is False  # torch_ok.py defines no kernel of its own
    assert 0 < report.seconds < 60


@pytest.mark.anyio
async def test_without_ncu_the_reference_falls_back_and_says_why(
    cache_dir: Path, settings: EvalSettings
) -> None:
    report = await asyncio.wait_for(
        _profile_on_cpu(cache_dir, settings, reference=True, ncu="/nonexistent/ncu"), 120
    )
    # The worker ran the reference again under the torch profiler (a real runner process); on the
    # CPU it sees no kernel either: no profile, and both reasons.
    assert report.source == "none" and report.kernels == []
    assert (
        "/nonexistent/ncu is not an executable" in report.reason
        and "torch profiler saw no kernel" in report.reason
    )


@pytest.mark.anyio
async def test_profiling_on_the_cpu_is_a_report_not_an_error(evaluator: Evaluator) -> None:
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    report = await evaluator.profile(problem, fixture_text("torch_ok.py"), device="cpu")
    assert report.source == "none" and "needs a GPU" in report.reason
    # A passing CPU evaluation carries no profile, and the profile switch is not in the cache key.
    evaluation = await evaluator.evaluate(problem, fixture_text("torch_ok.py"), device="cpu")
    assert evaluation.passed and evaluation.profile is None
    assert (
        EvalSettings(profile=False, sanitize=False, profile_timeout_s=5).settings_hash
        == EvalSettings().settings_hash
    )

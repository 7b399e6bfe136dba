"""Profiler output to per-kernel facts, on output recorded on an H100 (tests/fixtures/profiles).

ncu_prog.py ran a 64M-element add (memory-bound) and a 4096^2 fp32 matmul (compute-bound) inside
an NVTX range; ncu_raw.csv is Nsight Compute's ``--csv --page raw`` report of it, ncu_details.csv
its ``--page details`` report of a second run (ncu's own sections: an independent reading of the
same kernels), torch_profile_events.json the torch profiler's events of the same program.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from stark_mcp.evaluator.common.kernel_roofline import bound, roofline
from stark_mcp.evaluator.common.profile_parse import (
    ProfileParseError,
    kernels_from_ncu,
    kernels_from_torch,
    number,
    parse_ncu_raw,
)
from stark_mcp.evaluator.host import profile_reports
from stark_mcp.evaluator.untrusted.kernel_list import kernel_totals, launches_from_trace
from stark_mcp.records import ProfileReport

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"
RAW = (SAMPLES / "ncu_raw.csv").read_text()


def details() -> dict[tuple[int, str], float]:
    """ncu's own sections of the second run: (kernel id, metric name) -> value."""
    text = (SAMPLES / "ncu_details.csv").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("==")]
    out = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        value = number(row["Metric Value"])
        if value is not None:
            out[(int(row["ID"]), row["Metric Name"])] = value
    return out


@pytest.fixture(scope="module")
def parsed() -> dict:
    result = kernels_from_ncu(RAW)
    assert [k["short_name"] for k in result["kernels"]][1] == "vectorized_elementwise_kernel"
    return result


def by_name(parsed: dict) -> tuple[dict, dict]:
    add = next(k for k in parsed["kernels"] if k["short_name"] == "vectorized_elementwise_kernel")
    gemm = next(k for k in parsed["kernels"] if k["short_name"].startswith("sm80_xmma_gemm"))
    return add, gemm


def test_the_add_is_memory_bound_and_the_matmul_compute_bound(parsed: dict) -> None:
    add, gemm = by_name(parsed)
    assert add["bound"] == "memory" and add["dram_throughput_pct"] > 85 and add["sm_throughput_pct"] < 10
    assert add["roofline"]["side"] == "memory" and add["roofline"]["arithmetic_intensity"] < 1
    # 64M fp32 adds move 768 MB: reads of a and b, the write of c.
    assert add["roofline"]["dram_bytes"] == pytest.approx(3 * 4 * (64 << 20), rel=0.03)
    assert gemm["bound"] == "compute" and gemm["sm_throughput_pct"] > 80 and gemm["dram_throughput_pct"] < 10
    assert gemm["roofline"]["side"] == "compute"
    assert gemm["roofline"]["flops"] == pytest.approx(2 * 4096**3, rel=0.01)  # 2 n^3 for n = 4096
    # Tensor-core instructions ran (a handful), but not enough to carry the arithmetic.
    assert gemm["roofline"]["tensor_core"] is False


def test_roofline_fractions_agree_with_ncus_own_throughputs(parsed: dict) -> None:
    add, gemm = by_name(parsed)
    # Below the ridge the fraction is of the DRAM roof: what ncu reports as DRAM throughput.
    assert add["roofline"]["achieved_fraction"] == pytest.approx(add["dram_throughput_pct"] / 100, abs=0.01)
    assert 0.6 < gemm["roofline"]["achieved_fraction"] < gemm["sm_throughput_pct"] / 100 + 0.01
    peaks = parsed["peaks"]
    assert parsed["device_name"] == "NVIDIA H100 80GB HBM3"
    assert peaks["dram_bytes_per_s"] == pytest.approx(3.35e12, rel=0.01)  # H100 SXM HBM3
    assert peaks["fp32_flops_per_s"] == pytest.approx(66.9e12, rel=0.02)  # 132 SMs x 128 lanes x 2 x clock


def test_shares_launches_and_stalls(parsed: dict) -> None:
    add, gemm = by_name(parsed)
    assert parsed["kernels"][0] is gemm  # slowest first
    assert add["share"] + gemm["share"] == pytest.approx(1.0)
    assert gemm["share"] == pytest.approx(2666.784 / (2666.784 + 260.0))
    assert add["grid"] == [65536, 1, 1] and add["block"] == [128, 1, 1] and add["launches"] == 1
    assert gemm["grid"] == [16, 32, 1] and gemm["block"] == [256, 1, 1]
    assert add["stalls"][0]["reason"] == "long_scoreboard" and add["stalls"][0]["share"] > 0.5
    assert all(s["reason"] != "selected" for s in add["stalls"] + gemm["stalls"])
    assert [s["share"] for s in gemm["stalls"]] == sorted((s["share"] for s in gemm["stalls"]), reverse=True)


def test_launch_facts_match_ncus_sections(parsed: dict) -> None:
    sections = details()
    for kernel_id, kernel in enumerate(reversed(parsed["kernels"])):  # ids 0 (add) and 1 (matmul)
        assert kernel["registers_per_thread"] == sections[(kernel_id, "Registers Per Thread")]
        assert kernel["theoretical_occupancy_pct"] == sections[(kernel_id, "Theoretical Occupancy")]
        assert (
            kernel["shared_memory_bytes"]
            == sections[(kernel_id, "Dynamic Shared Memory Per Block")]
            + sections[(kernel_id, "Static Shared Memory Per Block")]
        )
        # A second run: rates agree closely, not exactly.
        for field, section in (
            ("achieved_occupancy_pct", "Achieved Occupancy"),
            ("dram_throughput_pct", "DRAM Throughput"),
            ("sm_throughput_pct", "Compute (SM) Throughput"),
            ("l2_hit_rate_pct", "L2 Hit Rate"),
        ):
            assert kernel[field] == pytest.approx(sections[(kernel_id, section)], abs=2), field


def test_a_report_as_a_record_marks_the_candidates_own_kernels() -> None:
    source = "__global__ void vectorized_elementwise_kernel(float* x) {}\n"
    answer = {"source": "ncu", "report": RAW, "shape": "default"}
    report = profile_reports.from_answer(answer, source, 40, 9.5)
    assert isinstance(report, ProfileReport) and report.source == "ncu" and report.seconds == 9.5
    assert [k.own for k in report.kernels] == [False, True]
    assert not report.truncated and report.notes == []
    capped = profile_reports.from_answer({"source": "ncu", "report": RAW}, None, 2, 1.0)
    assert capped.truncated and "first 2 kernel launches" in capped.notes[0]
    assert ProfileReport.model_validate_json(report.model_dump_json()) == report


def test_no_rows_is_an_error_that_carries_ncus_message() -> None:
    text = (
        "==PROF== Connected to process 9\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission "
        "to access NVIDIA GPU Performance Counters on the target device 0.\n"
    )
    with pytest.raises(ProfileParseError, match="ERR_NVGPUCTRPERM"):
        parse_ncu_raw(text)
    with pytest.raises(ProfileParseError, match="no kernel rows"):
        parse_ncu_raw("")
    report = profile_reports.from_answer({"source": "ncu", "report": text}, None, 40, 1.0)
    assert report.source == "none" and "ERR_NVGPUCTRPERM" in report.reason


def test_untrusted_text_is_read_defensively() -> None:
    header, units, row = RAW.splitlines()[3:6]
    assert number("nan") is None and number("n/a") is None and number("1,234.5") == 1234.5
    # A row that does not match the header is skipped; a forged value that is not a number is None.
    forged = row.replace('"260,000"', '"lots"')
    rows, _ = parse_ncu_raw(f'{header}\n{units}\n"0","1"\n{forged}')
    assert len(rows) == 1 and rows[0]["gpu__time_duration.sum"] is None
    # Units other than the base ones are converted.
    scaled = header + "\n" + units.replace('"ns"', '"usecond"') + "\n" + row
    assert parse_ncu_raw(scaled)[0][0]["gpu__time_duration.sum"] == pytest.approx(260_000_000.0)


def test_roofline_without_arithmetic_and_bound_rules() -> None:
    peaks = {"fp32_flops_per_s": 60e12, "dram_bytes_per_s": 3e12, "fp64_ratio": 2.0}
    copy = roofline({"d": 0.0, "f": 0.0, "h": 0.0}, 3e9, 1e-3, peaks)
    assert copy["side"] == "memory" and copy["achieved_fraction"] == pytest.approx(1.0)
    fp64 = roofline({"d": 1e12, "f": 0.0, "h": 0.0}, 1e6, 1.0 / 15, peaks)
    assert fp64["peak_flops_per_s"] == 30e12 and fp64["achieved_fraction"] == pytest.approx(0.5)
    assert roofline({"f": 1.0}, None, 1.0, peaks) is None
    assert bound(90, 20) == "compute" and bound(10, 85) == "memory"
    assert bound(20, 30) == "latency" and bound(50, 45) == "balanced" and bound(None, 50) is None


def test_torch_events_give_the_fallback_kernel_list() -> None:
    events = json.loads((SAMPLES / "torch_profile_events.json").read_text())
    kernels = kernel_totals((e["name"], e["device_type"], e["device_time_us"]) for e in events)
    assert [round(us, 3) for _, us in kernels] == [2660.879, 179.779]
    assert kernels[0][0].startswith("sm80_xmma_gemm") and "CUDAFunctor_add" in kernels[1][0]
    report = profile_reports.from_kernels(kernels, "ncu is not installed", "default", 0.0)
    assert report.source == "torch_profiler" and report.reason == "ncu is not installed"
    assert report.kernels[0].share == pytest.approx(2660.879 / (2660.879 + 179.779))
    assert report.kernels[0].dram_throughput_pct is None and report.kernels[0].roofline is None
    assert "no hardware counters" in report.notes[0]


def test_chrome_trace_launches_carry_shapes_and_merge() -> None:
    # The shape of a kernel event in torch.profiler's Chrome trace export (Kineto), two launches
    # of one kernel and one of another, plus a CPU event that is not a kernel.
    event = {
        "ph": "X",
        "cat": "kernel",
        "name": "void relu_kernel<float>(float*)",
        "dur": 12.5,
        "args": {
            "grid": [1024, 1, 1],
            "block": [256, 1, 1],
            "registers per thread": 16,
            "shared memory": 0,
            "stream": 7,
        },
    }
    gemm = {**event, "name": "gemm", "dur": 30.0, "args": {"grid": [8, 8, 1], "block": [128, 1, 1]}}
    cpu = {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "dur": 50.0}
    trace = {"traceEvents": [event, {**event, "dur": 7.5}, gemm, cpu]}
    launches = launches_from_trace(trace)
    assert [launch["name"] for launch in launches] == ["gemm"] + ["void relu_kernel<float>(float*)"] * 2
    merged = kernels_from_torch(launches)["kernels"]
    relu = next(k for k in merged if k["short_name"] == "relu_kernel")
    assert relu["launches"] == 2 and relu["time_us"] == pytest.approx(20.0)
    assert relu["registers_per_thread"] == 16
    assert relu["grid"] == [1024, 1, 1] and merged[0]["short_name"] == "gemm"
    # Junk from the candidate's process is dropped, not trusted.
    assert kernels_from_torch([{"name": "x", "us": float("inf")}, "junk", {"us": 3}])["kernels"] == []

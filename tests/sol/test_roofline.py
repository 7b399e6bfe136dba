"""The roofline math: floors, fractions, the bound, and the floor check's two outcomes."""

from __future__ import annotations

import pytest

from stark_mcp.sol.model import Peaks
from stark_mcp.sol.roofline import (
    CPU_OUTPUT_MARGIN,
    OUTPUT_MARGIN,
    below_floor_message,
    shape_floor,
    sol_report,
)

PEAKS = Peaks(
    device_name="test GPU", bandwidth_bytes_per_s=1e12, fp32_flops_per_s=1e13,
    tensor_flops_per_s=1e14, cache_bytes=1 << 20,
)


def elementwise(n: int, label: str = "default") -> dict:
    return {"label": label, "input_bytes": 4 * n, "param_bytes": 0, "output_bytes": 4 * n,
            "flops": {"pointwise": float(n)}, "dtypes": ["float32"]}


def matmul(n: int, dtype: str = "float32") -> dict:
    size = 2 if dtype != "float32" else 4
    klass = "matmul_lowp" if dtype != "float32" else "matmul"
    return {"label": f"n={n}", "input_bytes": 2 * size * n * n, "param_bytes": 0,
            "output_bytes": size * n * n, "flops": {klass: 2.0 * n**3}, "dtypes": [dtype]}


def test_an_elementwise_op_is_memory_bound_at_its_bytes_over_the_bandwidth() -> None:
    floor = shape_floor(elementwise(1 << 24), PEAKS)
    assert floor.bound == "memory"
    assert floor.memory_ms == pytest.approx(8 * (1 << 24) / 1e12 * 1e3)
    assert floor.floor_ms == floor.memory_ms
    # outputs beyond the cache, at OUTPUT_MARGIN x the bandwidth
    assert floor.output_write_ms == pytest.approx((4 * (1 << 24) - (1 << 20)) / (OUTPUT_MARGIN * 1e12) * 1e3)


def test_a_large_fp32_matmul_is_compute_bound_at_the_fp32_peak_never_tensor_cores() -> None:
    floor = shape_floor(matmul(4096), PEAKS)
    assert floor.bound == "compute"
    assert floor.compute_ms == pytest.approx(2 * 4096**3 / 1e13 * 1e3)


def test_a_bf16_matmul_uses_the_tensor_core_peak() -> None:
    report = sol_report([matmul(4096, "bfloat16")], PEAKS)
    assert report.compute_peak == "tensor"
    assert report.shapes[0].floor.compute_ms == pytest.approx(2 * 4096**3 / 1e14 * 1e3)


def test_a_bf16_matmul_on_a_device_without_a_tensor_peak_falls_back_to_fp32() -> None:
    peaks = PEAKS.model_copy(update={"tensor_flops_per_s": None})
    assert sol_report([matmul(1024, "bfloat16")], peaks).compute_peak == "fp32"


def test_fraction_and_headroom_follow_the_time_of_record_per_shape_and_as_a_geometric_mean() -> None:
    counts = [elementwise(1 << 20, "a"), elementwise(1 << 22, "b")]
    floors = [shape_floor(c, PEAKS).floor_ms for c in counts]
    report = sol_report(counts, PEAKS, {"a": floors[0] * 4, "b": floors[1] * 2})
    assert [s.fraction for s in report.shapes] == pytest.approx([0.25, 0.5])
    assert report.fraction == pytest.approx((0.25 * 0.5) ** 0.5)
    assert report.headroom == pytest.approx(1 / report.fraction)
    assert not report.below_floor and not report.beyond_roofline


def test_a_time_below_the_output_write_floor_is_impossible() -> None:
    counts = [elementwise(1 << 24)]
    write = shape_floor(counts[0], PEAKS).output_write_ms
    report = sol_report(counts, PEAKS, {"default": write * 0.9})
    assert report.below_floor and report.beyond_roofline
    assert "below the" in below_floor_message(report)


def test_a_time_between_the_output_floor_and_the_roofline_is_only_beyond_the_roofline() -> None:
    counts = [matmul(4096)]
    floor = shape_floor(counts[0], PEAKS)
    report = sol_report(counts, PEAKS, {"n=4096": floor.floor_ms / 27})  # an algebraic collapse
    assert report.beyond_roofline and not report.below_floor
    assert report.fraction == pytest.approx(27)


def test_outputs_that_fit_in_the_cache_never_trip_the_floor() -> None:
    report = sol_report([elementwise(1024)], PEAKS, {"default": 1e-9})
    assert report.shapes[0].floor.output_write_ms == 0 and not report.below_floor


def test_mixed_bounds_across_shapes_say_so() -> None:
    assert sol_report([elementwise(1 << 20), matmul(4096)], PEAKS).bound == "mixed"


def test_the_cpu_output_floor_takes_a_wider_margin_for_one_threads_write_only_streams() -> None:
    cpu = PEAKS.model_copy(update={"kind": "cpu"})
    gpu_floor = shape_floor(elementwise(1 << 24), PEAKS).output_write_ms
    cpu_floor = shape_floor(elementwise(1 << 24), cpu).output_write_ms
    assert cpu_floor == pytest.approx(gpu_floor * OUTPUT_MARGIN / CPU_OUTPUT_MARGIN)
    assert sol_report([elementwise(1 << 24)], cpu).margin == CPU_OUTPUT_MARGIN


def test_a_calibration_slowed_by_other_work_never_makes_an_honest_time_impossible() -> None:
    slowed = PEAKS.model_copy(
        update={"bandwidth_bytes_per_s": 0.3e12, "published_bandwidth_bytes_per_s": 1e12}
    )
    floor = shape_floor(elementwise(1 << 24), slowed)
    assert floor.output_write_ms == pytest.approx(shape_floor(elementwise(1 << 24), PEAKS).output_write_ms)
    assert floor.memory_ms == pytest.approx(8 * (1 << 24) / 0.3e12 * 1e3)  # the fraction uses the measured


def test_a_float32_convolution_torch_runs_as_tf32_uses_half_the_tensor_rate_on_a_gpu_only() -> None:
    """cuDNN convolutions run TF32 under torch's defaults, so the reference itself does: an FP32
    floor put eager PyTorch at 171% of the speed of light on a KernelBench convolution."""
    conv = {"label": "default", "input_bytes": 1 << 20, "param_bytes": 0, "output_bytes": 1 << 20,
            "flops": {"matmul_tf32": 1e12, "pointwise": 1e6}, "dtypes": ["float32"]}
    report = sol_report([conv], PEAKS)
    assert report.compute_peak == "tensor"
    assert report.shapes[0].floor.compute_ms == pytest.approx(1e12 / (0.5 * 1e14) * 1e3)
    cpu = PEAKS.model_copy(update={"kind": "cpu"})
    assert sol_report([conv], cpu).compute_peak == "fp32"
    assert sol_report([conv], cpu).shapes[0].floor.compute_ms == pytest.approx((1e12 + 1e6) / 1e13 * 1e3)

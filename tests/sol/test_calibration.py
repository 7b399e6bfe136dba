"""Measured peaks kept on disk per device, the datasheet as fallback and cross-check; counts per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.evaluator.trusted.sol_calibrate import calibrate
from stark_mcp.sol.calibration import CountsCache, PeaksCache, peaks_from_measurement
from stark_mcp.sol.published import published_peaks

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SMALL = {"copy_bytes": 4 << 20, "mm_fp32": 128, "mm_bf16": 0, "repeats": 2}


async def test_peaks_are_measured_once_then_read_from_the_cache(tmp_path: Path) -> None:
    calls = []

    async def measure() -> dict:
        calls.append(1)
        return calibrate("cpu", SMALL)

    cache = PeaksCache(tmp_path)
    first = await cache.get("some cpu", "cpu", "2.11", measure)
    again = await PeaksCache(tmp_path).get("some cpu", "cpu", "2.11", measure)
    assert calls == [1]
    assert first is not None and first == again
    assert first.source == "measured" and first.threads == 1 and first.obtained_at
    assert first.bandwidth_bytes_per_s > 1e8 and first.fp32_flops_per_s > 1e8
    assert "one thread" in first.method
    # a new torch is measured again
    await cache.get("some cpu", "cpu", "2.12", measure)
    assert calls == [1, 1]


async def test_a_failed_measurement_falls_back_to_the_published_peaks_and_is_not_kept(tmp_path: Path) -> None:
    async def broken() -> dict:
        raise RuntimeError("no device")

    cache = PeaksCache(tmp_path)
    peaks = await cache.get("NVIDIA H200", "cuda", "2.11", broken)
    assert peaks is not None and peaks.source == "published"
    assert peaks.bandwidth_bytes_per_s == 4.8e12 and peaks.fp32_flops_per_s == 67e12
    assert peaks.tensor_flops_per_s == 989e12 and "no device" in peaks.method
    assert cache.load("NVIDIA H200", "2.11") is None  # measured next time
    assert await cache.get("Mystery Accelerator", "cuda", "2.11", broken) is None
    assert await cache.get("some cpu", "cpu", "2.11", broken) is None


@pytest.mark.parametrize(
    ("name", "bandwidth"),
    [("NVIDIA H100 80GB HBM3", 3.35e12), ("NVIDIA H100 PCIe", 2.0e12), ("NVIDIA A100-SXM4-80GB", 2.039e12),
     ("NVIDIA L4", 0.3e12), ("NVIDIA L40S", 0.864e12), ("NVIDIA B200", 8.0e12), ("NVIDIA H200", 4.8e12)],
)
def test_the_published_table_knows_the_common_gpus(name: str, bandwidth: float) -> None:
    peaks = published_peaks(name)
    assert peaks is not None and peaks.bandwidth_bytes_per_s == pytest.approx(bandwidth)


def test_a_measurement_above_the_datasheet_is_replaced_by_the_datasheet() -> None:
    answer = {"bandwidth_bytes_per_s": 9e12, "fp32_flops_per_s": 60e12, "tensor_flops_per_s": 790e12,
              "method": "copy"}
    peaks = peaks_from_measurement(answer, "NVIDIA H200", "cuda")
    assert peaks.bandwidth_bytes_per_s == 4.8e12 and "published used" in peaks.method
    assert peaks.fp32_flops_per_s == 60e12 and peaks.tensor_flops_per_s == 790e12
    assert peaks.cache_bytes == 50 << 20  # the datasheet's L2 when the probe gave none


def test_counts_are_kept_per_problem_hash(tmp_path: Path) -> None:
    cache = CountsCache(tmp_path)
    shapes = [{"label": "default", "input_bytes": 4, "param_bytes": 0, "output_bytes": 4}]
    assert cache.load("abc") is None
    cache.store("abc", shapes)
    assert CountsCache(tmp_path).load("abc") == shapes
    assert cache.load("abd") is None


def test_signed_entries_that_do_not_verify_are_ignored(tmp_path: Path) -> None:
    from stark_mcp.evaluator.host.integrity import Integrity

    signer = Integrity(tmp_path / "cache")
    cache = CountsCache(tmp_path, signer)
    shapes = [{"label": "default", "input_bytes": 4, "param_bytes": 0, "output_bytes": 4}]
    cache.store("abc", shapes)
    assert cache.load("abc") == shapes
    path = cache.path("abc")
    path.write_text(path.read_text().replace('"input_bytes": 4', '"input_bytes": 1'))
    assert cache.load("abc") is None
    peaks = PeaksCache(tmp_path, signer)
    assert peaks.load("NVIDIA H200", "2.11") is None

"""Datasheet peaks of common GPUs: the cross-check for measured peaks, and the fallback when a
device cannot be calibrated. Dense figures (no sparsity), SXM parts unless the name says otherwise.
Bandwidth is the HBM/GDDR figure NVIDIA publishes; a device copy reaches about 85-90% of it."""

from __future__ import annotations

from stark_mcp.sol.model import Peaks

T = 1e12
# (substring of the lower-cased device name, FP32, BF16/FP16 dense tensor, bandwidth, L2 bytes);
# the first match wins, so the specific names come first.
_TABLE: list[tuple[str, float, float, float, int]] = [
    ("h200 nvl", 60 * T, 835 * T, 4.8 * T, 50 << 20),
    ("h200", 67 * T, 989 * T, 4.8 * T, 50 << 20),
    ("h100 pcie", 51 * T, 756 * T, 2.0 * T, 50 << 20),
    ("h100 nvl", 60 * T, 835 * T, 3.9 * T, 50 << 20),
    ("h100", 67 * T, 989 * T, 3.35 * T, 50 << 20),
    ("a100 80gb pcie", 19.5 * T, 312 * T, 1.935 * T, 40 << 20),
    ("a100-sxm4-80gb", 19.5 * T, 312 * T, 2.039 * T, 40 << 20),
    ("a100", 19.5 * T, 312 * T, 1.555 * T, 40 << 20),
    ("l40s", 91.6 * T, 362 * T, 0.864 * T, 96 << 20),
    ("l4", 30.3 * T, 121 * T, 0.300 * T, 48 << 20),
    ("b200", 75 * T, 2250 * T, 8.0 * T, 126 << 20),
]


def published_peaks(device_name: str) -> Peaks | None:
    """The datasheet peaks of ``device_name`` (as torch names it), or None for an unknown device."""
    name = device_name.lower()
    for key, fp32, tensor, bandwidth, cache in _TABLE:
        if key in name:
            return Peaks(
                device_name=device_name,
                kind="cuda",
                bandwidth_bytes_per_s=bandwidth,
                fp32_flops_per_s=fp32,
                tensor_flops_per_s=tensor,
                cache_bytes=cache,
                published_bandwidth_bytes_per_s=bandwidth,
                source="published",
                method=f"NVIDIA datasheet ({key})",
            )
    return None

"""Which GPUs a process evaluates on: the ``--gpus`` choice checked against what the probe saw.

Pure logic. A run is timed on one GPU model, so a choice that mixes models is refused: a speedup
is only ever a ratio of two timings taken on the same model, and every worker of a pool must be
interchangeable for the pool to hand an evaluation to whichever is free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host.device_probe import DeviceInfo


@dataclass(frozen=True)
class GpuChoice:
    """The chosen GPUs: ``indices`` as ``--gpus`` numbers them, ``physical`` as the driver does (what a
    worker's ``CUDA_VISIBLE_DEVICES`` must say), all of one ``model``."""

    indices: tuple[int, ...]
    physical: tuple[int, ...]
    model: DeviceInfo


def parse_gpus(spec: str | Sequence[int] | None) -> tuple[int, ...] | None:
    """``all``/``None`` -> None (every visible GPU); ``"0,1"`` or ``[0, 1]`` -> (0, 1)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("", "all"):
            return None
        try:
            return tuple(int(part) for part in text.split(","))
        except ValueError:
            raise EvaluatorError(f"--gpus {spec!r}: use all, or GPU indices like 0,1") from None
    return tuple(int(i) for i in spec)


def visible_physical(environ: Mapping[str, str], count: int) -> list[int]:
    """The driver's index of each GPU this process sees: ``CUDA_VISIBLE_DEVICES=2,3`` makes our 0 and 1
    the driver's 2 and 3 (a worker sets its own ``CUDA_VISIBLE_DEVICES``, so it needs the driver's)."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None or not raw.strip():
        return list(range(count))
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise EvaluatorError(
            f"CUDA_VISIBLE_DEVICES={raw!r} names GPUs by UUID; stark-mcp needs indices to give each "
            "worker its own GPU: unset it and choose with --gpus"
        )
    return [int(p) for p in parts][:count]


def choose_gpus(
    wanted: tuple[int, ...] | None, gpus: Sequence[DeviceInfo], physical: Sequence[int]
) -> GpuChoice:
    """Check ``wanted`` against the visible ``gpus``: every index exists and all are one model."""
    if not gpus:
        raise EvaluatorError("no CUDA device is visible here; use --device cpu")
    indices = tuple(range(len(gpus))) if wanted is None else wanted
    missing = [i for i in indices if not 0 <= i < len(gpus)]
    if missing:
        raise EvaluatorError(
            f"--gpus names GPU(s) {missing} but this machine shows {len(gpus)} (indices 0..{len(gpus) - 1})"
        )
    models = {gpus[i].name for i in indices}
    if len(models) > 1:
        listing = ", ".join(f"{i}: {gpus[i].name}" for i in indices)
        first = gpus[indices[0]].name
        same = ",".join(str(i) for i in indices if gpus[i].name == first)
        raise EvaluatorError(
            f"--gpus mixes GPU models ({listing}); a run is timed on one model, so its speedups "
            f"compare like with like: choose GPUs of one model, e.g. --gpus {same}"
        )
    return GpuChoice(indices, tuple(physical[i] for i in indices), gpus[indices[0]])

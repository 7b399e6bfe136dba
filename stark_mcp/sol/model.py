"""The speed-of-light records an evaluation carries. Pure data."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Bound = Literal["memory", "compute"]


class Peaks(BaseModel):
    """One machine's peaks, and where they came from."""

    model_config = ConfigDict(frozen=True)

    device_name: str
    kind: str = Field("cuda", description="cuda or cpu")
    bandwidth_bytes_per_s: float = Field(description="memory bandwidth, bytes read plus written per second")
    fp32_flops_per_s: float = Field(description="FP32 without tensor cores (TF32 off)")
    tensor_flops_per_s: float | None = Field(None, description="dense bf16/fp16 tensor-core matmul")
    cache_bytes: int = Field(0, description="last-level cache a short call's outputs may stay in")
    published_bandwidth_bytes_per_s: float | None = Field(
        None, description="the datasheet's, when known: the impossibility floor never uses less"
    )
    source: Literal["measured", "published"] = "measured"
    obtained_at: str = Field("", description="UTC time of the measurement (or of the lookup)")
    method: str = ""
    threads: int | None = Field(None, description="CPU: the threads measured (candidates run on one)")


class ShapeFloor(BaseModel):
    """What the reference's computation costs for one input set, and its floor on given peaks."""

    label: str
    input_bytes: int
    param_bytes: int
    output_bytes: int
    flops: dict[str, float] = Field(default_factory=dict, description="by class: matmul, matmul_lowp, ...")
    flops_by_op: dict[str, float] = Field(default_factory=dict, description="the largest aten ops")
    counted_on: str = Field("device", description="meta (no allocation) or device (one real call)")
    memory_ms: float = Field(
        0.0, description="every input and parameter read once, every output written once"
    )
    compute_ms: float = Field(0.0, description="the reference's FLOPs at the compute peaks")
    floor_ms: float = Field(0.0, description="max(memory_ms, compute_ms): the roofline")
    output_write_ms: float = Field(
        0.0, description="writing the outputs beyond the cache, at the margin x the measured bandwidth"
    )
    bound: Bound = "memory"

    @property
    def bytes(self) -> int:
        return self.input_bytes + self.param_bytes + self.output_bytes

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))


class SolShape(BaseModel):
    """One input set: its floor and the figure of record beside it."""

    floor: ShapeFloor
    time_ms: float | None = None
    fraction: float | None = Field(None, description="floor / time: 1.0 is the speed of light")


class SolReport(BaseModel):
    """Where an evaluation's time stands against the physical limit of its machine.

    With several input sets, ``floor_ms``, ``time_ms`` and ``fraction`` are geometric means, like
    ``Evaluation.runtime``."""

    floor_ms: float
    time_ms: float | None = None
    fraction: float | None = Field(None, description="floor / time of record, geometric mean over shapes")
    headroom: float | None = Field(None, description="time / floor: how many times faster the floor is")
    bound: Literal["memory", "compute", "mixed"] = "memory"
    compute_peak: str = Field("fp32", description="fp32 (no tensor cores) or tensor (bf16/fp16 matmuls)")
    shapes: list[SolShape] = Field(default_factory=list)
    peaks: Peaks
    margin: float = Field(description="bandwidth multiple the output-write floor is taken at")
    below_floor: bool = Field(False, description="a time beat writing its outputs: impossible")
    beyond_roofline: bool = Field(False, description="a time beat the reference's roofline")

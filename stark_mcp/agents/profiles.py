"""Profiles in a prompt: one short table of where the device time goes, per kernel (pure formatting).

The plan agent sees the node it improves and its best relatives side by side, so it can tell a
memory-bound kernel from a compute-bound or latency-bound one before choosing what to change.
``prompts/profile.md`` says how to read the columns; ``stark-mcp show --profile`` and the MCP tools
print the same table.
"""

from __future__ import annotations

from collections.abc import Sequence

from stark_mcp.records import KernelProfile, Node, ProfileReport

KERNELS_PER_NODE = 3
RELATIVES = 2
NAME_WIDTH = 40
COLUMNS = (
    "node",
    "kernel",
    "time (share)",
    "grid / block",
    "regs",
    "smem",
    "occupancy ach/theo",
    "DRAM %",
    "SM %",
    "L1/L2 hit %",
    "FLOP/byte",
    "roofline",
    "bound",
    "top stalls",
)
SOURCES = {"ncu": "Nsight Compute counters", "torch_profiler": "torch profiler only: no counters"}


def profiled_nodes(
    node: Node, relatives: Sequence[Node], limit: int = RELATIVES
) -> list[tuple[str, ProfileReport]]:
    """The node's profile first (when it has one), then those of its fastest relatives that passed."""
    ranked = sorted(
        (
            n
            for n in relatives
            if n.id != node.id
            and n.evaluation is not None
            and n.evaluation.passed
            and _profile(n) is not None
        ),
        key=lambda n: n.score,
    )
    chosen = ([node] if _profile(node) is not None else []) + ranked[:limit]
    return [(n.id, _profile(n)) for n in chosen]  # type: ignore[misc]


def render_profile_table(
    profiles: Sequence[tuple[str, ProfileReport]], per_node: int = KERNELS_PER_NODE
) -> str:
    """A markdown table of the slowest kernels of each (node id, profile), then one line per profile
    saying what measured it. Empty when no profile has kernels."""
    rows: list[str] = []
    notes: list[str] = []
    for node_id, report in profiles:
        if not report.kernels:
            continue
        notes.append(f"- {node_id}: {describe(report)}")
        rows += [_row(node_id, k) for k in report.kernels[:per_node]]
        hidden = len(report.kernels) - per_node
        if hidden > 0:
            rest = sum(k.share for k in report.kernels[per_node:])
            rows.append(f"| {node_id} | ({hidden} more kernels) | {_pct(rest)} |" + " |" * (len(COLUMNS) - 3))
    if not notes:
        return ""
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)
    return "\n".join([head, *rows]) + "\n\n" + "\n".join(notes)


def describe(report: ProfileReport) -> str:
    """One line: what measured the profile, on what, at what cost, and why not more."""
    parts = [SOURCES.get(report.source, "no profile")]
    if report.device_name:
        parts.append(report.device_name)
    if report.shape and report.shape != "default":
        parts.append(f"shape {report.shape}")
    if report.kernels:
        parts.append(f"{len(report.kernels)} kernels, {report.total_time_us:.4g} us device time")
    if report.seconds:
        parts.append(f"took {report.seconds:.1f} s")
    line = ", ".join(parts)
    if report.reason:
        line += f" ({report.reason[:300]})"
    if report.truncated:
        line += "; later launches were not profiled"
    return line + (". * marks the candidate's own kernels." if report.kernels else ".")


def _row(node_id: str, k: KernelProfile) -> str:
    name = k.short_name if len(k.short_name) <= NAME_WIDTH else k.short_name[: NAME_WIDTH - 3] + "..."
    name += "*" if k.own else ""
    if k.launches > 1:
        name += f" x{k.launches}"
    occupancy = "-"
    if k.achieved_occupancy_pct is not None or k.theoretical_occupancy_pct is not None:
        occupancy = f"{_num(k.achieved_occupancy_pct)}/{_num(k.theoretical_occupancy_pct)}"
    hits = (
        "-"
        if k.l1_hit_rate_pct is None and k.l2_hit_rate_pct is None
        else f"{_num(k.l1_hit_rate_pct)}/{_num(k.l2_hit_rate_pct)}"
    )
    roof = k.roofline
    intensity = f"{roof.arithmetic_intensity:.3g}" if roof and roof.arithmetic_intensity is not None else "-"
    roof_text = "-"
    if roof and roof.achieved_fraction is not None and roof.side:
        roof_text = f"{roof.achieved_fraction:.0%} of {'DRAM' if roof.side == 'memory' else 'FP'} roof"
        if roof.tensor_core:
            roof_text += " (tensor cores: FLOPs not counted)"
    stalls = ", ".join(f"{s.reason} {s.share:.0%}" for s in k.stalls) or "-"
    cells = [
        node_id,
        name,
        f"{k.time_us:.4g} us ({_pct(k.share)})",
        _launch(k.grid, k.block),
        _num(k.registers_per_thread),
        _bytes(k.shared_memory_bytes),
        occupancy,
        _num(k.dram_throughput_pct),
        _num(k.sm_throughput_pct),
        hits,
        intensity,
        roof_text,
        k.bound or "-",
        stalls,
    ]
    return "| " + " | ".join(cells) + " |"


def _profile(node: Node) -> ProfileReport | None:
    report = node.evaluation.profile if node.evaluation is not None else None
    return report if report is not None and report.kernels else None


def _launch(grid: list[int] | None, block: list[int] | None) -> str:
    if grid is None and block is None:
        return "-"
    return f"{_dims(grid)} / {_dims(block)}"


def _dims(dims: list[int] | None) -> str:
    if not dims:
        return "?"
    while len(dims) > 1 and dims[-1] == 1:
        dims = dims[:-1]
    return "x".join(str(d) for d in dims)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:.2g}"


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.3g} KiB" if value >= 1024 else f"{value} B"

"""PNG plots of a benchmark and of a single run (matplotlib, drawn off-screen).

Benchmark: best speedup so far vs attempts per strategy, speedup distribution per level,
success and fast_p bars per strategy. Run: each attempt's speedup with the best so far.
Every figure is against eager: the baseline every run has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stark_mcp.bench.metrics import (
    ALL_LEVELS,
    P_VALUES,
    all_metrics,
    best_so_far_curve,
    level_label,
    levels_of,
    strategies_of,
)
from stark_mcp.bench.rows import ResultRow, attempt_row
from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.records import Action
from stark_mcp.report.errors import ReportError

BASELINE = "eager"
STATUS_COLOURS = {
    "passed": "#2e9d4f",
    "wrong_output": "#e08a1e",
    "runtime_error": "#d1453b",
    "build_error": "#8e44ad",
    "load_error": "#b05fc4",
    "timeout": "#7f8c8d",
    "rejected": "#7b241c",
}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # off-screen: no display needed, and never a GUI window
        import matplotlib.pyplot as plt
    except ImportError as exc:  # a regular dependency; only a broken install gets here
        raise ReportError(
            f"PNG plots need matplotlib, which cannot be imported ({exc}); the other report files are "
            "written. Install it with: pip install matplotlib (a dependency of stark-mcp)"
        ) from None
    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _level_panels(rows: Sequence[ResultRow]) -> list[tuple[str, list[ResultRow]]]:
    levels = levels_of(rows)
    return [(lv, [r for r in rows if level_label(r.level) == lv]) for lv in levels] or [
        (ALL_LEVELS, list(rows))
    ]


def plot_best_so_far(rows: Sequence[ResultRow], path: Path) -> Path:
    plt = _pyplot()
    panels = _level_panels(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (level, picked) in zip(axes[0], panels, strict=True):
        for strategy in strategies_of(picked):
            curve = best_so_far_curve([r for r in picked if r.strategy == strategy], BASELINE)
            if curve:
                ax.plot(range(1, len(curve) + 1), curve, marker=".", label=strategy)
        ax.axhline(1.0, color="#999", lw=0.8, ls="--")
        ax.set_title(f"level {level}" if level not in (ALL_LEVELS, "custom") else level)
        ax.set_xlabel("attempts")
        ax.set_ylabel("geomean best speedup vs eager\n(unsolved = 1x)")
        ax.legend(fontsize=8)
    fig.suptitle("Best speedup so far vs attempts")
    return _save(fig, path)


def plot_speedup_distribution(rows: Sequence[ResultRow], path: Path) -> Path:
    plt = _pyplot()
    panels = _level_panels(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (level, picked) in zip(axes[0], panels, strict=True):
        strategies = strategies_of(picked)
        for i, strategy in enumerate(strategies):
            mine = [r for r in picked if r.strategy == strategy]
            values = [r.speedups[BASELINE] for r in mine if r.solved and BASELINE in r.speedups]
            if values:
                ax.boxplot([values], positions=[i], widths=0.5, showfliers=False)
                ax.scatter([i] * len(values), values, s=14, alpha=0.7, zorder=3)
            unsolved = len(mine) - len(values)
            if unsolved:
                ax.annotate(
                    f"{unsolved} unsolved",
                    (i, 1.0),
                    textcoords="offset points",
                    xytext=(0, -14),
                    ha="center",
                    fontsize=7,
                    color="#a33",
                )
        ax.set_xticks(range(len(strategies)), strategies, rotation=20, fontsize=8)
        ax.set_xlim(-0.6, len(strategies) - 0.4)
        ax.set_yscale("log")
        ax.axhline(1.0, color="#999", lw=0.8, ls="--")
        ax.set_title(f"level {level}" if level not in (ALL_LEVELS, "custom") else level)
        ax.set_ylabel("best speedup vs eager (solved problems)")
    fig.suptitle("Speedup distribution per level")
    return _save(fig, path)


def plot_success_fast_p(rows: Sequence[ResultRow], path: Path) -> Path:
    plt = _pyplot()
    groups = all_metrics(rows)[ALL_LEVELS]
    names = list(groups)
    bars = [("success", [groups[s].success_rate for s in names])]
    bars += [
        (f"fast_{p}", [groups[s].fast_p.get(BASELINE, {}).get(p) or 0.0 for s in names]) for p in P_VALUES
    ]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 2), 3.6))
    width = 0.8 / len(bars)
    for j, (label, values) in enumerate(bars):
        ax.bar([i + (j - (len(bars) - 1) / 2) * width for i in range(len(names))], values, width, label=label)
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of problems")
    ax.set_title("Success and fast_p vs eager, per strategy (all levels)")
    ax.legend(fontsize=8, ncol=len(bars))
    return _save(fig, path)


def plot_run(document: RunDocument, path: Path) -> Path:
    """One run: each attempt's speedup over eager (failures at the bottom, by verdict) and the best so far."""
    plt = _pyplot()
    attempts = [attempt_row(n) for n in document.nodes if n.action is not Action.ROOT]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    best, best_runtime, line = 1.0, math.inf, []
    for a in attempts:
        if a.runtime_ms is not None and a.runtime_ms < best_runtime and BASELINE in a.speedups:
            best, best_runtime = a.speedups[BASELINE], a.runtime_ms
        line.append(best)
    xs = range(1, len(attempts) + 1)
    if attempts:
        ax.step(list(xs), line, where="post", color="#333", label="best so far")
    floor = min([*line, *(a.speedups.get(BASELINE, 1.0) for a in attempts), 1.0]) * 0.8
    for status, colour in STATUS_COLOURS.items():
        picked = [(i, a) for i, a in zip(xs, attempts, strict=True) if a.status == status]
        if not picked:
            continue
        ys = [a.speedups.get(BASELINE, floor) if status == "passed" else floor for _, a in picked]
        ax.scatter(
            [i for i, _ in picked],
            ys,
            color=colour,
            label=status,
            zorder=3,
            marker="o" if status == "passed" else "x",
        )
    ax.axhline(1.0, color="#999", lw=0.8, ls="--")
    ax.set_xlabel("attempt")
    ax.set_ylabel("speedup vs eager")
    ax.set_title(f"{document.run.name}: {document.run.strategy}, run {document.run.id}")
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, path)

"""``report.json`` and ``report.md`` of a benchmark, from its rows. Pure.

report.json holds every number (per level and strategy: ``problems``, ``success_rate``,
``fast_p`` baseline -> p -> fraction, ``geomean_speedup`` and ``mean_speedup`` baseline -> value,
``cost_usd``, ``wall_s`` and the rest of ``GroupMetrics``); report.md holds the tables, ready to
paste. docs/bench.md defines each number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stark_mcp.bench.files import Manifest
from stark_mcp.bench.metrics import (
    ALL_LEVELS,
    P_VALUES,
    GroupMetrics,
    all_metrics,
    baseline_mode,
    baselines_of,
    best_so_far_curve,
    strategies_of,
)
from stark_mcp.bench.rows import ResultRow
from stark_mcp.report.viewer_data import clean


def report_document(manifest: Manifest, rows: Sequence[ResultRow]) -> dict[str, Any]:
    metrics = all_metrics(rows)
    present = {r.pair for r in rows}
    baselines = baselines_of(rows)
    return clean(
        {
            "bench_id": manifest.bench_id,
            "created_at": manifest.created_at,
            "command": manifest.command,
            "pairs": len(manifest.pairs),
            "pairs_with_results": len(rows),
            "pairs_complete": sum(r.complete for r in rows),
            "missing_pairs": [p for p in manifest.pairs if p not in present],
            "devices": sorted({r.device_name for r in rows if r.device_name} or {r.device for r in rows}),
            "models": sorted({r.model for r in rows if r.model}),
            "baselines": {name: {"mode": baseline_mode(name)} for name in baselines},
            "levels": {
                level: {s: m.model_dump(mode="json") for s, m in groups.items()}
                for level, groups in metrics.items()
            },
            "best_so_far": {
                name: {
                    s: best_so_far_curve([r for r in rows if r.strategy == s], name)
                    for s in strategies_of(rows)
                }
                for name in baselines
            },
            "problems": [_problem_line(r) for r in rows],
        }
    )


def _problem_line(row: ResultRow) -> dict[str, Any]:
    return {
        "pair": row.pair,
        "key": row.key,
        "name": row.name,
        "level": row.level,
        "strategy": row.strategy,
        "run_id": row.run_id,
        "complete": row.complete,
        "attempts": len(row.attempts),
        "budget": row.budget,
        "solved": row.solved,
        "best_node_id": row.best_node_id,
        "best_runtime_ms": row.best_runtime_ms,
        "baselines_ms": row.baselines_ms,
        "speedups": row.speedups,
        "cost_usd": row.usage.cost_usd,
        "tokens": row.usage.input_tokens + row.usage.output_tokens,
        "wall_s": row.wall_s,
        "sol_floor_ms": row.sol_floor_ms,
        "sol_fraction": row.sol_fraction,
        "reference_sol_fraction": row.reference_sol_fraction,
    }


# ---- markdown ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _table(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


def _level_title(level: str) -> str:
    return (
        "All levels"
        if level == ALL_LEVELS
        else ("Problems without a level" if level == "custom" else f"Level {level}")
    )


def _summary_table(groups: dict[str, GroupMetrics]) -> str:
    header = [
        "strategy",
        "problems",
        "success",
        "success (allclose 1e-2)",
        *(f"fast_{p} vs eager" for p in P_VALUES),
        "geomean vs eager",
        "mean vs eager",
        "compile rate",
        "correct rate",
        "fast layout",
        "attempts to 1st correct",
        "mean fraction of SOL",
        "cost/problem",
        "wall/problem",
    ]
    lines = []
    for name, m in groups.items():
        lines.append(
            [
                name,
                f"{m.problems}" + (f" ({m.complete} complete)" if m.complete != m.problems else ""),
                _pct(m.success_rate),
                _pct(m.success_rate_allclose),
                *(_pct(m.fast_p.get("eager", {}).get(p)) for p in P_VALUES),
                _x(m.geomean_speedup.get("eager")),
                _x(m.mean_speedup.get("eager")),
                _pct(m.compile_rate),
                _pct(m.correct_rate),
                _pct(m.fast_layout_share),
                _num(m.attempts_to_first_correct),
                _pct(m.mean_sol_fraction) + (f" ({m.beyond_sol} beyond)" if m.beyond_sol else ""),
                f"${m.cost_usd:.4f}",
                f"{m.wall_s:.0f} s",
            ]
        )
    return _table(header, lines)


def _baseline_table(metrics: dict[str, dict[str, GroupMetrics]], name: str) -> str:
    header = [
        "level",
        "strategy",
        "problems",
        *(f"fast_{p}" for p in P_VALUES),
        "geomean",
        "geomean (solved)",
        "mean",
        "mean (solved)",
    ]
    lines = []
    for level, groups in metrics.items():
        for strategy, m in groups.items():
            if name not in m.baseline_problems:
                continue
            lines.append(
                [
                    level,
                    strategy,
                    str(m.baseline_problems[name]),
                    *(_pct(m.fast_p[name][p]) for p in P_VALUES),
                    _x(m.geomean_speedup[name]),
                    _x(m.geomean_speedup_correct[name]),
                    _x(m.mean_speedup[name]),
                    _x(m.mean_speedup_correct[name]),
                ]
            )
    return _table(header, lines)


def _problem_table(rows: Sequence[ResultRow], baselines: list[str]) -> str:
    header = [
        "problem",
        "strategy",
        "run",
        "attempts",
        "best",
        *(f"vs {b}" for b in baselines),
        "floor",
        "SOL eager -> best",
        "cost",
        "wall",
    ]
    lines = []
    for r in rows:
        verdicts = sum(a.status == "passed" for a in r.attempts)
        lines.append(
            [
                f"{r.key} {r.name}" if r.key != r.name else r.name,
                r.strategy,
                f"`{r.run_id}`",
                f"{len(r.attempts)}/{r.budget} ({verdicts} correct)",
                r.best_node_id or "none",
                *(_x(r.speedups.get(b)) if r.solved else "" for b in baselines),
                f"{r.sol_floor_ms:.3g} ms" if r.sol_floor_ms is not None else "",
                f"{_pct(r.reference_sol_fraction) or '-'} -> {_pct(r.sol_fraction) or '-'}",
                f"${r.usage.cost_usd:.4f}",
                f"{r.wall_s:.0f} s",
            ]
        )
    return _table(header, lines)


def render_markdown(report: dict[str, Any], rows: Sequence[ResultRow]) -> str:
    metrics = all_metrics(rows)
    baselines = baselines_of(rows)
    command = report.get("command", {})
    summary = (
        f"{report['pairs_with_results']} of {report['pairs']} (problem, strategy) pairs have results, "
        f"{report['pairs_complete']} with their whole budget of {command.get('budget', '?')} attempts. "
        f"Device: {', '.join(report['devices']) or 'unknown'}. "
        f"Models: {', '.join(report['models']) or 'none recorded'}."
    )
    legend = (
        "Speedups are the best correct kernel's; an unsolved problem counts as 1x in `geomean` and "
        "`mean` and is left out of the `(solved)` columns. `fast_p`: the share of problems solved with "
        "a speedup above p. `fraction of SOL`: the problem's floor on the machine over the best "
        "kernel's time (1.0 = speed of light; docs/sol.md); its mean counts a kernel beyond the "
        "reference's roofline (an algebraic rewrite) as 1.0, and says how many were. "
        "Definitions: docs/bench.md."
    )
    parts = [f"# Benchmark {report['bench_id']}", "", summary, "", legend]
    # With one level, its tables would repeat the all-levels ones line for line.
    shown = metrics if len(metrics) > 2 else {ALL_LEVELS: metrics[ALL_LEVELS]}
    for level, groups in shown.items():
        parts += ["", f"## {_level_title(level)}", "", _summary_table(groups)]
    parts += ["", "## Versus each baseline"]
    for name in baselines:
        parts += ["", f"### {name}: {baseline_mode(name)}", "", _baseline_table(shown, name)]
    parts += ["", "## Per problem", "", _problem_table(rows, baselines)]
    overall = metrics.get(ALL_LEVELS, {})
    rejected = sum(m.rejected_allclose_ok for m in overall.values())
    parts += [
        "",
        "## Notes",
        "",
        (
            f"- {rejected} attempt(s) failed our evaluator (precision contract or anti-hacking checks) but "
            "pass KernelBench's `allclose(atol=rtol=1e-2)`; the `success (allclose 1e-2)` column counts "
            "them as KernelBench would."
        ),
    ]
    if report["missing_pairs"]:
        parts.append(f"- Pairs without results yet: {', '.join(report['missing_pairs'])}.")
    return "\n".join(parts) + "\n"

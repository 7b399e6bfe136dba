"""Timing the reference itself (eager and torch.compile) in clean processes, with the same timer."""

from __future__ import annotations

import asyncio
from typing import Any

from stark_mcp.evaluator.logs import trim_tail
from stark_mcp.evaluator.pipeline import fresh_seed
from stark_mcp.evaluator.process import ChannelError, ChildProcess
from stark_mcp.evaluator.settings import EvalSettings
from stark_mcp.evaluator.stats import timing_stats
from stark_mcp.problems import Problem


async def time_baseline(problem: Problem, device: str, name: str, settings: EvalSettings) -> dict[str, Any]:
    """One baseline in its own process: ``{"stats": {...}, "first_calls_s": ...}`` or ``{"missing": note}``."""
    spec = {"problem_source": problem.source, "device": device, "name": name, "init_seed": fresh_seed(),
            "timing_seeds": [fresh_seed() for _ in range(settings.input_sets)],
            "timing": settings.timing_spec()}
    async with ChildProcess("baseline", spec, settings.device_env(device), label=f"baseline {name}") as child:
        try:
            record = await child.next_record(settings.baseline_timeout_s)
        except asyncio.TimeoutError:
            return {"missing": f"{name} ran past its {settings.baseline_timeout_s:g} s budget"}
        except ChannelError as exc:
            return {"missing": f"{name}: {exc}"}
        if record is None:
            code, sig = await child.exit_status()
            return {"missing": f"{name}: the process died ({sig or f'exit code {code}'}): {child.log(1000)}"}
        if record["kind"] == "error":
            return {"missing": f"{name} failed: {record.get('message')}",
                    "traceback": trim_tail(str(record.get("traceback", "")), 2000)}
        try:
            stats = timing_stats(record.get("samples_ms") or [])
        except (ValueError, TypeError) as exc:
            return {"missing": f"{name}: invalid timing record: {exc}"}
        return {"stats": stats.model_dump(mode="json"), "first_calls_s": record.get("first_calls_s")}

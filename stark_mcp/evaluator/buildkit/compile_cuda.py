"""One ``.cu`` file's ladder: nvcc's own steps with the host and device front ends side by side
(``nvccplan.py``), first with the light include set when its profile allows (``light_gate.py``), then
the original text; nvcc itself when its steps cannot be planned or fail without a diagnostic.
Standard library only.
"""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import subprocess
import time
from typing import Any

from . import light, nvccplan
from .build_report import StepRecord
from .build_steps import FileOutcome, StepRunner, failure_log, write_text
from .light_gate import light_blocked
from .ninja import NinjaFile
from .request import ExtensionRequest, Toolchain


def compile_cu(
    nf: NinjaFile,
    edge: Any,
    request: ExtensionRequest,
    runner: StepRunner,
    pch_dir: str | None,
    toolchain: Toolchain,
    substitutes: dict[str, str],
    make_shared: bool = True,
    await_profiles: float = 0.0,
) -> FileOutcome:
    target, source = edge.outputs[0], edge.inputs[0]
    command = nf.command(edge)
    outcome = FileOutcome(ok=False)
    with open(source) as fh:
        original = fh.read()
    nvcc_words = shlex.split(nf.variables.get("nvcc", ""))
    variants: list[tuple[str, str]] = []
    pending = False  # the light variant is compiled before its profile exists, and checked after
    if len(nvcc_words) == 1:
        argv = nvccplan.strip_dependency_flags(shlex.split(command))
        light_text, swapped = light.rewrite(original, substitutes)
        if swapped:
            reason = light_blocked(
                original, swapped, substitutes, argv, source, pch_dir, toolchain, make_shared
            )
            pending = bool(reason) and light.NOT_MADE in reason and await_profiles > 0
            if reason and not pending:
                outcome.fallbacks.append(f"{target}: kept the full include set ({reason})")
            else:
                variants.append(("light+parallel", light_text))
        variants.append(("parallel", original))
    else:
        outcome.fallbacks.append(f"{target}: nvcc is a wrapper command; ran it as it is")
    try:
        for variant, text in variants:
            write_text(source, text)
            keep = os.path.join(runner.cwd, f"nvcc-{os.path.basename(target)}-{variant.replace('+', '-')}")
            try:
                plan = nvccplan.parse_dry_run(nvccplan.dry_run(argv, keep, runner.cwd))
            except (nvccplan.PlanUnavailable, subprocess.TimeoutExpired) as exc:
                outcome.fallbacks.append(f"{target}: no parallel plan ({exc}); ran nvcc as it is")
                break
            ok, log, genuine = _run_plan(plan, runner, target, variant, source)
            if ok and pending and variant == "light+parallel":
                late = light_blocked(
                    original, swapped, substitutes, argv, source, pch_dir, toolchain, make_shared,
                    wait=await_profiles,
                )  # fmt: skip
                if late:  # the profile, made meanwhile, does not allow it: the original is built
                    outcome.fallbacks.append(f"{target}: kept the full include set ({late})")
                    continue
            if ok:
                outcome.ok = True
                return outcome
            if variant == "light+parallel":
                outcome.fallbacks.append(
                    f"{target}: the light include set did not compile; built the original"
                )
                continue
            if genuine:
                outcome.log = log
                return outcome
            outcome.fallbacks.append(f"{target}: nvcc's steps failed without a diagnostic; ran nvcc as it is")
    finally:
        write_text(source, original)
    code, out, secs = runner.run(command)
    runner.record(StepRecord(target, "nvcc", secs, code == 0))
    outcome.ok = code == 0
    if not outcome.ok:
        outcome.log = failure_log(target, command, out)
    return outcome


def _run_plan(
    plan: nvccplan.NvccPlan, runner: StepRunner, target: str, variant: str, source: str
) -> tuple[bool, str, bool]:
    """Run both chains at once, then the host compile. Returns (ok, log, failed with a diagnostic)."""
    module_id = nvccplan.module_id_for(source, f"{time.time_ns()}:{os.getpid()}:{target}")
    with open(os.path.join(runner.cwd, plan.module_id_file), "w") as fh:
        fh.write(module_id)
    env = dict(os.environ)
    env.update(plan.env)

    def chain(commands: list[str]) -> tuple[int, str, str, float, float]:
        total = 0.0
        for cmd in commands:
            code, out, secs = runner.run(cmd, env)
            total += secs
            if code != 0:
                return code, out, cmd, total, runner.take_cpu()
        return 0, "", "", total, runner.take_cpu()

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        host_f, device_f = pool.submit(chain, plan.host), pool.submit(chain, plan.device)
        host, device = host_f.result(), device_f.result()
    failed = host if host[0] != 0 else device if device[0] != 0 else None
    if failed is None:
        code, out, secs = runner.run(plan.final, env)
        failed = (code, out, plan.final, secs, 0.0) if code != 0 else None
    note = (
        f"host chain {host[3]:.1f} s ({host[4]:.1f} s CPU), device chain {device[3]:.1f} s "
        f"({device[4]:.1f} s CPU), then the host compile"
    )
    runner.record(
        StepRecord(target, variant, time.monotonic() - start, failed is None, note), host[4] + device[4]
    )
    if failed is None:
        return True, "", False
    code, out, cmd = failed[:3]
    genuine = code in (1, 2) and "error" in out.lower()
    return False, failure_log(target, cmd, out), genuine

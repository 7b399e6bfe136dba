"""Build one ``ExtensionRequest`` into a directory, fast where provably equivalent, else as torch does.

Strategy ``fast`` takes torch's own build plan (the ninja file ``load_inline`` would run) and runs
its steps itself, with three changes that do not alter what any kernel computes:

- host C++ files whose first include is ``<torch/extension.h>`` use a precompiled header shared by
  every build with the same compiler and flags (``pch.py``);
- ``.cu`` files run nvcc's own steps with the host and device front ends side by side
  (``nvccplan.py``);
- a ``.cu`` that includes ``<torch/extension.h>`` is first compiled with ``<torch/types.h>``
  instead, when none of its identifiers is among those only the full header brings (``light.py``).

Each file has a ladder that ends with torch's exact command for that file: a light ``.cu`` that
fails is built from its original text; if nvcc's steps cannot be planned, or fail without a
compiler diagnostic, nvcc itself runs. A source with a genuine compile error therefore fails with
the compiler's own messages. Strategy ``plain`` is torch's build, unchanged.

The steps of a build are ``build_steps.py``, its report ``build_report.py``; each file's ladder is
``compile_host.py`` (C++) or ``compile_cuda.py`` (``.cu``), the light include set's gate
``light_gate.py``, and making the shared headers and profiles ahead ``prime.py``.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import time

from .build_report import BuildReport, StepRecord, finish_report
from .build_steps import FileOutcome, StepRunner, default_jobs, failure_log, read_text
from .compile_cuda import compile_cu
from .compile_host import compile_cpp
from .light_gate import LIGHT_DEFAULT
from .ninja import NinjaFormatError, parse
from .request import ExtensionRequest, Toolchain
from .torchplan import Rendered, RenderError, build_plain, library_name, render, write_ninja


def build(
    request: ExtensionRequest,
    out_dir: str,
    *,
    strategy: str = "fast",
    pch_dir: str | None = None,
    link: bool = True,
    jobs: int | None = None,
    light_substitutes: dict[str, str] | None = None,
    make_shared: bool = True,
    await_profiles: float = 0.0,
) -> BuildReport:
    """Build ``request`` into ``out_dir`` (``<name>.so`` there) and write ``build_report.json``.

    ``pch_dir`` holds the shared precompiled headers and light-include profiles; without it the
    fast strategy uses neither. ``make_shared=False`` only reads ``pch_dir`` (a compile jail: what
    is missing there is skipped, never made; ``prime`` makes it). ``link=False`` stops after the
    object files (compile-only checks on machines without torch's CUDA libraries).
    ``await_profiles``: trusted code is making the include profiles right now; a light variant is
    compiled meanwhile and kept only if its profile, waited for up to that long, then allows it.
    """
    start = time.monotonic()
    out_dir = os.path.abspath(out_dir)
    build_dir = os.path.join(out_dir, "build")
    os.makedirs(build_dir, exist_ok=True)
    report = BuildReport(ok=False, name=request.name, strategy=strategy)
    try:
        rendered = render(request, build_dir)
    except RenderError as exc:
        report.log = str(exc)
        return finish_report(report, out_dir, start)
    report.name = rendered.name
    if strategy == "fast":
        try:
            outcome, steps = _build_fast(
                rendered,
                request,
                build_dir,
                pch_dir,
                link,
                jobs,
                LIGHT_DEFAULT if light_substitutes is None else light_substitutes,
                make_shared,
                await_profiles,
            )
            report.steps = steps
            report.ok, report.log = outcome.ok, outcome.log
            report.fallbacks += outcome.fallbacks
            report.pch_built_seconds = outcome.pch_seconds
        except (NinjaFormatError, OSError, KeyError, ValueError) as exc:
            report.fallbacks.append(
                f"fast strategy unavailable ({type(exc).__name__}: {exc}); built as torch does"
            )
            strategy = "plain"
            report.strategy = "plain"
            shutil.rmtree(build_dir, ignore_errors=True)
            rendered = render(request, build_dir)
    if strategy == "plain":
        t0 = time.monotonic()
        try:
            build_plain(rendered, build_dir) if link else _compile_only_plain(rendered, build_dir)
            report.ok = True
        except RuntimeError as exc:
            report.log = str(exc)
        report.steps.append(StepRecord("all", "plain", time.monotonic() - t0, report.ok))
    if report.ok and link:
        lib = library_name(rendered)
        shutil.copy2(os.path.join(build_dir, lib), os.path.join(out_dir, lib))
        report.library = lib
    return finish_report(report, out_dir, start)


def _compile_only_plain(rendered: Rendered, build_dir: str) -> None:
    nf = parse(read_text(write_ninja(rendered, build_dir)))
    for edge in nf.edges:
        if edge.rule == "link":
            continue
        done = subprocess.run(
            nf.command(edge),
            check=False,
            shell=True,
            executable="/bin/bash",
            cwd=build_dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        if done.returncode != 0:
            raise RuntimeError(f"Error building extension '{rendered.name}': {done.stdout}")


def _build_fast(
    rendered: Rendered,
    request: ExtensionRequest,
    build_dir: str,
    pch_dir: str | None,
    link: bool,
    jobs: int | None,
    substitutes: dict[str, str],
    make_shared: bool = True,
    await_profiles: float = 0.0,
) -> tuple[FileOutcome, list[StepRecord]]:
    nf = parse(read_text(write_ninja(rendered, build_dir)))
    unknown = {e.rule for e in nf.edges} - {"compile", "cuda_compile", "link"}
    if unknown:
        raise NinjaFormatError(f"unexpected build rules {sorted(unknown)}")
    runner = StepRunner(build_dir, jobs if jobs is not None else default_jobs())
    toolchain = Toolchain.detect()
    compiles = [e for e in nf.edges if e.rule != "link"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(compiles))) as pool:
        futures = [
            pool.submit(
                compile_cpp if e.rule == "compile" else compile_cu,
                nf,
                e,
                request,
                runner,
                pch_dir,
                toolchain,
                substitutes,
                make_shared,
                await_profiles,
            )
            for e in compiles
        ]
        outcomes = [f.result() for f in futures]
    merged = FileOutcome(
        ok=all(o.ok for o in outcomes),
        log="\n".join(o.log for o in outcomes if not o.ok),
        fallbacks=[f for o in outcomes for f in o.fallbacks],
        pch_seconds=sum(o.pch_seconds for o in outcomes),
    )
    if merged.ok and link:
        for edge in (e for e in nf.edges if e.rule == "link"):
            code, out, secs = runner.run(nf.command(edge))
            runner.record(StepRecord(edge.outputs[0], "link", secs, code == 0))
            if code != 0:
                merged.ok = False
                merged.log = failure_log(edge.outputs[0], nf.command(edge), out)
    if not merged.ok:
        merged.log = f"Error building extension '{rendered.name}': {merged.log}"
    return merged, runner.steps

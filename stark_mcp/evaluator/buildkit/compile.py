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
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import light, nvccplan, pch
from .ninja import NinjaFile, NinjaFormatError, parse
from .request import ExtensionRequest, Toolchain
from .torchplan import Rendered, RenderError, build_plain, library_name, render, write_ninja

REPORT_FILE = "build_report.json"
LOG_FILE = "build.log"


@dataclass
class StepRecord:
    target: str
    variant: str  # pch | plain | light+parallel | parallel | nvcc | link
    seconds: float
    ok: bool
    note: str = ""
    cpu_seconds: float = 0.0  # compilers' user + system time: the measure to compare on a loaded machine


@dataclass
class BuildReport:
    ok: bool
    name: str
    strategy: str  # fast | plain
    library: str | None = None
    seconds: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    pch_built_seconds: float = 0.0
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildReport:
        steps = [StepRecord(**s) for s in data.get("steps", [])]
        return cls(**{**data, "steps": steps})


class _Runner:
    """Runs shell commands in ``cwd``, at most ``jobs`` at once, recording each step."""

    def __init__(self, cwd: str, jobs: int | None) -> None:
        self.cwd = cwd
        self._slots = threading.BoundedSemaphore(jobs) if jobs else None
        self.steps: list[StepRecord] = []
        self.cpu: dict[int, float] = {}
        self._lock = threading.Lock()

    def run(self, command: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
        """Exit code, output and wall seconds; the CPU seconds are added to ``self.cpu[thread]``."""
        if self._slots:
            self._slots.acquire()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                shell=True,
                executable="/bin/bash",
                cwd=self.cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            assert proc.stdout is not None
            output = proc.stdout.read().decode(errors="replace")
            proc.stdout.close()
            # wait4 reports the CPU time of the command and every process it waited for (compilers).
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if self._slots:
                self._slots.release()
        with self._lock:
            key = threading.get_ident()
            self.cpu[key] = self.cpu.get(key, 0.0) + usage.ru_utime + usage.ru_stime
        return proc.returncode, output, time.monotonic() - start

    def take_cpu(self) -> float:
        """CPU seconds of the commands this thread ran since the last call."""
        with self._lock:
            return self.cpu.pop(threading.get_ident(), 0.0)

    def record(self, step: StepRecord, extra_cpu: float = 0.0) -> None:
        step.cpu_seconds = self.take_cpu() + extra_cpu
        with self._lock:
            self.steps.append(step)


@dataclass
class _Outcome:
    ok: bool
    log: str = ""
    fallbacks: list[str] = field(default_factory=list)
    pch_seconds: float = 0.0


def default_jobs() -> int | None:
    value = os.environ.get("MAX_JOBS")
    return int(value) if value and value.isdigit() and int(value) > 0 else None


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
        return _finish(report, out_dir, start)
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
    return _finish(report, out_dir, start)


LIGHT_DEFAULT = light.LIGHT_SUBSTITUTES


PRIME_PARTS = ("light", "pch")


def prime(
    request: ExtensionRequest, work_dir: str, pch_dir: str, parts: tuple[str, ...] = PRIME_PARTS
) -> list[str]:
    """Make the precompiled headers and include profiles ``request``'s fast build would use.

    Trusted code runs this so that compile jails can read ``pch_dir`` without writing it. It renders
    the request (writing its sources as text) but compiles only torch's own headers, with the
    request's flags: callers prime only requests whose flags cannot load or run anything
    (``request.flags_are_plain``). ``parts``: ``light`` (include profiles of ``.cu`` files, a few
    seconds of preprocessing) and/or ``pch`` (precompiled headers of host files, the slow part).
    Returns one note per shared file found or made.
    """
    build_dir = os.path.join(os.path.abspath(work_dir), "build")
    os.makedirs(build_dir, exist_ok=True)
    rendered = render(request, build_dir)
    nf = parse(_read(write_ninja(rendered, build_dir)))
    toolchain = Toolchain.detect()
    jobs: list[Callable[[], str]] = []
    for edge in nf.edges:
        source, command = edge.inputs[0] if edge.inputs else "", nf.command(edge)
        if edge.rule == "compile":
            header = pch.first_include(_read(source))
            if header not in pch.PCH_HEADERS or not pch.user_flags_allow_pch(
                request.extra_cflags, request.extra_include_paths
            ):
                continue
            compiler = shlex.split(nf.variables["cxx"])
            words = shlex.split(command)[len(compiler) :]
            flags = [w for w in words if w != source]
            if "pch" in parts:
                jobs.append(functools.partial(_prime_pch, pch_dir, compiler, flags, header, words, toolchain))
            if "light" in parts and header in light.HOST_SUBSTITUTES:
                jobs.append(functools.partial(_prime_host_light, compiler, flags, source, pch_dir, toolchain))
        elif (
            edge.rule == "cuda_compile"
            and "light" in parts
            and len(shlex.split(nf.variables.get("nvcc", ""))) == 1
        ):
            original = _read(source)
            _text, swapped = light.rewrite(original, LIGHT_DEFAULT)
            if swapped:
                argv = nvccplan.strip_dependency_flags(shlex.split(command))
                jobs.append(
                    functools.partial(
                        _prime_note,
                        "light profile",
                        functools.partial(
                            _light_blocked, original, swapped, LIGHT_DEFAULT, argv, source, pch_dir, toolchain
                        ),
                    )
                )
    # side by side: a first build on a GPU machine waits for the profiles of both its files
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        return list(pool.map(lambda job: job(), jobs))


def _prime_pch(
    pch_dir: str, compiler: list[str], flags: list[str], header: str, words: list[str], toolchain: Toolchain
) -> str:
    made = pch.ensure_pch(
        os.path.join(pch_dir, "pch"), compiler, flags, header, _isystem_dirs(words), toolchain.cxx_version
    )
    return f"pch {header}: " + ("ready" if made.flags else made.reason)


def _prime_host_light(
    compiler: list[str], flags: list[str], source: str, pch_dir: str, toolchain: Toolchain
) -> str:
    original = _read(source)
    _text, swapped = light.rewrite(original, light.HOST_SUBSTITUTES)
    argv = host_profile_argv(compiler, flags)
    blocked = functools.partial(
        _light_blocked, original, swapped, light.HOST_SUBSTITUTES, argv, source, pch_dir, toolchain, host=True
    )
    return _prime_note("host light profile", blocked)


def _prime_note(what: str, blocked: Callable[[], str]) -> str:
    reason = blocked()
    return f"{what}: " + ("ready" if not reason else reason)


def _finish(report: BuildReport, out_dir: str, start: float) -> BuildReport:
    build_dir = os.path.join(out_dir, "build")
    if os.path.isdir(build_dir):  # nvcc's kept intermediates are ~50 MB per file with torch headers
        for entry in os.listdir(build_dir):
            if entry.startswith("nvcc-"):
                shutil.rmtree(os.path.join(build_dir, entry), ignore_errors=True)
    report.seconds = round(time.monotonic() - start, 3)
    for step in report.steps:
        step.seconds = round(step.seconds, 3)
    with open(os.path.join(out_dir, LOG_FILE), "w") as fh:
        fh.write(report.log)
    with open(os.path.join(out_dir, REPORT_FILE), "w") as fh:
        json.dump(report.to_dict(), fh, indent=1)
    return report


def _compile_only_plain(rendered: Rendered, build_dir: str) -> None:
    nf = parse(_read(write_ninja(rendered, build_dir)))
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
) -> tuple[_Outcome, list[StepRecord]]:
    nf = parse(_read(write_ninja(rendered, build_dir)))
    unknown = {e.rule for e in nf.edges} - {"compile", "cuda_compile", "link"}
    if unknown:
        raise NinjaFormatError(f"unexpected build rules {sorted(unknown)}")
    runner = _Runner(build_dir, jobs if jobs is not None else default_jobs())
    toolchain = Toolchain.detect()
    compiles = [e for e in nf.edges if e.rule != "link"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(compiles))) as pool:
        futures = [
            pool.submit(
                _compile_cpp if e.rule == "compile" else _compile_cu,
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
    merged = _Outcome(
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
                merged.log = _failure(edge.outputs[0], nf.command(edge), out)
    if not merged.ok:
        merged.log = f"Error building extension '{rendered.name}': {merged.log}"
    return merged, runner.steps


def _failure(target: str, command: str, output: str) -> str:
    return f"FAILED: {target}\n{command}\n{output}"


def _compile_cpp(
    nf: NinjaFile,
    edge: Any,
    request: ExtensionRequest,
    runner: _Runner,
    pch_dir: str | None,
    toolchain: Toolchain,
    substitutes: dict[str, str],
    make_shared: bool = True,
    await_profiles: float = 0.0,
) -> _Outcome:
    target, source = edge.outputs[0], edge.inputs[0]
    command = nf.command(edge)
    outcome = _Outcome(ok=False)
    header = pch.first_include(_read(source))
    if (
        pch_dir
        and header in pch.PCH_HEADERS
        and pch.user_flags_allow_pch(request.extra_cflags, request.extra_include_paths)
    ):
        compiler = shlex.split(nf.variables["cxx"])
        words = shlex.split(command)[len(compiler) :]
        flags = [w for w in words if w != source]
        include_dirs = _isystem_dirs(words)
        made = pch.ensure_pch(
            os.path.join(pch_dir, "pch"),
            compiler,
            flags,
            header,
            include_dirs,
            toolchain.cxx_version,
            make=make_shared,
        )
        outcome.pch_seconds = made.built_seconds or 0.0
        if made.flags:
            code, out, secs = runner.run(command + " " + shlex.join(made.flags))
            blamed = code != 0 and pch.blames_pch(out, made)
            note = "pch rejected by the compiler" if "invalid-pch" in out or ".gch" in out else ""
            runner.record(StepRecord(target, "pch", secs, code == 0, note))
            if code == 0:
                outcome.ok = True
                return outcome
            if not blamed:
                # The precompiled header is torch's header as GCC would parse it at that line: an error
                # that names neither it nor its directory is the source's own, and recurs without it.
                outcome.log = _failure(target, command, out)
                return outcome
            outcome.fallbacks.append(f"{target}: failed with the precompiled header; compiled without it")
        else:
            outcome.fallbacks.append(f"{target}: no precompiled header ({made.reason})")
            if substitutes and _compile_cpp_light(
                command, compiler, flags, source, target, runner, pch_dir, toolchain, make_shared, outcome,
                await_profiles,
            ):  # fmt: skip
                outcome.ok = True
                return outcome
    code, out, secs = runner.run(command)
    runner.record(StepRecord(target, "plain", secs, code == 0))
    outcome.ok = code == 0
    if not outcome.ok:
        outcome.log = _failure(target, command, out)
    return outcome


def _compile_cpp_light(
    command: str,
    compiler: list[str],
    flags: list[str],
    source: str,
    target: str,
    runner: _Runner,
    pch_dir: str,
    toolchain: Toolchain,
    make_shared: bool,
    outcome: _Outcome,
    await_profiles: float = 0.0,
) -> bool:
    """The host file with ``light.HOST_SUBSTITUTES``, when its profile allows; False: build the original."""
    original = _read(source)
    light_text, swapped = light.rewrite(original, light.HOST_SUBSTITUTES)
    if not swapped:
        return False
    argv = host_profile_argv(compiler, flags)

    def blocked(wait: float) -> str:
        return _light_blocked(
            original, swapped, light.HOST_SUBSTITUTES, argv, source, pch_dir, toolchain, make_shared,
            host=True, wait=wait,
        )  # fmt: skip

    reason = blocked(0.0)
    pending = bool(reason) and light.NOT_MADE in reason and await_profiles > 0
    if reason and not pending:
        outcome.fallbacks.append(f"{target}: kept the full include set ({reason})")
        return False
    try:
        _write(source, light_text)
        code, _out, secs = runner.run(command)
    finally:
        _write(source, original)
    runner.record(StepRecord(target, "light", secs, code == 0))
    if code != 0:
        outcome.fallbacks.append(f"{target}: the light include set did not compile; built the original")
        return False
    late = blocked(await_profiles) if pending else ""
    if late:  # compiled while the profile was made, and the profile does not allow it: not used
        outcome.fallbacks.append(f"{target}: kept the full include set ({late})")
    return not late


def host_profile_argv(compiler: list[str], flags: list[str]) -> list[str]:
    """A host compile command as its include profile is keyed: no outputs, dependency files or name."""
    return [*compiler, *pch.pch_flags(flags)]


def _isystem_dirs(words: list[str]) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-isystem"]


def _compile_cu(
    nf: NinjaFile,
    edge: Any,
    request: ExtensionRequest,
    runner: _Runner,
    pch_dir: str | None,
    toolchain: Toolchain,
    substitutes: dict[str, str],
    make_shared: bool = True,
    await_profiles: float = 0.0,
) -> _Outcome:
    target, source = edge.outputs[0], edge.inputs[0]
    command = nf.command(edge)
    outcome = _Outcome(ok=False)
    with open(source) as fh:
        original = fh.read()
    nvcc_words = shlex.split(nf.variables.get("nvcc", ""))
    variants: list[tuple[str, str]] = []
    pending = False  # the light variant is compiled before its profile exists, and checked after
    if len(nvcc_words) == 1:
        argv = nvccplan.strip_dependency_flags(shlex.split(command))
        light_text, swapped = light.rewrite(original, substitutes)
        if swapped:
            reason = _light_blocked(
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
            _write(source, text)
            keep = os.path.join(runner.cwd, f"nvcc-{os.path.basename(target)}-{variant.replace('+', '-')}")
            try:
                plan = nvccplan.parse_dry_run(nvccplan.dry_run(argv, keep, runner.cwd))
            except (nvccplan.PlanUnavailable, subprocess.TimeoutExpired) as exc:
                outcome.fallbacks.append(f"{target}: no parallel plan ({exc}); ran nvcc as it is")
                break
            ok, log, genuine = _run_plan(plan, runner, target, variant, source)
            if ok and pending and variant == "light+parallel":
                late = _light_blocked(
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
        _write(source, original)
    code, out, secs = runner.run(command)
    runner.record(StepRecord(target, "nvcc", secs, code == 0))
    outcome.ok = code == 0
    if not outcome.ok:
        outcome.log = _failure(target, command, out)
    return outcome


def _read(path: str) -> str:
    with open(path, errors="replace") as fh:
        return fh.read()


def _write(path: str, text: str) -> None:
    with open(path) as fh:
        if fh.read() == text:
            return
    with open(path, "w") as fh:
        fh.write(text)


def _light_blocked(
    original: str,
    swapped: list[str],
    substitutes: dict[str, str],
    argv: list[str],
    source: str,
    pch_dir: str | None,
    toolchain: Toolchain,
    make_shared: bool = True,
    host: bool = False,
    wait: float = 0.0,
) -> str:
    if not pch_dir:
        return "no profile directory"
    pre = _preprocess_argv(argv, source)
    for full in swapped:
        kind = ["host"] if host else []  # a host profile is keyed apart from an nvcc one
        blob = json.dumps([pre, full, substitutes[full], toolchain.fingerprint(), *kind])
        key = hashlib.sha256(blob.encode()).hexdigest()[:24]
        try:
            profile = light.load_or_make_profile(
                os.path.join(pch_dir, "light"), key, pre, full, substitutes[full],
                make=make_shared, host=host, wait=wait,
            )  # fmt: skip
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            return f"no profile: {exc}"[:300]
        clash = light.blocking_names(original, profile)
        if clash:
            return "names only the full header declares: " + ", ".join(clash[:8])
    return ""


def _preprocess_argv(argv: list[str], source: str) -> list[str]:
    """The command minus input, output and the extension's name (no torch header reads
    ``TORCH_EXTENSION_NAME``), so one profile serves every extension built with these flags."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "-o":
            skip = True
            continue
        if word in ("-c", source) or word.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        out.append(word)
    return out


def _run_plan(
    plan: nvccplan.NvccPlan, runner: _Runner, target: str, variant: str, source: str
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
    return False, _failure(target, cmd, out), genuine

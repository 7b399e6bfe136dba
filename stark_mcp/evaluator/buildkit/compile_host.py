"""One host C++ file's ladder: with the shared precompiled header (``pch.py``), else with the light
include set when its profile allows (``light_gate.py``), else torch's exact command. Standard library
only.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from . import light, pch
from .build_report import StepRecord
from .build_steps import FileOutcome, StepRunner, failure_log, read_text, write_text
from .light_gate import host_profile_argv, light_blocked
from .ninja import NinjaFile
from .request import ExtensionRequest, Toolchain


def compile_cpp(
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
    header = pch.first_include(read_text(source))
    if (
        pch_dir
        and header in pch.PCH_HEADERS
        and pch.user_flags_allow_pch(request.extra_cflags, request.extra_include_paths)
    ):
        compiler = shlex.split(nf.variables["cxx"])
        words = shlex.split(command)[len(compiler) :]
        flags = [w for w in words if w != source]
        include_dirs = isystem_dirs(words)
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
                outcome.log = failure_log(target, command, out)
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
        outcome.log = failure_log(target, command, out)
    return outcome


def _compile_cpp_light(
    command: str,
    compiler: list[str],
    flags: list[str],
    source: str,
    target: str,
    runner: StepRunner,
    pch_dir: str,
    toolchain: Toolchain,
    make_shared: bool,
    outcome: FileOutcome,
    await_profiles: float = 0.0,
) -> bool:
    """The host file with ``light.HOST_SUBSTITUTES``, when its profile allows; False: build the original."""
    original = read_text(source)
    light_text, swapped = light.rewrite(original, light.HOST_SUBSTITUTES)
    if not swapped:
        return False
    argv = host_profile_argv(compiler, flags)

    def blocked(wait: float) -> str:
        return light_blocked(
            original, swapped, light.HOST_SUBSTITUTES, argv, source, pch_dir, toolchain, make_shared,
            host=True, wait=wait,
        )  # fmt: skip

    reason = blocked(0.0)
    pending = bool(reason) and light.NOT_MADE in reason and await_profiles > 0
    if reason and not pending:
        outcome.fallbacks.append(f"{target}: kept the full include set ({reason})")
        return False
    try:
        write_text(source, light_text)
        code, _out, secs = runner.run(command)
    finally:
        write_text(source, original)
    runner.record(StepRecord(target, "light", secs, code == 0))
    if code != 0:
        outcome.fallbacks.append(f"{target}: the light include set did not compile; built the original")
        return False
    late = blocked(await_profiles) if pending else ""
    if late:  # compiled while the profile was made, and the profile does not allow it: not used
        outcome.fallbacks.append(f"{target}: kept the full include set ({late})")
    return not late


def isystem_dirs(words: list[str]) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-isystem"]

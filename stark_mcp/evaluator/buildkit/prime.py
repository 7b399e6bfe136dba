"""Priming: trusted code makes the precompiled headers and include profiles a request's fast build
would use, so that compile jails read the shared directory without writing it. Standard library only.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import shlex
from collections.abc import Callable

from . import light, nvccplan, pch
from .build_steps import read_text
from .compile_host import isystem_dirs
from .light_gate import LIGHT_DEFAULT, host_profile_argv, light_blocked
from .ninja import parse
from .request import ExtensionRequest, Toolchain
from .torchplan import render, write_ninja

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
    nf = parse(read_text(write_ninja(rendered, build_dir)))
    toolchain = Toolchain.detect()
    jobs: list[Callable[[], str]] = []
    for edge in nf.edges:
        source, command = edge.inputs[0] if edge.inputs else "", nf.command(edge)
        if edge.rule == "compile":
            header = pch.first_include(read_text(source))
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
            original = read_text(source)
            _text, swapped = light.rewrite(original, LIGHT_DEFAULT)
            if swapped:
                argv = nvccplan.strip_dependency_flags(shlex.split(command))
                jobs.append(
                    functools.partial(
                        _prime_note,
                        "light profile",
                        functools.partial(
                            light_blocked, original, swapped, LIGHT_DEFAULT, argv, source, pch_dir, toolchain
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
        os.path.join(pch_dir, "pch"), compiler, flags, header, isystem_dirs(words), toolchain.cxx_version
    )
    return f"pch {header}: " + ("ready" if made.flags else made.reason)


def _prime_host_light(
    compiler: list[str], flags: list[str], source: str, pch_dir: str, toolchain: Toolchain
) -> str:
    original = read_text(source)
    _text, swapped = light.rewrite(original, light.HOST_SUBSTITUTES)
    argv = host_profile_argv(compiler, flags)
    blocked = functools.partial(
        light_blocked, original, swapped, light.HOST_SUBSTITUTES, argv, source, pch_dir, toolchain, host=True
    )
    return _prime_note("host light profile", blocked)


def _prime_note(what: str, blocked: Callable[[], str]) -> str:
    reason = blocked()
    return f"{what}: " + ("ready" if not reason else reason)

"""A lighter include set for CUDA sources that include ``<torch/extension.h>``.

``torch/extension.h`` is ``torch/all.h`` (modules, optimizers, data loaders, JIT, serialization)
plus ``torch/python.h`` (pybind11). Device code and the usual host wrapper need only
``torch/types.h`` (tensors, ATen ops, ``TORCH_CHECK``), which ``load_inline`` puts at the top of
every ``.cu`` anyway. Swapping the include saves the two front ends a third of their parse.

A smaller include set can only change a program that still compiles if the program names
something the dropped headers declare or define (a macro tested by ``#ifdef``, an overload).
So the swap is made only when no identifier in the source is among those that occur in the full
set's preprocessed text and not in the light set's (the *profile*, computed once per toolchain
and flags by trusted code). Otherwise, or when the light file fails to compile, the original is
built.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass

from .pch import exclusive

LIGHT_SUBSTITUTES: dict[str, str] = {"torch/extension.h": "torch/types.h"}
# The host file binds functions with pybind11, so it keeps torch/python.h (which brings torch/types.h
# and torch's pybind11 casters) and drops torch/all.h: 9.1 s against 13.8 s for a small wrapper on
# the dev machine. It is used where no precompiled header is ready yet (a GPU machine's first build).
HOST_SUBSTITUTES: dict[str, str] = {"torch/extension.h": "torch/python.h"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _include_line(header: str) -> re.Pattern[str]:
    return re.compile(
        r'^([ \t]*#[ \t]*include[ \t]*)[<"]' + re.escape(header) + r'[>"]([ \t]*(?://.*)?)$', re.MULTILINE
    )


def rewrite(text: str, substitutes: dict[str, str]) -> tuple[str, list[str]]:
    """Replace whole ``#include`` lines of each header by its substitute; line numbers stay."""
    swapped = []
    for full, light in substitutes.items():
        text, count = _include_line(full).subn(lambda m, light=light: f"{m.group(1)}<{light}>", text)
        if count:
            swapped.append(full)
    return text, swapped


def identifiers(text: str) -> set[str]:
    return set(_IDENT.findall(text))


@dataclass(frozen=True)
class Profile:
    """What only the full header brings: macro names, and every other identifier in its text."""

    macros: frozenset[str]
    names: frozenset[str]


def blocking_names(source: str, profile: Profile) -> list[str]:
    """Names of ``source`` through which the dropped headers could change its meaning.

    A macro only the full header defines counts wherever it appears. Any other identifier only the
    full header mentions counts where the source could look it up in torch: in a call or template
    argument list position (``name(``, ``name<``: overloads, found also through argument-dependent
    lookup), in a qualified name (``ns::name``, ``name::``), or on a preprocessor line. A use as a
    plain variable (``rows * cols``) resolves to the source's own declaration, which hides any
    namespace-scope one; without such a declaration the light build fails and the original is built.
    """
    names = identifiers(source)
    hits = set(names & profile.macros)
    directives = "\n".join(line for line in source.splitlines() if line.lstrip().startswith("#"))
    for name in names & profile.names:
        pattern = rf"(::\s*{name}\b|\b{name}\s*(\(|<|::))"
        if re.search(pattern, source) or re.search(rf"\b{name}\b", directives):
            hits.add(name)
    return sorted(hits)


NOT_MADE = "no include profile made for these flags yet"


def profile_path(profile_dir: str, key: str) -> str:
    return os.path.join(profile_dir, f"light2-{key}.json")


def load_or_make_profile(
    profile_dir: str,
    key: str,
    preprocess_argv: list[str],
    full: str,
    light: str,
    timeout: float = 600.0,
    make: bool = True,
    host: bool = False,
    wait: float = 0.0,
) -> Profile:
    """The ``Profile`` of ``full`` against ``light`` for one compiler command line, made once.

    ``preprocess_argv`` is the source's compile command minus its input and output; the two
    headers are preprocessed with it (host pass, ``-E`` and ``-dM``) and their sets compared.
    ``host``: the command is the host compiler's (a ``.cpp``), not nvcc's. ``make=False`` with
    ``wait``: a compile jail whose profiles trusted code is making at the same time waits for
    them that long (a maker that fails says so in ``<profile>.failed``).
    """
    path = profile_path(profile_dir, key)
    if not make:  # a compile jail only reads profiles that trusted code made
        deadline = time.monotonic() + wait
        while not os.path.exists(path):
            if os.path.exists(path + ".failed"):
                raise RuntimeError(f"making the include profile failed ({key})")
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{NOT_MADE} ({key})")
            time.sleep(0.05)
        with open(path) as fh:
            data = json.load(fh)
        return Profile(macros=frozenset(data["macros"]), names=frozenset(data["names"]))
    os.makedirs(profile_dir, exist_ok=True)
    with exclusive(path + ".lock"):
        if not os.path.exists(path):
            with contextlib.suppress(OSError):
                os.unlink(path + ".failed")  # an earlier maker's: this one tries again
            try:
                _make_profile(path, profile_dir, preprocess_argv, full, light, timeout, host)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                _mark_failed(path + ".failed", str(exc))
                raise
    with open(path) as fh:
        data = json.load(fh)
    return Profile(macros=frozenset(data["macros"]), names=frozenset(data["names"]))


def _mark_failed(marker: str, reason: str) -> None:
    """Tell a compile jail waiting for this profile to stop waiting (it builds the original text)."""
    with contextlib.suppress(OSError):
        with open(marker, "w") as fh:
            fh.write(reason[:1000])
        os.chmod(marker, 0o644)


def _make_profile(
    path: str,
    profile_dir: str,
    preprocess_argv: list[str],
    full: str,
    light: str,
    timeout: float,
    host: bool = False,
) -> None:
    with tempfile.TemporaryDirectory(dir=profile_dir) as tmp:
        # four preprocessor runs, side by side: a first build on a fresh machine waits for them
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            full_job = pool.submit(_preprocessed, preprocess_argv, full, tmp, timeout, host)
            light_job = pool.submit(_preprocessed, preprocess_argv, light, tmp, timeout, host)
            (full_macros, full_names), (light_macros, light_names) = full_job.result(), light_job.result()
    data = {
        "full": full,
        "light": light,
        "macros": sorted(full_macros - light_macros),
        "names": sorted(full_names - light_names),
    }
    publish_profile(path, data)


def publish_profile(path: str, data: dict[str, object]) -> None:
    """Write a profile whole under its final name: a compile jail waiting for it polls for the name,
    so it must never see the file before its text is complete."""
    fd, tmp_path = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.chmod(tmp_path, 0o644)  # mkstemp's 0600 hid it from compile jails of another uid
    os.replace(tmp_path, path)


def _preprocessed(
    argv: list[str], header: str, tmp: str, timeout: float, host: bool = False
) -> tuple[set[str], set[str]]:
    src = os.path.join(tmp, f"probe_{re.sub(r'[^A-Za-z0-9]', '_', header)}" + (".cpp" if host else ".cu"))
    with open(src, "w") as fh:
        fh.write(f"#include <{header}>\n")
    def run(extra: list[str], out: str) -> str:
        cmd = [*argv, *extra, src, "-o", out]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if done.returncode != 0:
            raise RuntimeError(
                f"preprocessing {header} failed: {shlex.join(cmd)[:300]}\n{done.stderr[-1000:]}"
            )
        with open(out, errors="replace") as fh:
            return fh.read()

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        text_job = pool.submit(run, ["-E"], src + ".i")
        macro_job = pool.submit(run, ["-E", "-dM"] if host else ["-E", "-Xcompiler", "-dM"], src + ".dM")
        texts = [text_job.result(), macro_job.result()]
    code = "\n".join(line for line in texts[0].splitlines() if not line.startswith("#"))
    macros = set(re.findall(r"^#define ([A-Za-z_][A-Za-z0-9_]*)", texts[1], re.MULTILINE))
    return macros, identifiers(code) | identifiers(texts[1])

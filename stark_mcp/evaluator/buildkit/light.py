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

import json
import os
import re
import shlex
import subprocess
import tempfile

LIGHT_SUBSTITUTES: dict[str, str] = {"torch/extension.h": "torch/types.h"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _include_line(header: str) -> re.Pattern[str]:
    return re.compile(r'^([ \t]*#[ \t]*include[ \t]*)[<"]' + re.escape(header) + r'[>"]([ \t]*(?://.*)?)$',
                      re.MULTILINE)


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


def profile_path(profile_dir: str, key: str) -> str:
    return os.path.join(profile_dir, f"light-{key}.json")


def load_or_make_profile(profile_dir: str, key: str, preprocess_argv: list[str], full: str, light: str,
                         timeout: float = 600.0) -> set[str]:
    """Identifiers and macros that only the full header brings, for one compiler command line.

    ``preprocess_argv`` is the source's compile command minus its input and output; the two
    headers are preprocessed with it (host pass) and their identifier sets compared. Macro names
    come from ``-dM`` so that a macro defined only by the full set and tested by ``#ifdef`` counts.
    """
    os.makedirs(profile_dir, exist_ok=True)
    path = profile_path(profile_dir, key)
    if os.path.exists(path):
        with open(path) as fh:
            return set(json.load(fh)["only_full"])
    with tempfile.TemporaryDirectory(dir=profile_dir) as tmp:
        full_ids = _preprocessed_identifiers(preprocess_argv, full, tmp, timeout)
        light_ids = _preprocessed_identifiers(preprocess_argv, light, tmp, timeout)
    only_full = sorted(full_ids - light_ids)
    fd, tmp_path = tempfile.mkstemp(dir=profile_dir, suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump({"full": full, "light": light, "only_full": only_full}, fh)
    os.replace(tmp_path, path)
    return set(only_full)


def _preprocessed_identifiers(argv: list[str], header: str, tmp: str, timeout: float) -> set[str]:
    src = os.path.join(tmp, f"probe_{re.sub(r'[^A-Za-z0-9]', '_', header)}.cu")
    with open(src, "w") as fh:
        fh.write(f"#include <{header}>\n")
    ids: set[str] = set()
    for extra in (["-E"], ["-E", "-Xcompiler", "-dM"]):
        cmd = [*argv, *extra, src, "-o", src + ".i"]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if done.returncode != 0:
            raise RuntimeError(f"preprocessing {header} failed: {shlex.join(cmd)[:300]}\n{done.stderr[-1000:]}")
        with open(src + ".i", errors="replace") as fh:
            ids |= identifiers("\n".join(line for line in fh if not line.startswith("#") or "define" in line))
    return ids

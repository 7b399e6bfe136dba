"""What a verdict depends on besides the two texts, and what changed between two such records.

Every cache whose content can change a verdict or a time (results, baselines, SOL counts and peaks)
is keyed by these: the evaluator's own code (a digest of ``stark_mcp/evaluator`` and
``stark_mcp/sol``, computed once per process), torch and the CUDA version it was built with, the GPU
driver, the device, the isolation level, the verdict's settings, and the digests of the user's files
the problem and the candidate import (``problems/user_files.py``). A changed one is a miss, and
``changes`` says which, for the message that replaces "(cached result)". Parent side; nothing here
imports torch or initializes CUDA.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from stark_mcp.evaluator.host import device_probe
from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.settings import ADVISORY_FIELDS, EvalSettings
from stark_mcp.problems.user_files import user_files
from stark_mcp.records import Dependencies

PACKAGE = Path(__file__).resolve().parents[2]  # stark_mcp/
EVALUATOR_SOURCES = ("evaluator", "sol")  # folders under the package whose code makes verdicts
DRIVER_FILE = Path("/proc/driver/nvidia/version")


@functools.cache
def evaluator_digest() -> str:
    """Digest of every .py file of the evaluator and the SOL model, by path and content: an upgraded
    evaluator never answers with a verdict an older one made."""
    h = hashlib.sha256()
    for folder in EVALUATOR_SOURCES:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# Once per process, like the digest (a torch upgraded under a running server is seen when it restarts).
@functools.cache
def torch_version() -> str:
    return device_probe.torch_version()


@functools.cache
def cuda_version() -> str | None:
    values = device_probe.torch_build() or {}
    cuda = values.get("cuda") or values.get("hip")
    return str(cuda) if cuda else None


def driver_version() -> str | None:
    """The NVIDIA kernel module's version (``/proc/driver/nvidia/version``); None without one."""
    try:
        first = DRIVER_FILE.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)", first)
    return found.group(1) if found else first.strip()[:120]


def verdict_settings(settings: EvalSettings) -> dict[str, object]:
    """The settings that can change a verdict or a time (``settings_hash`` covers the same)."""
    return {k: v for k, v in settings.model_dump(mode="json").items() if k not in ADVISORY_FIELDS}


def user_files_of(roots: Iterable[str], texts: Iterable[str | ast.Module]) -> dict[str, str]:
    return user_files(roots, texts)


def dependencies(
    info: DeviceInfo,
    isolation: str,
    settings: EvalSettings,
    roots: Iterable[str] = (),
    texts: Iterable[str | ast.Module] = (),
) -> Dependencies:
    """The record for an evaluation of ``texts`` (the problem's and the candidate's) on ``info``.
    Reads files: call it off the event loop."""
    return Dependencies(
        evaluator=evaluator_digest(),
        torch=torch_version(),
        cuda=cuda_version(),
        driver=driver_version() if info.kind == "cuda" else None,
        device=info.name,
        isolation=isolation,
        settings=verdict_settings(settings),
        user_files=user_files_of(roots, texts),
    )


def stack_tag(deps: Dependencies, *, user_files: bool = True) -> str:
    """A short digest of the code and machine stack in ``deps`` (not its settings or isolation): what
    keys the baseline and SOL caches besides their own fields."""
    data = {
        "evaluator": deps.evaluator,
        "torch": deps.torch,
        "cuda": deps.cuda,
        "driver": deps.driver,
        "device": deps.device,
        "user_files": deps.user_files if user_files else {},
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def changes(old: Dependencies | None, new: Dependencies) -> list[str]:
    """What differs between the record of a cached result and the current one, in words."""
    if old is None:
        return ["the cached result was made before results recorded what they depend on"]
    said: list[str] = []
    for label in sorted(set(old.user_files) | set(new.user_files)):
        before, now = old.user_files.get(label), new.user_files.get(label)
        if before == now:
            continue
        if before is None:
            said.append(f"the problem now imports the user's module {label}")
        elif now is None:
            said.append(f"the problem no longer imports the user's module {label}")
        else:
            said.append(f"the user's module {label} changed")
    if old.evaluator != new.evaluator:
        said.append(f"the evaluator's code changed ({old.evaluator} -> {new.evaluator})")
    for name, what in (("torch", "torch"), ("cuda", "CUDA"), ("driver", "the GPU driver"),
                       ("device", "the device"), ("isolation", "the isolation level")):  # fmt: skip
        before, now = getattr(old, name), getattr(new, name)
        if before != now:
            said.append(f"{what} changed ({before} -> {now})")
    settings = sorted(
        k for k in set(old.settings) | set(new.settings) if old.settings.get(k) != new.settings.get(k)
    )
    if settings:
        said.append(f"the setting{'s' if len(settings) > 1 else ''} {', '.join(settings)} changed")
    return said


def reevaluated_message(what: list[str]) -> str:
    return "re-evaluated: " + "; ".join(what) + " since the cached result"

"""Checks on what clients send before anything is evaluated or recorded.

Pure functions: both the MCP tools and the headless loop pass every source and
problem argument through here, so a bad input fails the same way everywhere.
"""

from __future__ import annotations

from stark_mcp.device import Device
from stark_mcp.evaluator.host.candidate import Candidate
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.orchestrator.roots import AllowedRoots
from stark_mcp.problems import Problem, ProblemError, load_problem, problem_from_source, spec_path
from stark_mcp.records import LANGUAGES, KernelLanguage, default_language

MAX_SOURCE_BYTES = 512 * 1024
MAX_PLAN_BYTES = 512 * 1024
ROLES = ("plan", "code", "debug", "generalist")
# The evaluator's reason code for a candidate without a top-level ModelNew.
NO_MODEL_NEW = "no_model_new"


def check_candidate_source(source: str | Candidate) -> None:
    """A candidate must be of sane size and, when it parses, define ``ModelNew`` at top level.

    The ModelNew test is the evaluator's own static check, so a source refused here is exactly
    one the evaluator would call ``no_model_new`` (given a ``Candidate``, that check is the one the
    evaluator then reads). One that does not parse is let through: the evaluator records it as a
    ``load_error`` with the syntax error, which a debug step can fix.
    """
    candidate = Candidate.of(source)
    source = candidate.source
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise InvalidInput(f"source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes")
    if not source.strip():
        raise InvalidInput("source is empty; send the full Python file that defines class ModelNew")
    if candidate.static.reason == NO_MODEL_NEW:
        raise InvalidInput(
            "source defines no top-level class ModelNew; send the whole file with "
            "class ModelNew(nn.Module) taking the same constructor arguments as Model"
        )


# The languages a run on each kind of device may use, the first being the default.
DEVICE_LANGUAGES = {Device.CPU: ("cpp",), Device.CUDA: ("cuda", "triton")}
# What a run of each language accepts: a CUDA extension may carry C++ host code of its own.
ACCEPTED = {"cuda": {"cuda", "cpp"}, "triton": {"triton"}, "cpp": {"cpp"}}
_NAMES = {"cuda": "CUDA C++", "triton": "Triton", "cpp": "C++"}


def check_language(language: str | None, device: str) -> KernelLanguage:
    """The run's language on a resolved device: given, or the device's default; InvalidInput if
    unknown or not one the device runs (Triton and CUDA need a GPU, C++ extensions are the CPU's)."""
    kind = device.split(":", 1)[0]
    if language is None:
        return default_language(device)
    if language not in LANGUAGES:
        raise InvalidInput(f"unknown language {language!r}; use one of {', '.join(LANGUAGES)}")
    allowed = DEVICE_LANGUAGES.get(kind, LANGUAGES)
    if language not in allowed:
        raise InvalidInput(
            f"language {language!r} does not run on the {kind} device: use "
            + " or ".join(repr(a) for a in allowed)
            + (" (Triton and CUDA kernels need an NVIDIA GPU)" if kind == "cpu" else "")
        )
    return language  # type: ignore[return-value]


def language_mismatch(language: str, source: str | Candidate) -> str | None:
    """Why a source does not fit a run of ``language`` (its kernels are all in other languages),
    or None. A source with no custom kernel, or with some in the run's language, fits."""
    found = Candidate.of(source).static.languages
    if not found or found & ACCEPTED.get(language, {language}):
        return None
    written = " and ".join(_NAMES[f] for f in sorted(found))
    hint = {
        "triton": "write the kernels as @triton.jit functions launched from ModelNew.forward",
        "cuda": "write the kernels in CUDA C++ and build them with load_inline(cuda_sources=...)",
        "cpp": "write the kernels in C++ and build them with load_inline(cpp_sources=...)",
    }.get(language, "")
    return (
        f"this run's kernels are written in {_NAMES.get(language, language)}, but this candidate's "
        f"kernels are {written}: {hint}"
    )


def check_plan_text(plan: str | None) -> None:
    if plan is not None and len(plan.encode("utf-8")) > MAX_PLAN_BYTES:
        raise InvalidInput(f"plan is larger than {MAX_PLAN_BYTES} bytes")


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    return role


def resolve_problem(
    problem: str,
    name: str | None = None,
    roots: AllowedRoots | None = None,
    isolation: str | None = None,
    jailed: bool = False,
) -> Problem:
    """``problem`` is a path or spec that ``load_problem`` accepts, or the problem source itself.

    With ``roots`` the spec's path must resolve inside them, and so must the file it names (a
    checkout's problem may be a symlink), before anything of it is shown; and problem text is
    refused unless the evaluator runs problem code ``jailed`` (its ``isolation`` level walls the
    reference jail off from the server's user) or ``roots.problem_sources`` (see ``AllowedRoots``).
    """
    if not problem.strip():
        raise ProblemError("problem is empty: pass a path to a problem file or the problem source")
    looks_like_source = "\n" in problem or "class Model" in problem
    if not looks_like_source:
        if roots is not None:
            path_part, selector = spec_path(problem)
            resolved = roots.resolve(path_part, "problem")
            problem = f"{resolved}:{selector}" if selector else str(resolved)
        loaded = load_problem(problem, inside=roots.contains if roots is not None else None)
        return loaded.model_copy(update={"name": name}) if name else loaded
    if roots is not None and not (roots.problem_sources or jailed):
        raise InvalidInput(
            "this server runs problems given as text only where the evaluator jails a problem's "
            f"code (isolation sandbox or uid); here it runs at isolation {isolation or 'unknown'}, "
            "where that code would run as the server's user. Save the problem as a .py file inside "
            f"its folders ({roots.describe()}) and pass its path (or start the server with "
            "--allow-problem-source to accept problem code from clients at any isolation level)"
        )
    if len(problem.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise InvalidInput(f"problem source is larger than {MAX_SOURCE_BYTES} bytes")
    return problem_from_source(problem, name=name or "problem")

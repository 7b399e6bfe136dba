"""Problems from the user's own code: ``create_problem`` for the MCP tool and ``stark-mcp problem new``.

Import the target in a probe process, fit the request to it, render the problem file, check
that it runs in the evaluator's trusted process, and only then write it. Nothing is written
when any step fails, and an existing different file is never replaced unless asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from stark_mcp.agents.templates import fill
from stark_mcp.device import Device
from stark_mcp.orchestrator.roots import AllowedRoots, write_confined
from stark_mcp.problems import Problem, problem_from_source
from stark_mcp.progress import Progress
from stark_mcp.usercode.errors import SpecError
from stark_mcp.usercode.introspect import inspect_target, search_paths
from stark_mcp.usercode.plan import plan_problem
from stark_mcp.usercode.render import MADE_BY, render_problem
from stark_mcp.usercode.request import ProblemRequest

PROBLEMS_FOLDER = "stark-problems"


class ProblemChecker(Protocol):
    """The part of the evaluator that runs a problem once in its trusted process."""

    async def resolve_device(self, device: Device | str = Device.AUTO) -> Device: ...

    async def check_problem(self, problem: Problem, device: Device | str = Device.AUTO) -> None: ...


class CreatedProblem(BaseModel):
    path: str = Field(description="the problem file, to pass to create_run / stark-mcp run")
    name: str
    target: str = Field(description="package.module:Name it was made from")
    kind: str = Field(description="module (an nn.Module class) or function")
    import_roots: list[str] = Field(description="folders the evaluator imports the user's code from")
    init_inputs: list[Any] = Field(description="the constructor arguments, in Model's order")
    shapes: dict[str, str] = Field(description="input set label -> the forward arguments it produces")
    checked_on: str | None = Field(
        None, description="device the problem was run on once; None if not checked"
    )
    source: str = Field(description="the problem file's text")


def problem_request(**fields: Any) -> ProblemRequest:
    """A ProblemRequest, with pydantic's own type errors turned into a SpecError."""
    try:
        return ProblemRequest(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = ".".join(str(p) for p in error.get("loc", ()))
        raise SpecError(f"{location}: {error.get('msg', 'invalid')}" if location else str(exc)) from None


async def create_problem(
    request: ProblemRequest,
    checker: ProblemChecker | None,
    *,
    device: Device | str = Device.AUTO,
    cwd: Path | None = None,
    progress: Progress | None = None,
    roots: AllowedRoots | None = None,
) -> CreatedProblem:
    """Make, check and write the problem file; ``checker`` None skips the check run.

    ``roots`` (a server's): every path of the request (project root, import roots, captures, out)
    must resolve inside them, and the file is written so that it cannot land elsewhere. The probe
    then imports only code found inside the roots (or installed in the server's environment).
    """
    report = progress or _quiet
    total = 3.0 if checker is not None else 2.0
    if roots is not None:
        request = _confined(request, roots)
        cwd = roots.folders[0]
    root = _project_root(request.project_root, cwd)
    captures = [str(_under(root, p)) for p in request.captures]
    await report(0, total, f"importing {request.target or 'the captured target'}")
    paths = search_paths(root, request.import_roots)
    info = await inspect_target(request.target_ref, paths, captures, cwd=root)
    plan = plan_problem(request, info)
    source = render_problem(plan)
    out = _under(root, request.out) if request.out else root / PROBLEMS_FOLDER / f"{plan.name}.py"
    if roots is not None:
        out = roots.resolve(out, "out")
    problem = problem_from_source(source, name=plan.name, origin=str(out))
    _refuse_overwrite(out, source, request.overwrite)
    await report(1, total, f"rendered {plan.name} from {info.target.spec}")
    checked_on = None
    if checker is not None:
        checked_on = await checker.resolve_device(device)
        await report(2, total, f"running {plan.name} once on {checked_on}")
        await checker.check_problem(problem, device=checked_on)
    try:
        write_confined(out, source, roots)
    except OSError as exc:
        raise SpecError(f"cannot write {out}: {exc.strerror or exc}") from None
    await report(total, total, f"wrote {out}")
    return CreatedProblem(
        path=str(out),
        name=plan.name,
        target=info.target.spec,
        kind=plan.kind,
        import_roots=plan.import_roots,
        init_inputs=plan.init_values,
        shapes=plan.signatures,
        checked_on=checked_on,
        source=source,
    )


def optimize_module_prompt(request: str, project_root: str = "") -> str:
    """The guided flow an MCP host's model follows, from "make X faster" to a swapped-in kernel."""
    root = project_root.strip() or "(ask the user, or use the workspace folder)"
    return fill(
        "optimize_module.md", request=request.strip() or "(ask the user what to speed up)", project_root=root
    )


def _confined(request: ProblemRequest, roots: AllowedRoots) -> ProblemRequest:
    """The request with its folders and captures resolved inside ``roots`` (relative ones from the
    first root), or PathOutsideRoots; ``out`` is resolved once its folder is known."""
    given = request.project_root
    project = roots.resolve(given, "project_root") if given else roots.folders[0]
    return request.model_copy(update={
        "project_root": str(project),
        "import_roots": [str(roots.resolve(p, "import root")) for p in request.import_roots],
        "captures": [str(roots.resolve(_under(project, p), "capture")) for p in request.captures],
    })


def _project_root(given: str | None, cwd: Path | None) -> Path:
    if given:
        path = Path(given).expanduser()
        if not path.is_absolute():
            raise SpecError(f"project root {given!r} must be an absolute folder path")
        if not path.is_dir():
            raise SpecError(f"project root {given} is not a folder")
        return path.resolve()
    return (cwd or Path.cwd()).resolve()


def _under(root: Path, path: str) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else root / candidate


class WouldOverwrite(SpecError):
    """The problem file exists, was made by stark-mcp and differs: replaced only when asked."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} already exists and differs; pass overwrite (--force) to replace it, "
            "or choose another name or out path"
        )
        self.path = path


def _refuse_overwrite(out: Path, source: str, overwrite: bool) -> None:
    """Never clobber: an existing file is replaced only when asked and only if this command wrote it."""
    if out.suffix != ".py":
        raise SpecError(f"{out}: a problem file's name ends in .py")
    if out.is_dir():
        raise SpecError(f"{out} is a folder; give a file path for the problem")
    if not out.exists():
        return
    try:
        existing = out.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        existing = None
    if existing == source:
        return
    if existing is None or MADE_BY not in existing:
        raise SpecError(
            f"{out} already exists and is not a problem file made by stark-mcp; "
            "choose another name or out path"
        )
    if not overwrite:
        raise WouldOverwrite(out)


async def _quiet(done: float, total: float | None, message: str) -> None:
    return None

"""The user's own module over MCP: the ``create_problem`` tool and the ``optimize_module`` prompt.

Module-level handlers that ``register_own_module`` attaches, each a thin call into
``orchestrator.own_module`` through the shared ``RunService``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import ToolAnnotations
from pydantic import Field

from stark_mcp.device import DEVICE_NAMES
from stark_mcp.orchestrator.own_module import (
    CreatedProblem,
    WouldOverwrite,
    optimize_module_prompt,
    problem_request,
)
from stark_mcp.server.errors import prompt_errors, tool_errors
from stark_mcp.server.progress_relay import relay
from stark_mcp.server.state import app_state
from stark_mcp.server.tasks.questions import confirm_overwrite
from stark_mcp.usercode.specs import InputSpec

WRITES_FILE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class ProblemCreated(CreatedProblem):
    next: str


async def create_problem(
    ctx: Context,
    target: Annotated[
        str | None,
        Field(
            description="package.module:ClassOrFunction, e.g. mylib.layers:ScaledMLP; "
            "may be omitted with captures"
        ),
    ] = None,
    project_root: Annotated[
        str | None,
        Field(
            description="path of the user's project (its src/ or itself holds the package), inside the "
            "server's roots; default: the server's working folder"
        ),
    ] = None,
    init_args: Annotated[
        list[Any] | None,
        Field(description="constructor positional arguments, literals only, e.g. [512, 2048]"),
    ] = None,
    init_kwargs: Annotated[
        dict[str, Any] | None, Field(description='constructor keyword arguments, e.g. {"dropout": 0.0}')
    ] = None,
    inputs: Annotated[
        list[InputSpec | str] | None,
        Field(
            description="the forward's arguments in call order, as 'x:float32[batch,seq,512]', "
            "'ids:int64[batch,seq]~randint(0,32000)', 'mask:bool[batch,seq]~bernoulli(0.9)', "
            "'eps=1e-5', or objects {name, shape, dtype, dist, ...}"
        ),
    ] = None,
    shapes: Annotated[
        list[dict[str, Any]] | None,
        Field(
            description='input sets giving the sizes the inputs name, e.g. [{"batch": 8, "seq": 128}, '
            '{"batch": 32, "seq": 512}]; ask the user for the ones they run'
        ),
    ] = None,
    captures: Annotated[
        list[str] | None,
        Field(
            description="files saved by stark_mcp.capture, one input set each (instead of inputs and shapes)"
        ),
    ] = None,
    captured_values: Annotated[
        bool,
        Field(
            description="with captures: feed captured floats as they are (default: fresh values like them)"
        ),
    ] = False,
    module_dtype: Annotated[
        str | None, Field(description="convert the module's parameters to this dtype, e.g. bfloat16")
    ] = None,
    name: Annotated[str | None, Field(description="the problem's name (default from the target)")] = None,
    out: Annotated[
        str | None,
        Field(description="problem file to write, inside the server's roots "
              "(default <project_root>/stark-problems/<name>.py)"),
    ] = None,
    overwrite: Annotated[bool, Field(description="replace an existing different file")] = False,
    device: Annotated[
        str | None,
        Field(description=f"where to run it once: {DEVICE_NAMES} (default: the server's STARK_DEVICE)"),
    ] = None,
) -> ProblemCreated:
    """Make a problem from the user's own nn.Module class or function: imports the target from the
    project, writes an ordinary problem file that imports it (Model, get_init_inputs, get_inputs and,
    with several input sets, SHAPES), runs it once in the evaluator, and returns its path for
    create_run. Ask the user for the input sets they run; a kernel is proven only on these."""
    state = app_state(ctx)
    with tool_errors():
        request = problem_request(
            target=target,
            project_root=project_root,
            init_args=init_args or [],
            init_kwargs=init_kwargs or {},
            inputs=inputs or [],
            shapes=shapes or [],
            captures=captures or [],
            captured_values=captured_values,
            module_dtype=module_dtype,
            name=name,
            out=out,
            overwrite=overwrite,
        )
        try:
            created = await state.service.create_problem(
                request, device=device or state.settings.device, progress=relay(ctx), roots=state.roots
            )
        except WouldOverwrite as exc:
            # As a task, the user decides (input_required); otherwise the refusal stands.
            if not await confirm_overwrite(str(exc.path)):
                raise
            created = await state.service.create_problem(
                request.model_copy(update={"overwrite": True}), device=device or state.settings.device,
                progress=relay(ctx), roots=state.roots,
            )
    return ProblemCreated(
        **created.model_dump(),
        next=f"Show the user the input sets (shapes), then call create_run(problem={created.path!r}).",
    )


async def optimize_module(
    ctx: Context,
    request: str = "",
    project_root: str = "",
) -> list[UserMessage]:
    """Make part of the user's own PyTorch code faster: find the module, create the problem (asking
    for the shapes it cannot infer), run the STARK loop with the tools, and export a drop-in kernel."""
    with prompt_errors():
        return [UserMessage(optimize_module_prompt(request, project_root))]


def register_own_module(server: MCPServer[Any]) -> None:
    server.tool(title="Create a problem from the user's module", annotations=WRITES_FILE)(create_problem)
    server.prompt(title="Optimize one of your modules")(optimize_module)

"""Turn the core's expected failures into tool errors an agent can act on.

Only ``StarkError`` is mapped: anything else is a bug, and the SDK already logs it
with its traceback on stderr and shows the client nothing but the tool's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp import MCPError
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import INVALID_PARAMS

from stark_mcp.errors import StarkError
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.llm.errors import LLMError, MissingAPIKey
from stark_mcp.orchestrator.errors import BudgetExhausted, InvalidInput, RunError
from stark_mcp.problems.errors import ProblemError
from stark_mcp.store.errors import NotFound
from stark_mcp.tree.errors import AnchorError, NothingEligible, TreeError

# First match wins, so subclasses come before their bases.
_HINTS: tuple[tuple[type[StarkError], str], ...] = (
    (NotFound, "Call list_runs for run ids, or read stark://runs/{run_id}/tree for node ids."),
    (AnchorError, "Fix the plan's scaffold: it must be the node's source with the code to change "
                  "wrapped in '# <<<IMPROVE BEGIN>>>' / '# <<<IMPROVE END>>>' comment lines."),
    (NothingEligible, "No node can be expanded any more; read the leaderboard and export, "
                      "or start a new run."),
    (TreeError, "Call select_node for a valid node, or read stark://runs/{run_id}/tree for node ids."),
    (BudgetExhausted, ""),
    (InvalidInput, ""),
    (RunError, ""),
    (ProblemError, "The problem must define class Model(nn.Module), get_inputs() and get_init_inputs(), "
                   "and run on the chosen device."),
    (EvaluatorError, ""),
    (MissingAPIKey, ""),
    (LLMError, ""),
)


def actionable(exc: StarkError) -> str:
    """The exception's message with the hint for its kind appended."""
    message = str(exc).strip() or type(exc).__name__
    for kind, hint in _HINTS:
        if isinstance(exc, kind):
            return _join(message, hint)
    return message


def _join(message: str, hint: str) -> str:
    if not hint:
        return message
    if "\n" in message:
        # A multi-line message ends with quoted text (a source line, a log): the hint gets its own line.
        return f"{message}\n{hint}"
    return f"{message} {hint}" if message.endswith((".", "!", "?", ":")) else f"{message}. {hint}"


@contextmanager
def tool_errors() -> Iterator[None]:
    try:
        yield
    except StarkError as exc:
        raise ToolError(actionable(exc)) from None


@contextmanager
def resource_errors() -> Iterator[None]:
    try:
        yield
    except (NotFound, TreeError) as exc:
        raise ResourceNotFoundError(actionable(exc)) from None
    except StarkError as exc:
        raise ResourceError(actionable(exc)) from None


@contextmanager
def prompt_errors() -> Iterator[None]:
    # The SDK would wrap other exceptions as generic errors; a protocol error keeps the message.
    try:
        yield
    except StarkError as exc:
        raise MCPError(code=INVALID_PARAMS, message=actionable(exc)) from None

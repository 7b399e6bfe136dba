"""The hints appended to the core's errors, and which MCP error each boundary raises."""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from stark_mcp.orchestrator.errors import BudgetExhausted, InvalidInput
from stark_mcp.problems import ProblemError
from stark_mcp.server.errors import actionable, prompt_errors, resource_errors, tool_errors
from stark_mcp.store import NotFound
from stark_mcp.tree import AnchorError, NothingEligible, TreeError


def test_hints_follow_the_most_specific_kind() -> None:
    assert actionable(NotFound("no run 'r-x'")) == (
        "no run 'r-x'. Call list_runs for run ids, or read stark://runs/{run_id}/tree for node ids."
    )
    assert "IMPROVE BEGIN" in actionable(AnchorError(["scaffold line 3: bad marker"]))
    assert "new run" in actionable(NothingEligible("every node is dead"))
    assert "select_node" in actionable(TreeError("no node n9"))
    assert "get_init_inputs" in actionable(ProblemError("model failed to import"))
    assert actionable(BudgetExhausted("run r has used its budget.")) == "run r has used its budget."
    assert actionable(InvalidInput("")) == "InvalidInput"


def test_a_hint_after_a_quoted_source_line_starts_a_line_of_its_own() -> None:
    syntax = "problem: syntax error at line 3: invalid syntax\n    def forward(self x):"
    message = actionable(ProblemError(syntax))
    quoted, hint = message.rsplit("\n", 1)
    assert quoted.endswith("    def forward(self x):")
    assert hint.startswith("The problem must define class Model(nn.Module)")


def test_boundaries_raise_the_protocols_error_kinds() -> None:
    with pytest.raises(ToolError, match="budget"), tool_errors():
        raise BudgetExhausted("budget used")
    with pytest.raises(ResourceNotFoundError), resource_errors():
        raise NotFound("no node 'n3'")
    with pytest.raises(ResourceError), resource_errors():
        raise InvalidInput("bad")
    with pytest.raises(MCPError, match="unknown role"), prompt_errors():
        raise InvalidInput("unknown role 'x'")
    with pytest.raises(KeyError), tool_errors():
        raise KeyError("a bug stays a bug")

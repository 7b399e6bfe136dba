"""The tree layer's exceptions, rooted at ``StarkError``."""

from __future__ import annotations

from stark_mcp.errors import StarkError


class TreeError(StarkError):
    """A set of nodes does not form a valid run tree, or a query names an unknown node."""


class NothingEligible(TreeError):
    """The policy has no node it may expand; the message says which rule excluded them."""


class AnchorError(TreeError):
    """A plan's anchored scaffold is malformed; the message tells the plan agent what to fix.

    ``problems`` holds one actionable sentence per defect (first line first), so a caller can
    show them as a list; ``line`` is the scaffold line of the first defect when there is one.
    """

    def __init__(self, problems: str | list[str], line: int | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.line = line
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} problems in the anchored scaffold:\n" + "\n".join(
                f"- {p}" for p in self.problems
            )
        super().__init__(message)

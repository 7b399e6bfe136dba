"""A candidate's source and what is read from it, each worked out once (parent side, pure).

``RunService`` makes one where a source comes in (``add_child``, ``evaluate_kernel``, the headless
loop), ``evaluate_on`` where ``stark-mcp eval`` hands one over, and ``Evaluator.evaluate`` where a
caller gave a plain string; the same value goes down to the verdict. So the input checks before
anything is recorded, the run's language check and the evaluator's own static check share one parse
and one static check, and the kernels a profile calls the candidate's own come from that parse too.

``hash`` is ``source_hash(source)``, the result cache's key: a value made here keys a verdict
exactly as the source alone did.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from stark_mcp import python_ast
from stark_mcp.evaluator.host.own_kernels import own_kernel_names
from stark_mcp.evaluator.host.static_checks import StaticResult, check_candidate
from stark_mcp.problems import source_hash


@dataclass(frozen=True)
class Candidate:
    """Immutable: ``source`` is fixed, and each fact below is computed on first use and kept."""

    source: str = field(repr=False)

    @classmethod
    def of(cls, source: str | Candidate) -> Candidate:
        """``source`` itself when it is a Candidate already (its parse is kept), else a new one."""
        return source if isinstance(source, Candidate) else cls(source)

    def __repr__(self) -> str:
        return f"Candidate({self.hash[:12]}, {len(self.source)} characters)"

    @cached_property
    def hash(self) -> str:
        return source_hash(self.source)

    @cached_property
    def parsed(self) -> ast.Module | SyntaxError:
        """The source's syntax tree (never changed by its readers), or why it has none."""
        return python_ast.parse_or_error(self.source, filename="candidate.py")

    @cached_property
    def static(self) -> StaticResult:
        """The evaluator's static checks (``static_checks.py``): a verdict without running anything
        when the source fails outright, the flags, whether it builds, its kernels' languages."""
        return check_candidate(self.source, self.parsed)

    @cached_property
    def own_kernels(self) -> frozenset[str]:
        """The kernels its source defines (CUDA ``__global__`` and Triton functions): which profiled
        kernels are its own."""
        return frozenset(own_kernel_names(self.source, self.parsed))

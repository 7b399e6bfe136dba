"""Memory across runs: what a finished run learned, kept for the planner of a later, similar problem."""

from stark_mcp.memory.lessons import MemoryEntry, lesson_of, rank, render_entries
from stark_mcp.memory.signature import jaccard, op_signature

__all__ = ["MemoryEntry", "jaccard", "lesson_of", "op_signature", "rank", "render_entries"]

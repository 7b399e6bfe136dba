"""The root of every exception stark-mcp raises on purpose.

Each layer defines its own small hierarchy under this root (``ProblemError``,
``EvaluatorError``, ``StoreError``, ``TreeError``, ``LLMError``, ...). The CLI
and the MCP server catch ``StarkError`` at their boundary and turn it into a
clear message; anything else is a bug and keeps its traceback.
"""


class StarkError(Exception):
    """An expected failure with a message meant for the user or the agent."""

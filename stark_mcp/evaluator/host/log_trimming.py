"""Trimming logs for people and agents: compiler logs keep their first errors (pure)."""

from __future__ import annotations

import re

_ERROR_LINE = re.compile(r"(\berror\b|Error|FAILED:|undefined reference|fatal)", re.IGNORECASE)
DEFAULT_LIMIT = 4000


def trim_tail(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """The end of a log (where Python tracebacks put the exception)."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters trimmed ...]\n" + text[-limit:]


def trim_compiler_log(text: str, limit: int = DEFAULT_LIMIT, context_lines: int = 2) -> str:
    """Keep the log from just before its first error line; later cascades are cut first."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _ERROR_LINE.search(line)), None)
    if first is None:
        return trim_tail(text, limit)
    start = max(0, first - context_lines)
    kept = "\n".join(lines[start:])
    head = f"[... {start} earlier lines trimmed ...]\n" if start else ""
    if len(kept) > limit:
        kept = kept[:limit] + f"\n[... {len(kept) - limit} later characters trimmed ...]"
    return head + kept

"""The one shape of progress reporting, shared by the evaluator, the run service and the adapters.

``await progress(done, total, message)``: ``done`` out of ``total`` steps (``total`` None when
unknown) with a line saying what is happening. Each caller reports on its own scale; the MCP
server rescales what it relays into one rising sequence per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Progress = Callable[[float, float | None, str], Awaitable[None]]

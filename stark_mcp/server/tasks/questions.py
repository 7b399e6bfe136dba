"""Questions a task puts to the host's user (``input_required``), where only the user may decide.

Each is a form elicitation carried in the task's ``inputRequests`` and answered by ``tasks/update``.
Outside a task (a client without the extension) nothing is asked: the tool keeps its old answer.
"""

from __future__ import annotations

from typing import Any

from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.server.tasks.manager import current_task

MAX_EXTRA = 1000


def form(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An ``elicitation/create`` request in form mode."""
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form", "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        },
    }


def _accepted(answer: dict[str, Any]) -> dict[str, Any] | None:
    content = answer.get("content")
    return content if answer.get("action") == "accept" and isinstance(content, dict) else None


async def extend_spent_budget(service: RunService, run_id: str) -> int:
    """When ``run_id`` has no attempt left, ask the user how many more to allow (0: none); returns
    the attempts added. Never asks outside a task."""
    task = current_task()
    if task is None or await service.attempts_left(run_id) > 0:
        return 0
    budget = await service.budget(run_id)
    answer = await task.ask(f"extend-budget-{budget}", form(
        f"Run {run_id} has used its budget of {budget} attempts. Allow more attempts? "
        "Each costs LLM calls and an evaluation.",
        {"attempts": {"type": "integer", "minimum": 0, "maximum": MAX_EXTRA,
                      "description": "attempts to add (0: stop here)"}},
        ["attempts"],
    ))
    content = _accepted(answer)
    extra = content.get("attempts") if content else None
    if not isinstance(extra, int) or isinstance(extra, bool) or not 0 < extra <= MAX_EXTRA:
        return 0
    await service.extend_budget(run_id, extra)
    return extra


async def confirm_overwrite(path: str) -> bool:
    """Ask whether to replace ``path``, an existing different file; False outside a task."""
    task = current_task()
    if task is None:
        return False
    answer = await task.ask(f"overwrite-{path}", form(
        f"{path} already exists and differs from what would be written. Replace it?",
        {"overwrite": {"type": "boolean", "description": "true replaces the file"}},
        ["overwrite"],
    ))
    content = _accepted(answer)
    return bool(content and content.get("overwrite") is True)

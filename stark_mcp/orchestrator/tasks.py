"""The task records the MCP adapter keeps in the run store (``stark_mcp.store.tasks``), for the server.

The adapters reach the store only through the application layer; this is that door for tasks.
"""

from stark_mcp.store.errors import NotFound
from stark_mcp.store.tasks import TERMINAL, TaskOwner, TaskRecord, TaskStatus, TaskTable

TaskStore = TaskTable

__all__ = ["TERMINAL", "NotFound", "TaskOwner", "TaskRecord", "TaskStatus", "TaskStore"]

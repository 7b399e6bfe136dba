"""Durable persistence: the only package that touches SQLite.

    async with await Store.open(path) as store:
        run = await store.create_run(problem=..., device="cuda", policy={...}, budget=30, seed=0)
        root = await store.add_node(run.id, parent_id=None, action=Action.ROOT, source=...)
"""

from stark_mcp.store.errors import NotFound, StoreError
from stark_mcp.store.migrations import MIGRATIONS, Migration, apply_migrations
from stark_mcp.store.stats import RunStats
from stark_mcp.store.store import Store

__all__ = [
    "MIGRATIONS",
    "Migration",
    "NotFound",
    "RunStats",
    "Store",
    "StoreError",
    "apply_migrations",
]

"""Each run's tree kept in memory and brought up to date from the store on every read.

Nodes are append-only rows (never changed once written), so a cached tree is made current
by one indexed query for the nodes with a seq above the last one it holds: almost always
none. A read therefore costs the new nodes, not the whole tree, and another process writing
the same run (a second server, a CLI) is seen by the next read here.
"""

from __future__ import annotations

from collections import OrderedDict

from stark_mcp.store import Store
from stark_mcp.tree import Tree

# Runs kept in memory at once; the least recently read is dropped first.
CACHED_RUNS = 16


class RunTrees:
    """``await trees.get(run_id)``: the run's current tree (``NotFound`` for an unknown run)."""

    def __init__(self, store: Store, capacity: int = CACHED_RUNS) -> None:
        self._store = store
        self._capacity = capacity
        self._cached: OrderedDict[str, Tree] = OrderedDict()

    async def get(self, run_id: str) -> Tree:
        cached = self._cached.get(run_id)
        new = await self._store.nodes(run_id, after_seq=cached.latest().seq if cached is not None else -1)
        # Another read of this run may have brought the cache further while this one awaited.
        current = self._cached.get(run_id)
        if current is not None and current is not cached and (
            cached is None or current.latest().seq > cached.latest().seq
        ):
            cached = current
            new = [n for n in new if n.seq > cached.latest().seq]
        if cached is None:
            cached = Tree(new)
        elif new:
            cached = cached.extended(new)
        self._cached[run_id] = cached
        self._cached.move_to_end(run_id)
        while len(self._cached) > self._capacity:
            self._cached.popitem(last=False)
        return cached

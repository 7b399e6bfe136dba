"""Each run's tree kept in memory and brought up to date from the store on every read.

Nodes are append-only rows, changed after they are written only when late baselines fill in
their speedups (which bumps the run's revision), so a cached tree is made current by one
indexed query for the nodes with a seq above the last one it holds: almost always none, and
the whole tree again after a revision. A read therefore costs the new nodes, not the whole
tree, and another process writing the same run (a second server, a CLI) is seen by the next
read here.
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
        self._revisions: dict[str, int] = {}

    async def get(self, run_id: str) -> Tree:
        cached = self._cached.get(run_id)
        known = self._revisions.get(run_id, -1) if cached is not None else -1
        revision, new = await self._store.nodes_since(
            run_id, cached.latest().seq if cached is not None else -1, known
        )
        if revision != known:
            cached = None  # nodes were rewritten (or nothing was held): ``new`` is the whole tree
        # Another read of this run may have brought the cache further while this one awaited.
        current = self._cached.get(run_id)
        if (
            current is not None and current is not cached
            and self._revisions.get(run_id) == revision
            and (cached is None or current.latest().seq > cached.latest().seq)
        ):
            cached = current
            new = [n for n in new if n.seq > cached.latest().seq]
        if cached is None:
            cached = Tree(new)
        elif new:
            cached = cached.extended(new)
        self._cached[run_id] = cached
        self._revisions[run_id] = revision
        self._cached.move_to_end(run_id)
        while len(self._cached) > self._capacity:
            dropped, _ = self._cached.popitem(last=False)
            self._revisions.pop(dropped, None)
        return cached

"""Each run's tree kept in memory and brought up to date from the store on every read.

Nodes are append-only rows (never changed once written), so a cached tree is made current
by one indexed query for the nodes with a seq above the last one it holds: almost always
none. A read therefore costs the new nodes, not the whole tree, and another process writing
the same run (a second server, a CLI) is seen by the next read here.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from stark_mcp.records import Node
from stark_mcp.store import Store
from stark_mcp.tree import Tree

# Runs kept in memory at once; the least recently read is dropped first.
CACHED_RUNS = 16


@dataclass(frozen=True)
class _Cached:
    nodes: tuple[Node, ...]
    tree: Tree

    @property
    def last_seq(self) -> int:
        return self.nodes[-1].seq


class RunTrees:
    """``await trees.get(run_id)``: the run's current tree (``NotFound`` for an unknown run)."""

    def __init__(self, store: Store, capacity: int = CACHED_RUNS) -> None:
        self._store = store
        self._capacity = capacity
        self._cached: OrderedDict[str, _Cached] = OrderedDict()

    async def get(self, run_id: str) -> Tree:
        cached = self._cached.get(run_id)
        after = cached.last_seq if cached is not None else -1
        new = await self._store.nodes(run_id, after_seq=after)
        # Another read of this run may have refreshed the cache while this one awaited.
        current = self._cached.get(run_id)
        if current is not None and (cached is None or current.last_seq > cached.last_seq):
            cached = current
            new = [n for n in new if n.seq > cached.last_seq]
        if new or cached is None:
            nodes = (cached.nodes if cached is not None else ()) + tuple(new)
            cached = _Cached(nodes, Tree(nodes))
        self._cached[run_id] = cached
        self._cached.move_to_end(run_id)
        while len(self._cached) > self._capacity:
            self._cached.popitem(last=False)
        return cached.tree

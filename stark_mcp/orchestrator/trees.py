"""Each run's tree kept in memory and brought up to date from the store on every read.

Nodes are append-only rows, changed after they are written only when late baselines fill in
their speedups (which bumps the run's revision: the whole tree is read again), so a cached
tree is made current by one indexed query for the nodes with a seq above the last one it holds: almost always
none. A read therefore costs the new nodes, not the whole tree, and another process writing
the same run (a second server, a CLI) is seen by the next read here. Profiles taken after a
node was recorded (``profile_kernel``) live in their own append-only table and are laid over
the nodes' evaluations the same way: one more indexed query, a rebuild only when one is new.
"""

from __future__ import annotations

from collections import OrderedDict

from stark_mcp.records import Node, ProfileReport
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
        self._profile_seq: dict[int, int] = {}  # id(tree) -> the last profile laid over it
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
        after = self._profile_seq.get(id(cached), 0) if cached is not None else 0
        if cached is None:
            cached = Tree(new)
        elif new:
            cached = cached.extended(new)
        profiles = await self._store.profiles(run_id, after_seq=after)
        if profiles:
            cached = with_profiles(cached, [(node_id, report) for _, node_id, report in profiles])
            after = profiles[-1][0]
        self._profile_seq[id(cached)] = after
        self._cached[run_id] = cached
        self._revisions[run_id] = revision
        self._cached.move_to_end(run_id)
        while len(self._cached) > self._capacity:
            dropped, _ = self._cached.popitem(last=False)
            self._revisions.pop(dropped, None)
        live = {id(tree) for tree in self._cached.values()}
        self._profile_seq = {key: seq for key, seq in self._profile_seq.items() if key in live}
        return cached


def with_profiles(tree: Tree, profiles: list[tuple[str, ProfileReport]]) -> Tree:
    """``tree`` with each (node id, profile), oldest first, over its node's evaluation where it
    supersedes the one there (``ProfileReport.supersedes``)."""
    nodes = {node.id: node for node in tree}
    for node_id, report in profiles:
        node = nodes.get(node_id)
        if node is None or node.evaluation is None or not report.supersedes(node.evaluation.profile):
            continue
        nodes[node_id] = _profiled(node, report)
    return Tree(nodes.values())


def _profiled(node: Node, report: ProfileReport) -> Node:
    assert node.evaluation is not None
    return node.model_copy(update={"evaluation": node.evaluation.model_copy(update={"profile": report})})

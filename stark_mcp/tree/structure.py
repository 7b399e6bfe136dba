"""An immutable, validated view over the nodes of one run."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from stark_mcp.records import Action, Node
from stark_mcp.tree.errors import TreeError


def _order(node: Node) -> tuple[int, str]:
    # seq is the creation order; the id only breaks ties between hand-built nodes sharing a seq.
    return (node.seq, node.id)


class Tree:
    """A run's attempts as a rooted tree. Every query is answered from data fixed at construction.

    Raises ``TreeError`` unless there is exactly one root (action ``root``, no parent), ids are
    unique, every parent exists and every node descends from the root.
    """

    def __init__(self, nodes: Iterable[Node]) -> None:
        ordered = sorted(nodes, key=_order)
        if not ordered:
            raise TreeError("a tree needs at least its root node; got no nodes")
        by_id: dict[str, Node] = {}
        for node in ordered:
            if node.id in by_id:
                raise TreeError(f"duplicate node id {node.id!r}")
            by_id[node.id] = node

        roots = [n for n in ordered if n.action is Action.ROOT]
        if len(roots) != 1:
            found = ", ".join(n.id for n in roots) or "none"
            raise TreeError(f"a tree needs exactly one node with action 'root'; found {found}")
        root = roots[0]
        if root.parent_id is not None:
            raise TreeError(f"the root {root.id} must have no parent, has {root.parent_id!r}")

        children: dict[str, list[Node]] = {n.id: [] for n in ordered}
        for node in ordered:
            if node is root:
                continue
            if node.parent_id is None:
                raise TreeError(f"node {node.id} has no parent but is not the root (action {node.action})")
            if node.parent_id not in by_id:
                raise TreeError(f"node {node.id} names parent {node.parent_id!r}, which is not in the tree")
            children[node.parent_id].append(node)

        # Every node must hang below the root; anything else is a cycle among non-root nodes.
        reached = {root.id}
        frontier = [root.id]
        while frontier:
            current = frontier.pop()
            for child in children[current]:
                reached.add(child.id)
                frontier.append(child.id)
        if len(reached) != len(ordered):
            stray = sorted(set(by_id) - reached)
            raise TreeError(
                f"nodes {', '.join(stray)} do not descend from the root {root.id} (a parent cycle)"
            )

        self._ordered: tuple[Node, ...] = tuple(ordered)
        self._by_id = by_id
        self._children = {k: tuple(v) for k, v in children.items()}
        self.root: Node = root

    def extended(self, nodes: Iterable[Node]) -> Tree:
        """This tree with ``nodes`` added, each created after every node already in it (a higher seq).

        Costs the new nodes, not the whole tree: each needs only a parent already in the tree (or
        earlier among ``nodes``), which keeps every node below the root. Raises ``TreeError`` as the
        constructor would.
        """
        added = sorted(nodes, key=_order)
        if not added:
            return self
        if _order(added[0]) <= _order(self._ordered[-1]):
            raise TreeError(f"node {added[0].id} is not newer than {self._ordered[-1].id}; build a new Tree")
        by_id = dict(self._by_id)
        children = dict(self._children)
        for node in added:
            if node.id in by_id:
                raise TreeError(f"duplicate node id {node.id!r}")
            if node.action is Action.ROOT or node.parent_id is None:
                raise TreeError(
                    f"a tree needs exactly one node with action 'root'; found {self.root.id}, {node.id}"
                )
            if node.parent_id not in by_id:
                raise TreeError(f"node {node.id} names parent {node.parent_id!r}, which is not in the tree")
            by_id[node.id] = node
            children[node.parent_id] = children[node.parent_id] + (node,)
            children[node.id] = ()
        tree = Tree.__new__(Tree)
        tree._ordered = self._ordered + tuple(added)
        tree._by_id = by_id
        tree._children = children
        tree.root = self.root
        return tree

    def __len__(self) -> int:
        return len(self._ordered)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._ordered)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    def get(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise TreeError(f"no node {node_id!r} in this run's tree") from None

    def child_count(self, node_id: str) -> int:
        self.get(node_id)
        return len(self._children[node_id])

    def children(self, node_id: str) -> list[Node]:
        self.get(node_id)
        return list(self._children[node_id])

    def parent(self, node_id: str) -> Node | None:
        parent_id = self.get(node_id).parent_id
        return None if parent_id is None else self._by_id[parent_id]

    def siblings(self, node_id: str) -> list[Node]:
        """The other children of this node's parent, by seq; the root has none."""
        parent = self.parent(node_id)
        if parent is None:
            return []
        return [n for n in self._children[parent.id] if n.id != node_id]

    def subtree_ids(self, node_id: str) -> set[str]:
        """The node itself and all its descendants."""
        self.get(node_id)
        found = {node_id}
        frontier = [node_id]
        while frontier:
            for child in self._children[frontier.pop()]:
                found.add(child.id)
                frontier.append(child.id)
        return found

    def depth(self, node_id: str) -> int:
        depth = 0
        node = self.get(node_id)
        while node.parent_id is not None:
            node = self._by_id[node.parent_id]
            depth += 1
        return depth

    def leaves(self) -> list[Node]:
        return [n for n in self._ordered if not self._children[n.id]]

    def latest(self) -> Node:
        return self._ordered[-1]

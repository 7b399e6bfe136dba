"""Selection around attempts still in flight: several expansions of one tree at once.

A run can have attempts being written or evaluated while the policy picks the next node (the
headless loop's parallel workers, an MCP host keeping several ``add_child`` tasks going). Two of
them should not repair the same failing node, nor push the root past its throttle; anything else
(two plans on the best node) is what the policy wants and stays allowed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from stark_mcp.tree.config import PolicyConfig, Selection
from stark_mcp.tree.policies import select
from stark_mcp.tree.seeding import step_rng
from stark_mcp.tree.structure import Tree

RESELECT_TRIES = 8


def crowded(tree: Tree, config: PolicyConfig, selection: Selection, pending: Sequence[Selection]) -> bool:
    """Whether ``selection`` duplicates work in flight: a debug of a node already being repaired,
    or one more child of a root whose children and attempts in flight reach ``n_root``."""
    if selection.action == "debug":
        return any(p.node_id == selection.node_id for p in pending)
    if selection.node_id == tree.root.id and config.name == "stark":
        in_flight = sum(p.node_id == tree.root.id for p in pending)
        return tree.child_count(tree.root.id) + in_flight >= config.n_root
    return False


def select_around(
    tree: Tree, config: PolicyConfig, seed: int, step: int, pending: Sequence[Selection]
) -> Selection:
    """The policy's choice for ``step``, drawn again (a few times, from derived seeds) while it is
    ``crowded``; deterministic for a given tree, seed, step and work in flight. With nothing in
    flight it is exactly ``select(tree, config, step_rng(seed, step))``."""
    selection = select(tree, config, step_rng(seed, step))
    tries = 0
    while config.name == "stark" and tries < RESELECT_TRIES and crowded(tree, config, selection, pending):
        tries += 1
        selection = select(tree, config, random.Random(f"{seed}:{step}:{tries}"))
    return selection

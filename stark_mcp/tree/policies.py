"""Selection policies: STARK's adapted epsilon-greedy and the paper's comparison baselines."""

from __future__ import annotations

import random

from stark_mcp.tree.config import PolicyConfig, Selection
from stark_mcp.tree.eligibility import action_for, best, describe, eligible, expandable_leaves
from stark_mcp.tree.errors import NothingEligible
from stark_mcp.tree.mcts import select_uct
from stark_mcp.tree.structure import Tree


def select(tree: Tree, config: PolicyConfig, rng: random.Random) -> Selection:
    """The node to expand next under ``config``; deterministic for a given ``rng`` state.

    Only the stark policy draws from ``rng`` (one ``random()`` per call, plus one ``choice`` when
    it explores), so the stream stays aligned across policies and resumed runs.
    """
    if config.name == "stark":
        return _select_stark(tree, config, rng)
    if config.name == "greedy":
        node = best(eligible(tree, config))
        return Selection(
            node_id=node.id,
            action=action_for(tree, node),
            reason=f"greedy: best node {describe(node)}",
        )
    if config.name == "sampling":
        return Selection(
            node_id=tree.root.id,
            action="plan",
            reason=f"sampling: attempt {len(tree)} of best-of-K, drawn fresh from the root {tree.root.id}",
        )
    if config.name == "reflexion":
        node = tree.latest()
        verb = "repair" if action_for(tree, node) == "debug" else "refine"
        return Selection(
            node_id=node.id,
            action=action_for(tree, node),
            reason=f"reflexion: {verb} the latest attempt {describe(node)} with its feedback",
        )
    return select_uct(tree, config)


def _select_stark(tree: Tree, config: PolicyConfig, rng: random.Random) -> Selection:
    candidates = eligible(tree, config)
    if not candidates:
        # Unreachable with n_root >= 1 (docs/search.md proves it); kept so a future rule change
        # fails loudly instead of picking an ineligible node.
        raise NothingEligible(
            f"no node is eligible: the root has {len(tree.children(tree.root.id))} children "
            f"(limit n_root={config.n_root}) and every other node is a dead branch"
        )
    explore = rng.random() < config.eps
    if explore:
        leaves = expandable_leaves(tree, candidates)
        if not leaves:
            raise NothingEligible("no eligible node is a leaf, so there is nothing to explore")
        node = rng.choice(leaves)
        reason = f"explore (eps={config.eps}): random expandable leaf {describe(node)}, 1 of {len(leaves)}"
    else:
        node = best(candidates)
        reason = f"exploit: best eligible node {describe(node)}, 1 of {len(candidates)} eligible"
    return Selection(node_id=node.id, action=action_for(tree, node), reason=reason)

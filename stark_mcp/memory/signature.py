"""A problem's operator signature, read statically from its reference source. Pure.

The signature is the set of torch operators the reference names: calls and modules reached through
``torch``, ``torch.nn``, ``torch.nn.functional`` (``F``) or ``nn``, and tensor methods called in it
(``x.sum()``), lower-cased (``nn.Conv3d`` and ``F.conv3d`` are both ``conv3d``). Nothing is run.
"""

from __future__ import annotations

import ast

from stark_mcp.python_ast import parse

# Names that say nothing about the computation.
NOT_OPS = frozenset({
    "module", "parameter", "tensor", "randn", "rand", "zeros", "ones", "empty", "device", "no_grad",
    "super", "__init__", "size", "shape", "to", "cuda", "float", "contiguous", "view", "reshape",
    "item", "dim", "numel", "append", "get_inputs", "get_init_inputs", "manual_seed", "float32",
})


def op_signature(source: str) -> frozenset[str]:
    try:
        tree = parse(source)
    except SyntaxError:
        return frozenset()
    ops: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            root = func.value
            while isinstance(root, (ast.Attribute, ast.Call)):  # torch.sum(x).mean(): back to torch
                root = root.value if isinstance(root, ast.Attribute) else root.func
            # torch.x / nn.X / F.x, and methods of local tensors (x.sum()); self.conv(x) names a layer.
            if isinstance(root, ast.Name) and root.id != "self":
                ops.add(func.attr.lower())
    return frozenset(op for op in ops if op not in NOT_OPS and not op.startswith("_"))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)

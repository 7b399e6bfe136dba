"""Comparing a candidate's published outputs with the trusted reference, in the trusted worker.

The candidate side of a comparison is built from two untrusted things: the runner's JSON description
of its output (validated here by ``validate_tree``; anything malformed is a ``ChannelError``) and the
bytes it published into the shared output region (copied by the worker after the call). The
reference side is the model run here, natively and in float64.

Checks run stage by stage over every output: type, shape, dtype, device, finite, then value under the
precision contract: ``err = ||out - ref64|| / ||ref64||`` must not exceed
``tau = max(factor * ||ref_native - ref64|| / ||ref64||, floor)``, so a candidate at most ``factor``
times less accurate than the reference in its own precision passes, and a more accurate one always
does. Standard library and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from stark_mcp.evaluator.common.wire import CorrectnessSummary
from stark_mcp.evaluator.trusted.compare_trees import Tree

_TINY = 1e-30
MAX_NODES = 512
MAX_DEPTH = 8

# Verdict strings (the parent maps them onto records.Status).
WRONG, REJECTED = "wrong_output", "rejected"


class ChannelError(Exception):
    """The runner's output description is not a well-formed tree."""


@dataclass(frozen=True)
class Contract:
    factor: float = 8.0
    floor: float = 1e-5
    fallback: float = 1e-4


@dataclass
class TrialCheck:
    status: str | None = None  # None: this call's outputs are correct
    reason: str | None = None
    message: str = ""
    rel_norm_error: float | None = None
    tolerance: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    allclose_1e2: bool | None = None
    allclose_1e4: bool | None = None
    used_fp64: bool = True

    @property
    def ok(self) -> bool:
        return self.status is None


class _Fail(Exception):
    def __init__(self, status: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


# ---- encoding ------------------------------------------------------------------------------------------


def encode_reference(obj: Any) -> Tree:
    """A reference output as a tree whose tensor leaves carry the tensors themselves."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        return {
            "k": "tensor",
            "t": t,
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "device": str(t.device),
        }
    if isinstance(obj, (tuple, list)):
        return {"k": "seq", "type": type(obj).__name__, "items": [encode_reference(x) for x in obj]}
    if obj is None or isinstance(obj, (bool, int, float)):
        return {"k": "scalar", "v": obj}
    return {"k": "other", "type": type(obj).__name__}


def validate_tree(node: Any, published: list[torch.Tensor | None]) -> Tree:
    """Check the runner's description against the schema; attach the published tensor to each leaf."""
    count = [0]

    def walk(n: Any, depth: int) -> Tree:
        count[0] += 1
        if count[0] > MAX_NODES or depth > MAX_DEPTH:
            raise ChannelError("the output description is too large or too deep")
        if not isinstance(n, dict) or not isinstance(n.get("k"), str):
            raise ChannelError("an output node is not an object with a kind")
        kind = n["k"]
        if kind == "tensor":
            shape, dtype, device, leaf = n.get("shape"), n.get("dtype"), n.get("device"), n.get("leaf")
            if not (
                isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape) and len(shape) <= 16
            ):
                raise ChannelError(f"bad tensor shape {shape!r}")
            if not isinstance(dtype, str) or not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ChannelError(f"bad tensor dtype {dtype!r}")
            if not isinstance(device, str) or len(device) > 32:
                raise ChannelError(f"bad tensor device {device!r}")
            if type(leaf) is not int or leaf < -1 or leaf >= len(published):
                raise ChannelError(f"bad output leaf {leaf!r}")
            return {
                "k": "tensor",
                "shape": shape,
                "dtype": dtype,
                "device": device,
                "t": published[leaf] if leaf >= 0 else None,
            }
        if kind == "seq":
            items = n.get("items")
            if n.get("type") not in ("tuple", "list") or not isinstance(items, list):
                raise ChannelError("bad sequence node")
            return {"k": "seq", "type": n["type"], "items": [walk(x, depth + 1) for x in items]}
        if kind == "scalar":
            v = n.get("v")
            if not (v is None or type(v) in (bool, int, float)):
                raise ChannelError(f"bad scalar {v!r}")
            return {"k": "scalar", "v": v}
        if kind in ("subclass", "other"):
            t = n.get("type")
            if not isinstance(t, str):
                raise ChannelError("bad type name")
            return {"k": kind, "type": t[:120]}
        raise ChannelError(f"unknown output kind {kind!r}")

    return walk(node, 0)


# ---- structure ----------------------------------------------------------------------------------------


def _describe(node: Tree) -> str:
    kind = node.get("k")
    if kind == "tensor":
        return f"Tensor{tuple(node['shape'])} {node['dtype']} on {node['device']}"
    if kind == "seq":
        return f"{node['type']} of {len(node['items'])}"
    if kind == "scalar":
        return f"{type(node['v']).__name__} {node['v']!r}"
    return str(node.get("type", kind))


def _pair(cand: Tree, ref: Tree, path: str, out: list[tuple[str, Tree, Tree]]) -> None:
    rk, ck = ref.get("k"), cand.get("k")
    if ck == "subclass":
        raise _Fail(
            REJECTED,
            "tensor_subclass",
            f"{path}: returned a torch.Tensor subclass ({cand['type']}); outputs must be plain tensors",
        )
    if ck == "other" and "subclass" in str(cand.get("type")):
        raise _Fail(
            REJECTED,
            "output_type",
            f"{path}: returned {cand['type']}; outputs must be plain "
            "tensors, tuples and lists (no subclasses, no lazy objects)",
        )
    if rk == "seq":
        if ck != "seq" or len(cand["items"]) != len(ref["items"]) or cand["type"] != ref["type"]:
            raise _Fail(WRONG, "type", f"{path}: expected {_describe(ref)}, got {_describe(cand)}")
        for i, (c, r) in enumerate(zip(cand["items"], ref["items"], strict=True)):
            _pair(c, r, f"{path}[{i}]", out)
        return
    if rk != ck or (rk == "other" and cand.get("type") != ref.get("type")):
        raise _Fail(WRONG, "type", f"{path}: expected {_describe(ref)}, got {_describe(cand)}")
    out.append((path, cand, ref))


def _leaves(cand: Tree, ref: Tree) -> list[tuple[str, Tree, Tree]]:
    out: list[tuple[str, Tree, Tree]] = []
    _pair(cand, ref, "output", out)
    return out


def _layout_checks(tensors: list[tuple[str, Tree, Tree]]) -> None:
    for p, c, r in tensors:
        if list(c["shape"]) != list(r["shape"]):
            raise _Fail(WRONG, "shape", f"{p}: shape {tuple(c['shape'])}, expected {tuple(r['shape'])}")
    for p, c, r in tensors:
        if c["dtype"] != r["dtype"]:
            raise _Fail(WRONG, "dtype", f"{p}: dtype {c['dtype']}, expected {r['dtype']}")
    for p, c, r in tensors:
        if c["device"] != r["device"]:
            raise _Fail(WRONG, "device", f"{p}: on {c['device']}, expected {r['device']}")


def _structure_checks(leaves: list[tuple[str, Tree, Tree]]) -> None:
    tensors = [(p, c, r) for p, c, r in leaves if r["k"] == "tensor"]
    _layout_checks(tensors)
    for p, c, _r in tensors:
        if c.get("t") is None:
            raise ChannelError(f"{p}: the output matches the expected layout but was not published")
    for p, c, r in tensors:
        ct, rt = c["t"], r["t"]
        if _is_numeric_float(ct) and not _all_finite(ct):
            bad = ~torch.isfinite(ct) & torch.isfinite(rt)
            if bool(bad.any()):
                raise _Fail(
                    WRONG,
                    "nonfinite",
                    f"{p}: {int(bad.sum())} NaN/Inf value(s) where the reference is finite",
                )


def _is_numeric_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _all_finite(t: torch.Tensor) -> bool:
    """Whether every element is finite, in one reduction: the largest magnitude is NaN or infinite
    otherwise (an element-wise mask of a 6 GB output costs ten times more)."""
    return t.numel() == 0 or bool(torch.isfinite(torch.linalg.vector_norm(t, ord=float("inf"))))


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


CHUNK = 1 << 24  # elements per step: comparisons hold float64 copies of one chunk, never of a whole output


def _squared_norm(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(x) ** 2  # |x|^2 of complex elements too


def rel_norm(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| in float64 (a zero reference divides by a tiny constant), in chunks."""
    xf, rf = x.reshape(-1), ref.reshape(-1)
    num = torch.zeros((), dtype=torch.float64, device=rf.device)
    den = torch.zeros((), dtype=torch.float64, device=rf.device)
    for i in range(0, rf.numel(), CHUNK):
        xd, rd = _wide(xf[i : i + CHUNK]), _wide(rf[i : i + CHUNK])
        num += _squared_norm(xd - rd)
        den += _squared_norm(rd)
    return float(num) ** 0.5 / max(float(den) ** 0.5, _TINY)


@dataclass
class _Errors:
    err: float  # ||c - base|| / ||base||
    ref_err: float  # ||n - base|| / ||base||: the reference's own error
    max_abs: float
    scale: float
    close_1e2: bool
    close_1e4: bool


def _close_ratio(c: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """max |c - n| / (1 + |n|): ``allclose(c, n, rtol=t, atol=t)`` holds where this is at most t, so one
    pass in the outputs' own precision answers every t (finite float32 and float64 values)."""
    q = (c - n).abs_()
    return torch.linalg.vector_norm(q.div_(n.abs().add_(1)), ord=float("inf"))


def _errors(
    c: torch.Tensor, n: torch.Tensor, base: torch.Tensor, finite: torch.Tensor | None
) -> _Errors:
    """Every statistic of a leaf in one chunked pass over the elements where the reference is finite.

    The sums stay on the leaf's device and are read once at the end: a read per chunk waits for the
    device, and a 6 GB output has a hundred chunks, compared on every checked call. For the same
    reason each step is one pass where it can be (the narrow operand is widened as it is read, the
    largest magnitudes are infinity norms). Elements where the reference is not finite count as zero
    (the caller checks them on their own) rather than being selected out, which would copy and wait.
    ``finite``: the mask of finite reference elements, None when every one is (the caller knows)."""
    cf, nf, bf = c.reshape(-1), n.reshape(-1), base.reshape(-1)
    mf = None if finite is None else finite.reshape(-1)
    inf = float("inf")
    # num, ref_num, den (sums of squares); max_abs, scale, close ratio (maxima)
    acc = torch.zeros(6, dtype=torch.float64, device=bf.device)
    close = torch.ones(2, dtype=torch.bool, device=bf.device)  # allclose at 1e-2 and 1e-4, masked path
    # half-precision allclose rounds its own threshold: those (smaller) outputs take the same call
    by_ratio = mf is None and c.dtype in (torch.float32, torch.float64)
    for i in range(0, bf.numel(), CHUNK):
        craw, nraw, bb = cf[i : i + CHUNK], nf[i : i + CHUNK], _wide(bf[i : i + CHUNK])
        d, e = craw - bb, nraw - bb  # promoted to bb's width element by element: exact
        if mf is not None:
            m, zero = mf[i : i + CHUNK], torch.zeros((), dtype=bb.dtype, device=bb.device)
            d, e, bb = torch.where(m, d, zero), torch.where(m, e, zero), torch.where(m, bb, zero)
        acc[:3] += torch.stack((_squared_norm(d), _squared_norm(e), _squared_norm(bb)))
        top = [torch.linalg.vector_norm(d, ord=inf), torch.linalg.vector_norm(bb, ord=inf)]
        if by_ratio:
            top.append(_close_ratio(craw, nraw).double())
        else:  # as KernelBench does, on the raw values (infinities equal, NaN never close)
            close &= torch.stack(
                (
                    torch.isclose(craw, nraw, rtol=1e-2, atol=1e-2).all(),
                    torch.isclose(craw, nraw, rtol=1e-4, atol=1e-4).all(),
                )
            )
            top.append(acc.new_zeros(()))
        acc[3:] = torch.maximum(acc[3:], torch.stack(top))
    num, ref_num, den, max_abs, scale, ratio = acc.tolist()
    close_1e2, close_1e4 = close.tolist()
    if by_ratio:
        close_1e2, close_1e4 = ratio <= 1e-2, ratio <= 1e-4
    norm = max(den**0.5, _TINY)
    return _Errors(num**0.5 / norm, ref_num**0.5 / norm, max_abs, scale, close_1e2, close_1e4)


@dataclass
class _LeafValue:
    path: str
    err: float
    tau: float
    max_abs: float
    max_rel: float
    close_1e2: bool
    close_1e4: bool
    used_fp64: bool


def _value(path: str, cand: Tree, native: Tree, ref64: Tree | None, contract: Contract) -> _LeafValue:
    if native["k"] == "scalar":
        same = cand["v"] == native["v"] or (cand["v"] != cand["v"] and native["v"] != native["v"])
        if not same:
            raise _Fail(WRONG, "tolerance", f"{path}: {cand['v']!r}, expected {native['v']!r}")
        return _LeafValue(path, 0.0, contract.floor, 0.0, 0.0, True, True, True)
    c, n = cand["t"], native["t"]
    if c.device != n.device:
        c = c.to(n.device)
    if not _is_numeric_float(n):
        if not torch.equal(c, n):
            diff = int((c != n).sum())
            raise _Fail(
                WRONG, "tolerance", f"{path}: {diff} of {n.numel()} elements differ from the exact reference"
            )
        return _LeafValue(path, 0.0, 0.0, 0.0, 0.0, True, True, True)
    r = ref64["t"] if ref64 is not None and ref64.get("k") == "tensor" else None
    if r is not None and (list(r.shape) != list(n.shape) or not _is_numeric_float(r)):
        r = None
    finite = None
    if not (_all_finite(n) and (r is None or _all_finite(r))):
        finite = torch.isfinite(n) if r is None else torch.isfinite(n) & torch.isfinite(r)
        special = ~finite
        cs, ns = c[special], n[special]
        matched = (cs == ns) | (torch.isnan(cs) & torch.isnan(ns))
        if not bool(matched.all()):
            raise _Fail(
                WRONG,
                "tolerance",
                f"{path}: {int((~matched).sum())} element(s) differ where the reference is NaN/Inf",
            )
    e = _errors(c, n, r if r is not None else n, finite)
    tau = max(contract.factor * e.ref_err, contract.floor) if r is not None else contract.fallback
    return _LeafValue(
        path, e.err, tau, e.max_abs, e.max_abs / max(e.scale, _TINY), e.close_1e2, e.close_1e4, r is not None
    )


def _excess(v: _LeafValue) -> float:
    """How far a leaf is over its tolerance, for picking the worst; NaN counts as infinitely far."""
    ratio = v.err / v.tau if v.tau > 0 else (0.0 if v.err == 0 else float("inf"))
    return float("inf") if ratio != ratio else ratio


def check_structure(cand: Tree, expected: Tree) -> TrialCheck | None:
    """Types, shapes, dtypes and devices only (calls whose values are not checked); None when fine."""
    try:
        leaves = _leaves(cand, expected)
        _layout_checks([(p, c, r) for p, c, r in leaves if r["k"] == "tensor"])
    except _Fail as fail:
        return TrialCheck(status=fail.status, reason=fail.reason, message=fail.message)
    return None


def check_trial(cand: Tree, native: Tree, ref64: Tree | None, contract: Contract) -> TrialCheck:
    """Compare one call's outputs; the first failing stage decides the reason."""
    try:
        leaves = _leaves(cand, native)
        _structure_checks(leaves)
        ref_leaves: dict[str, Tree] = {}
        if ref64 is not None:
            try:
                # (path, float64 leaf, native leaf): keep the float64 one, it is the reference of record
                ref_leaves = {p: r64 for p, r64, _native in _leaves(ref64, native)}
            except _Fail:
                ref_leaves = {}
        values = [_value(p, c, r, ref_leaves.get(p), contract) for p, c, r in leaves]
    except _Fail as fail:
        return TrialCheck(status=fail.status, reason=fail.reason, message=fail.message)
    if not values:
        return TrialCheck()
    worst = max(values, key=_excess)
    check = TrialCheck(
        rel_norm_error=worst.err,
        tolerance=worst.tau,
        max_abs_error=max(v.max_abs for v in values),
        max_rel_error=max(v.max_rel for v in values),
        allclose_1e2=all(v.close_1e2 for v in values),
        allclose_1e4=all(v.close_1e4 for v in values),
        used_fp64=all(v.used_fp64 for v in values),
    )
    if not worst.err <= worst.tau:  # a NaN error is never within tolerance
        basis = "float64 reference" if worst.used_fp64 else "reference (no float64 run)"
        check.status, check.reason = WRONG, "tolerance"
        check.message = (
            f"{worst.path}: relative error {worst.err:.3g} vs the {basis} exceeds the "
            f"tolerance {worst.tau:.3g} (precision contract)"
        )
    return check


def summarize(checks: list[TrialCheck]) -> CorrectnessSummary:
    """Worst errors over calls; allclose verdicts hold only if they hold in every call."""
    measured = [c for c in checks if c.rel_norm_error is not None]

    def worst(attr: str) -> float | None:
        vals = [getattr(c, attr) for c in measured]
        return max(vals) if vals else None

    worst_trial = max(
        measured, key=lambda c: c.rel_norm_error / max(c.tolerance or _TINY, _TINY), default=None
    )
    return {
        "trials": len(checks),
        "trials_passed": sum(1 for c in checks if c.ok),
        "max_abs_error": worst("max_abs_error"),
        "max_rel_error": worst("max_rel_error"),
        "rel_norm_error": worst_trial.rel_norm_error if worst_trial else None,
        "tolerance": worst_trial.tolerance if worst_trial else None,
        "allclose_1e2": all(bool(c.allclose_1e2) for c in checks) if checks else None,
        "allclose_1e4": all(bool(c.allclose_1e4) for c in checks) if checks else None,
    }

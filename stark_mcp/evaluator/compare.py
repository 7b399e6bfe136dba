"""Comparing a candidate's outputs with the trusted reference, in the parent (pure functions).

Trees are the records ``child/sc_proto.encode`` produces: ``tensor`` (with its device and a CPU
copy), ``seq``, ``scalar``, ``subclass`` (a torch.Tensor subclass, never deserialized) and ``other``.
Checks run stage by stage over every output: type, shape, dtype, device, finite, then value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from stark_mcp.records import CorrectnessReport, Status

Tree = dict[str, Any]
_TINY = 1e-30


@dataclass(frozen=True)
class Contract:
    factor: float = 8.0
    floor: float = 1e-5
    fallback: float = 1e-4


@dataclass
class TrialCheck:
    status: Status | None = None  # None: this trial passed
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
    def __init__(self, status: Status, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _describe(node: Tree) -> str:
    kind = node.get("k")
    if kind == "tensor":
        t = node["t"]
        return f"Tensor{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} on {node['device']}"
    if kind == "seq":
        return f"{node['type']} of {len(node['items'])}"
    if kind == "scalar":
        return f"{type(node['v']).__name__} {node['v']!r}"
    return str(node.get("type", kind))


def _pair(cand: Tree, ref: Tree, path: str, out: list[tuple[str, Tree, Tree]]) -> None:
    """Match the candidate's structure to the reference's; leaves go to ``out``."""
    rk, ck = ref.get("k"), cand.get("k")
    if ck == "subclass":
        raise _Fail(Status.REJECTED, "tensor_subclass",
                    f"{path}: returned a torch.Tensor subclass ({cand['type']}); outputs must be plain tensors")
    if rk == "seq":
        if ck != "seq" or len(cand["items"]) != len(ref["items"]):
            raise _Fail(Status.WRONG_OUTPUT, "type",
                        f"{path}: expected {_describe(ref)}, got {_describe(cand)}")
        for i, (c, r) in enumerate(zip(cand["items"], ref["items"])):
            _pair(c, r, f"{path}[{i}]", out)
        return
    if rk != ck or (rk == "other" and cand.get("type") != ref.get("type")):
        raise _Fail(Status.WRONG_OUTPUT, "type", f"{path}: expected {_describe(ref)}, got {_describe(cand)}")
    out.append((path, cand, ref))


def _leaves(cand: Tree, ref: Tree) -> list[tuple[str, Tree, Tree]]:
    out: list[tuple[str, Tree, Tree]] = []
    _pair(cand, ref, "output", out)
    return out


def _structure_checks(leaves: list[tuple[str, Tree, Tree]]) -> None:
    tensors = [(p, c, r) for p, c, r in leaves if r["k"] == "tensor"]
    for p, c, r in tensors:
        if tuple(c["t"].shape) != tuple(r["t"].shape):
            raise _Fail(Status.WRONG_OUTPUT, "shape",
                        f"{p}: shape {tuple(c['t'].shape)}, expected {tuple(r['t'].shape)}")
    for p, c, r in tensors:
        if c["t"].dtype != r["t"].dtype:
            raise _Fail(Status.WRONG_OUTPUT, "dtype", f"{p}: dtype {c['t'].dtype}, expected {r['t'].dtype}")
    for p, c, r in tensors:
        if c["device"] != r["device"]:
            raise _Fail(Status.WRONG_OUTPUT, "device", f"{p}: on {c['device']}, expected {r['device']}")
    for p, c, r in tensors:
        ct, rt = c["t"], r["t"]
        if _is_numeric_float(ct):
            bad = ~torch.isfinite(ct) & torch.isfinite(rt)
            if bool(bad.any()):
                raise _Fail(Status.WRONG_OUTPUT, "nonfinite",
                            f"{p}: {int(bad.sum())} NaN/Inf value(s) where the reference is finite")


def _is_numeric_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def rel_norm(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| in float64 (a zero reference divides by a tiny constant)."""
    xd, rd = _wide(x), _wide(ref)
    return float(torch.linalg.vector_norm(xd - rd)) / max(float(torch.linalg.vector_norm(rd)), _TINY)


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
            raise _Fail(Status.WRONG_OUTPUT, "tolerance", f"{path}: {cand['v']!r}, expected {native['v']!r}")
        return _LeafValue(path, 0.0, contract.floor, 0.0, 0.0, True, True, True)
    c, n = cand["t"], native["t"]
    if not _is_numeric_float(n):
        if not torch.equal(c, n):
            diff = int((c != n).sum())
            raise _Fail(Status.WRONG_OUTPUT, "tolerance",
                        f"{path}: {diff} of {n.numel()} elements differ from the exact reference")
        return _LeafValue(path, 0.0, 0.0, 0.0, 0.0, True, True, True)
    r = ref64["t"] if ref64 is not None and ref64.get("k") == "tensor" else None
    if r is not None and tuple(r.shape) != tuple(n.shape):
        r = None
    finite = torch.isfinite(n) if r is None else torch.isfinite(n) & torch.isfinite(r)
    special = ~finite
    if bool(special.any()):
        cs, ns = c[special], n[special]
        matched = (cs == ns) | (torch.isnan(cs) & torch.isnan(ns))
        if not bool(matched.all()):
            raise _Fail(Status.WRONG_OUTPUT, "tolerance",
                        f"{path}: {int((~matched).sum())} element(s) differ where the reference is NaN/Inf")
    base = _wide(r if r is not None else n)[finite]
    cf = _wide(c)[finite]
    err = rel_norm(cf, base)
    tau = max(contract.factor * rel_norm(n[finite], base), contract.floor) if r is not None else contract.fallback
    max_abs = float((cf - base).abs().max()) if base.numel() else 0.0
    scale = float(base.abs().max()) if base.numel() else 0.0
    return _LeafValue(
        path, err, tau, max_abs, max_abs / max(scale, _TINY),
        bool(torch.allclose(c, n, rtol=1e-2, atol=1e-2)), bool(torch.allclose(c, n, rtol=1e-4, atol=1e-4)),
        r is not None,
    )


def check_trial(cand: Tree, native: Tree, ref64: Tree | None, contract: Contract) -> TrialCheck:
    """Compare one trial's outputs; the first failing stage decides the reason."""
    try:
        leaves = _leaves(cand, native)
        _structure_checks(leaves)
        ref_leaves: dict[str, Tree] = {}
        if ref64 is not None:
            try:
                ref_leaves = {p: r for p, _, r in _leaves(ref64, native)}
            except _Fail:
                ref_leaves = {}
        values = [_value(p, c, r, ref_leaves.get(p), contract) for p, c, r in leaves]
    except _Fail as fail:
        return TrialCheck(status=fail.status, reason=fail.reason, message=fail.message)
    if not values:
        return TrialCheck()
    worst = max(values, key=lambda v: v.err / v.tau if v.tau > 0 else (0.0 if v.err == 0 else float("inf")))
    check = TrialCheck(
        rel_norm_error=worst.err, tolerance=worst.tau,
        max_abs_error=max(v.max_abs for v in values), max_rel_error=max(v.max_rel for v in values),
        allclose_1e2=all(v.close_1e2 for v in values), allclose_1e4=all(v.close_1e4 for v in values),
        used_fp64=all(v.used_fp64 for v in values),
    )
    if worst.err > worst.tau:
        basis = "float64 reference" if worst.used_fp64 else "reference (no float64 run)"
        check.status, check.reason = Status.WRONG_OUTPUT, "tolerance"
        check.message = (f"{worst.path}: relative error {worst.err:.3g} vs the {basis} exceeds the "
                         f"tolerance {worst.tau:.3g} (precision contract: at most {_fmt(worst.tau)})")
    return check


def _fmt(x: float) -> str:
    return f"{x:.1e}"


def summarize(checks: list[TrialCheck]) -> CorrectnessReport:
    """Worst errors over trials; allclose verdicts hold only if they hold in every trial."""
    measured = [c for c in checks if c.rel_norm_error is not None]

    def worst(attr: str) -> float | None:
        vals = [getattr(c, attr) for c in measured]
        return max(vals) if vals else None

    worst_trial = max(measured, key=lambda c: c.rel_norm_error / max(c.tolerance or _TINY, _TINY), default=None)
    close2 = [c.allclose_1e2 for c in checks]
    close4 = [c.allclose_1e4 for c in checks]
    return CorrectnessReport(
        trials=len(checks),
        trials_passed=sum(1 for c in checks if c.ok),
        max_abs_error=worst("max_abs_error"),
        max_rel_error=worst("max_rel_error"),
        rel_norm_error=worst_trial.rel_norm_error if worst_trial else None,
        tolerance=worst_trial.tolerance if worst_trial else None,
        allclose_1e2=all(bool(x) for x in close2) if checks else None,
        allclose_1e4=all(bool(x) for x in close4) if checks else None,
    )

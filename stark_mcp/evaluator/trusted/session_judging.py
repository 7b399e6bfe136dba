"""Judging one call of a candidate's (``CallJudging``): its answer validated, and, for a checked call,
its outputs read with the runner frozen and compared with the reference on the same fresh inputs.
A part of ``Session``; standard library and torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from stark_mcp.evaluator.common.shapes import ShapeSpec
from stark_mcp.evaluator.trusted import compare
from stark_mcp.evaluator.trusted.driver import Made
from stark_mcp.evaluator.trusted.runner_memory import OutputUnreadable
from stark_mcp.evaluator.trusted.session_state import CALL_ERRORS, SessionBase, Stop


class CallJudging(SessionBase):
    """Every call's answer validated; a checked call's outputs compared with the reference."""

    def _judge(self, made: Made, checked: bool, phase: str) -> None:
        """Validate a call's answer; with ``checked``, compare its outputs with the reference. Its
        pristine inputs are let go as soon as it is judged (gigabytes, for large problems)."""
        assert self.driver is not None
        try:
            self._judge_call(made, checked, phase)
        finally:
            self.driver.release_last()

    def _judge_call(self, made: Made, checked: bool, phase: str) -> None:
        assert self.driver is not None
        self.calls += 1
        meta = made.outcome.meta
        if meta.get("ok") is not True:
            status, reason = meta.get("status"), meta.get("reason")
            if (status, reason) not in CALL_ERRORS:
                raise Stop("runtime_error", "channel", f"invalid DONE from the candidate: {str(meta)[:300]}")
            raise Stop(str(status), str(reason), str(meta.get("message", ""))[:2000])
        spec = self.problem.shapes[made.call.shape]
        if not checked:
            self._judge_published(made, False, phase, spec, [None] * len(spec.outputs))
            return
        # A checked call's outputs are read with the runner frozen, into memory of ours alone where
        # they are read from its memory: no thread of the candidate sees the read begin, and nothing
        # it maps changes, so a checked call looks like any other from inside until the read is over.
        runner = self.driver.runner
        in_place = spec.output_bytes >= self.s.compare_in_place_bytes
        shared = not self.driver.reads_privately
        with runner.held_still():
            try:
                self._timed("compare", lambda: self.driver.fetch(made))
            except OutputUnreadable as exc:
                raise Stop("runtime_error", "channel", f"invalid output description: {exc}") from None
            if in_place and shared:
                # Outputs of gigabytes in the shared region are compared where they lie, the runner
                # frozen meanwhile, rather than copied: a private copy of a 6 GB output is what the
                # 80 GB GPU did not have room for.
                self._judge_published(made, True, phase, spec, self.driver.checked_views(made.call.shape))
                return
            published = (
                self._timed("compare", self._snapshot_now(made.call.shape))
                if shared
                else self.driver.checked_views(made.call.shape)  # ours alone: nothing can change it
            )
        self._judge_published(made, True, phase, spec, published)

    def _snapshot_now(self, shape: int) -> Callable[[], list[torch.Tensor]]:
        """Our copy of the shared outputs, finished (a GPU copy is queued: it must be done before the
        runner is thawed, or a thread of it could change what we copy)."""

        def take() -> list[torch.Tensor]:
            assert self.driver is not None
            copy = self.driver.snapshot(shape)
            self.tools.sync()
            return copy

        return take

    def _judge_published(
        self, made: Made, checked: bool, phase: str, spec: ShapeSpec, published: list[Any]
    ) -> None:
        assert self.driver is not None
        meta = made.outcome.meta
        try:
            cand = compare.validate_tree(meta.get("out"), published)
        except compare.ChannelError as exc:
            raise Stop("runtime_error", "channel", f"invalid output description: {exc}") from None
        where = f"{phase} call {self.calls}" + (
            f" on shape {spec.label}" if len(self.problem.shapes) > 1 else ""
        )
        flags = meta.get("flags")
        if isinstance(flags, list) and "output_in_harness_region" in flags:
            # Judged on every call, checked or not: the forward wrote into the harness's publish
            # buffer, which skips the copy that the baseline's bracket pays (outputs.py).
            raise Stop(
                "rejected",
                "output_in_harness_region",
                f"{where}: an output lies in the harness's own output region",
            )
        if not checked:
            bad = compare.check_structure(cand, spec.output_tree)
            if bad is not None:
                raise Stop(bad.status or "wrong_output", bad.reason or "type", f"{where}: {bad.message}")
            return
        self.checked += 1
        mutated = self.driver.mutated_inputs(made)
        if mutated:
            raise Stop(
                "rejected", "input_mutated", f"{where}: forward modified its input tensor(s) {mutated}"
            )
        if isinstance(flags, list) and "output_aliases_input" in flags:
            raise Stop("rejected", "output_aliases_input", f"{where}: an output shares storage with an input")
        native, ref64, note = self._timed("reference", lambda: self.problem.reference(made.call))
        check = self._timed(
            "compare",
            lambda: compare.check_trial(
                cand,
                compare.encode_reference(native),
                compare.encode_reference(ref64) if ref64 is not None else None,
                self.contract,
            ),
        )
        if not check.used_fp64 and "no_fp64_reference" not in self.flags:
            self.flags.append("no_fp64_reference")
            if note:
                self.findings.append(note)
        self.checks.append(check)
        if not check.ok:
            reason = check.reason or "tolerance"
            if phase != "correctness" and check.status == compare.WRONG:
                reason = "inconsistent"
            message = f"{where}: {check.message}{self._passed_before()}"
            raise Stop(check.status or compare.WRONG, reason, message)

    def _passed_before(self) -> str:
        """What a repair needs to know when earlier checked calls passed: the error comes and goes
        with the inputs or the timing, which points somewhere else than a wrong formula."""
        passed = sum(1 for c in self.checks[:-1] if c.ok)
        if not passed:
            return ""
        return (
            f" ({passed} checked call{'s' if passed > 1 else ''} before it passed on other fresh inputs: "
            "an error that comes and goes points at a race between threads, blocks or kernels, memory "
            "read before it is written, or state kept from one call to the next)"
        )

"""Sample records for the store tests: a small problem of our own and evaluations of it."""

from __future__ import annotations

from stark_mcp.records import CorrectnessReport, Evaluation, Status, TimingStats

PROBLEM_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def timing(median_ms: float) -> TimingStats:
    return TimingStats(
        median_ms=median_ms, iqr_ms=median_ms / 10, mean_ms=median_ms * 1.01,
        min_ms=median_ms * 0.9, max_ms=median_ms * 1.3, samples=25,
    )


def passed(median_ms: float) -> Evaluation:
    return Evaluation(
        status=Status.PASSED,
        runtime=timing(median_ms),
        baselines={"eager": timing(2.0)},
        speedups={"eager": 2.0 / median_ms},
        correctness=CorrectnessReport(trials=3, trials_passed=3, max_abs_error=1e-6, rel_norm_error=2e-7),
        device="cpu",
        source_hash="abc",
        logs={"build": "ok"},
    )


def failed(status: Status = Status.BUILD_ERROR) -> Evaluation:
    return Evaluation(
        status=status, reason="compile", message="error: expected ';'", logs={"build": "x.cu:3"}
    )

"""How the evaluator's verdict on a node reads in a prompt: compiler observation, execution result.

Pure formatting of ``records.Evaluation``. Logs are trimmed to their head and tail, where the
first error and the final summary of a compiler run sit.
"""

from __future__ import annotations

from stark_mcp.records import Evaluation, Node, Status
from stark_mcp.sol.text import sol_sentence

# Log phases whose text is the compiler's (or the loader's) voice; the rest belong to the run.
_COMPILER_PHASES = ("build", "compile", "load", "import", "nvcc", "ninja")
MAX_LOG_LINES = 60
HEAD_LINES = 25
MAX_LINE_CHARS = 300
MAX_MESSAGE_CHARS = 2000


def trim_log(text: str, max_lines: int = MAX_LOG_LINES, head: int = HEAD_LINES) -> str:
    """At most ``max_lines`` lines: the first ``head`` and the last ones, long lines cut."""
    lines = [_cut(line.rstrip(), MAX_LINE_CHARS) for line in text.strip("\n").splitlines()]
    if len(lines) > max_lines:
        tail = max_lines - head
        omitted = len(lines) - head - tail
        lines = lines[:head] + [f"... [{omitted} lines omitted] ..."] + lines[-tail:]
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + f" ... [{len(text) - limit + 20} chars cut]"


def _is_compiler_phase(phase: str) -> bool:
    return any(word in phase.lower() for word in _COMPILER_PHASES)


def _log_block(phase: str, text: str) -> str:
    return f"{phase} log:\n```text\n{trim_log(text)}\n```"


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def compiler_observation(evaluation: Evaluation) -> str:
    logs = [(p, t) for p, t in evaluation.logs.items() if _is_compiler_phase(p) and t.strip()]
    if logs:
        return "\n\n".join(_log_block(p, t) for p, t in logs)
    if evaluation.status is Status.BUILD_ERROR:
        return "The build failed; no compiler log was kept (see the message below)."
    if evaluation.status is Status.LOAD_ERROR:
        return "No compiler output was kept; loading the module failed (see the message below)."
    return "Built and loaded without errors."


def execution_result(evaluation: Evaluation) -> str:
    status = evaluation.status.value + (f" ({evaluation.reason})" if evaluation.reason else "")
    lines = [f"- status: {status}"]
    if evaluation.message.strip():
        message = _cut(evaluation.message.strip(), MAX_MESSAGE_CHARS)
        lines.append("- message: " + message.replace("\n", "\n  "))
    if evaluation.runtime is not None:
        rt = evaluation.runtime
        lines.append(
            f"- runtime: median {_ms(rt.median_ms)} (IQR {_ms(rt.iqr_ms)}, min {_ms(rt.min_ms)}, "
            f"{rt.samples} samples)"
        )
    for name, stats in evaluation.baselines.items():
        lines.append(f"- baseline {name}: median {_ms(stats.median_ms)}")
    for name, value in evaluation.speedups.items():
        lines.append(f"- speedup over {name}: {value:.3g}x")
    report = evaluation.correctness
    if report is not None and report.trials:
        parts = [f"{report.trials_passed}/{report.trials} trials passed"]
        if report.rel_norm_error is not None:
            limit = f" (tolerance {report.tolerance:.1e})" if report.tolerance is not None else ""
            parts.append(f"relative error {report.rel_norm_error:.2e}{limit}")
        if report.max_abs_error is not None:
            parts.append(f"max abs error {report.max_abs_error:.2e}")
        lines.append("- correctness: " + ", ".join(parts))
    if evaluation.sol is not None:
        lines.append("- speed of light: " + sol_sentence(evaluation.sol))
    if evaluation.own_kernel_share is not None:
        share = evaluation.own_kernel_share
        lines.append(f"- share of device time in the candidate's own kernels: {share:.0%}")
    if evaluation.flags:
        lines.append("- flags: " + ", ".join(evaluation.flags))
    logs = [(p, t) for p, t in evaluation.logs.items() if not _is_compiler_phase(p) and t.strip()]
    blocks = [_log_block(p, t) for p, t in logs]
    return "\n".join(lines) + ("\n\n" + "\n\n".join(blocks) if blocks else "")


def render_observations(node: Node) -> str:
    """The compiler observation and the execution result of a node, for a prompt."""
    if node.evaluation is None:
        return "Not evaluated yet."
    return (
        "Compiler observation:\n\n"
        + compiler_observation(node.evaluation)
        + "\n\nExecution result:\n\n"
        + execution_result(node.evaluation)
    )

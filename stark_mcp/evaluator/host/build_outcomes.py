"""What a candidate's build came to (``BuildOutcome``), read from its builder's last frame, its exit
and its log: the parent's verdicts on a build, and the log as far as a person reads it (pure but for
reading the log file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stark_mcp.evaluator.host.device_probe import DeviceInfo
from stark_mcp.evaluator.host.extension_requests import ExtensionSummary
from stark_mcp.evaluator.host.log_trimming import trim_compiler_log, trim_tail
from stark_mcp.records import Status


@dataclass
class BuildOutcome:
    """``ok``: built (or nothing to build); ``deferred``: the device's runner must build it."""

    ok: bool
    deferred: bool = False
    status: Status | None = None
    reason: str | None = None
    message: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    extensions: list[ExtensionSummary] = field(default_factory=list)


def builder_verdict(
    frame: dict[str, object] | None,
    code: int | None,
    info: DeviceInfo,
    log_path: Path,
    failed_log: str,
) -> BuildOutcome:
    """What a builder's run came to: ``frame`` is its last (``None``: it sent none), ``code`` its
    exit, ``failed_log`` the compile jail's log of the request that failed."""
    if frame is None:
        how = (
            f"exited with code {code}"
            if code is not None and 0 <= code < 128
            else f"died (status {code})"
        )
        return BuildOutcome(
            False,
            status=Status.RUNTIME_ERROR,
            reason="signal" if code and code > 128 else "no_result",
            message=f"the builder importing the candidate {how} without a result",
            logs={"build": trim_tail(read_log(log_path))},
        )
    if frame.get("kind") == "ok":
        return BuildOutcome(True)
    if frame.get("cuda_unavailable") and info.kind == "cuda":
        return BuildOutcome(True, deferred=True)
    status = frame.get("status")
    if status == "build_error":
        # the compiler's log as the compile jail left it, not as the candidate retold it
        log = trim_compiler_log(failed_log or str(frame.get("message", "")))
        return BuildOutcome(
            False,
            status=Status.BUILD_ERROR,
            reason="compile",
            message=first_line(log),
            logs={"build": log},
        )
    reason = str(frame.get("reason") or "import")
    return BuildOutcome(
        False,
        status=Status.LOAD_ERROR,
        reason=reason if reason == "syntax" else "import",
        message=str(frame.get("message", ""))[:2000],
        logs={
            "traceback": trim_tail(str(frame.get("traceback", ""))),
            "build": trim_tail(read_log(log_path)),
        },
    )


def tampered(why: str) -> BuildOutcome:
    return BuildOutcome(
        False,
        status=Status.REJECTED,
        reason="tamper",
        message=f"the candidate's build directory was rigged where the evaluator writes ({why})",
    )


def bad_request(why: str) -> BuildOutcome:
    return BuildOutcome(
        False,
        status=Status.BUILD_ERROR,
        reason="request",
        message=f"the extension build request was rejected: {why}",
    )


def read_log(path: Path, head: int = 16 << 10, tail: int = 48 << 10) -> str:
    """The head and tail of a log file, however large it grew."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if size <= head + tail:
                return fh.read().decode("utf-8", "replace")
            first = fh.read(head)
            fh.seek(size - tail)
            last = fh.read()
    except OSError:
        return ""
    return (
        first.decode("utf-8", "replace")
        + f"\n[... {size - head - tail} bytes skipped ...]\n"
        + last.decode("utf-8", "replace")
    )


def first_line(log: str) -> str:
    for line in log.splitlines():
        lowered = line.lower()
        if "error" in lowered and "error building extension" not in lowered:
            return "build failed: " + line.strip()[:500]
    return "build failed: " + (log.splitlines()[0][:500] if log else "no compiler output")

"""compute-sanitizer's output, cut to what a debugger needs: the first error (pure; standard library only).

memcheck prints each error as a block of ``=========`` lines: a headline (``Invalid __global__
write of size 4 bytes``), then indented lines naming the kernel, the thread and block, the address
and how far it is from the nearest allocation, then a host backtrace. The first block is the one
that matters: later errors are usually its consequences.
"""

from __future__ import annotations

import re

PREFIX = "========="
MAX_LINES = 14
MAX_HOST_FRAMES = 3
MAX_LINE = 300
# What a failing CUDA call says when a kernel touched memory it must not (the CUDA runtime's own
# error strings, as torch reports them).
MEMORY_ERRORS = re.compile(
    r"illegal memory access|misaligned address|unspecified launch failure|illegal address|"
    r"out of bounds|invalid device pointer|cudaErrorIllegalAddress|cudaErrorMisalignedAddress|"
    r"cudaErrorLaunchFailure",
    re.IGNORECASE,
)


def is_memory_error(text: str) -> bool:
    """A failure that memcheck can explain: an illegal or misaligned access by a kernel."""
    return bool(MEMORY_ERRORS.search(text))


def first_report(text: str) -> str | None:
    """The first error block of a memcheck log (backtrace cut short), plus its error summary; None
    when the log holds no error."""
    lines = [line.rstrip() for line in text.splitlines() if line.startswith(PREFIX)]
    body = [line[len(PREFIX) :] for line in lines]
    start = None
    for i, line in enumerate(body):
        stripped = line.strip()
        if not stripped or stripped.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY")):
            continue
        if not line.startswith(" " * 2):  # a headline, not a detail line
            start = i
            break
    if start is None:
        return None
    block = [PREFIX + body[start]]
    frames = 0
    for line in body[start + 1 :]:
        if not line.strip() or not line.startswith(" " * 2):
            break  # a blank separator or the next headline
        if "Host Frame" in line:
            frames += 1
            if frames > MAX_HOST_FRAMES:
                continue
        block.append(PREFIX + line[:MAX_LINE])
        if len(block) >= MAX_LINES:
            block.append(PREFIX + "     ...")
            break
    summary = next((PREFIX + b for b in body if b.strip().startswith("ERROR SUMMARY")), None)
    return "\n".join(block + ([summary] if summary else []))

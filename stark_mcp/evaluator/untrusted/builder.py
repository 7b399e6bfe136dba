"""The sandboxed builder: ``python -P -m stark_mcp.evaluator.untrusted.builder FRAMES_FD CANDIDATE``.

Importing the candidate runs its ``load_inline`` calls, which compile into ``TORCH_EXTENSIONS_DIR``
(the only writable directory besides scratch). No GPU is visible here. The parent copies the build
directory into its cache after this process and everything it started are gone.
"""

from __future__ import annotations

import os
import sys

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.sandbox.launch import die_with_parent
from stark_mcp.evaluator.untrusted import loading


def main(frames_fd: int, path: str) -> None:
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    die_with_parent()
    os.makedirs(os.environ.get("HOME", "/tmp"), exist_ok=True)
    try:
        loading.import_candidate(path)
    except loading.Verdict as v:
        frame = v.frame()
        frame["cuda_unavailable"] = loading.looks_like_cuda_unavailable(v.message + v.tb)
        sys.stderr.write(v.tb)
        frames.send(frames_fd, frame)
        return
    frames.send(frames_fd, {"kind": "ok"})


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]), sys.argv[2])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

"""The sandboxed builder: ``python -P -m stark_mcp.evaluator.untrusted.builder FRAMES_FD``.

It imports torch, then waits for its first frame, the path of its candidate (the parent may start it
ahead of the candidate). Importing the candidate runs its ``load_inline`` calls. Each one becomes an
extension request (``buildkit``), sent to the parent as a ``build_request`` frame; the parent
validates it, answers from its signed extension cache or compiles it in a compile jail of its own,
copies the library into this builder's build directory and answers ``built`` (the directory, as this
process sees it) or ``build_failed`` (the compiler's log). The library is then imported as
``load_inline`` would, so the candidate's import goes on as it would under torch. No GPU is visible
here; nothing this process says is believed: the parent checks every frame, and what it caches comes
from its own jails.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from stark_mcp.evaluator.common import frames
from stark_mcp.evaluator.sandbox.launch import die_with_parent
from stark_mcp.evaluator.untrusted import loading


def remote_resolver(frames_fd: int) -> Any:
    from stark_mcp.evaluator.buildkit import intercept

    def resolve(request: Any) -> str:
        frames.send(frames_fd, {"kind": "build_request", "request": json.loads(request.to_json())})
        answer = frames.recv(frames_fd)
        if answer is None or answer.get("kind") != "built":
            log = "the evaluator ended the build" if answer is None else str(answer.get("log", ""))
            raise intercept.BuildFailed(request.name, log)
        return str(answer["path"])

    return resolve


def main(frames_fd: int) -> None:
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    die_with_parent()
    os.makedirs(os.environ.get("HOME", "/tmp"), exist_ok=True)
    import torch  # noqa: F401  (before the candidate is known: a builder may be started ahead of it)

    from stark_mcp.evaluator.buildkit import intercept

    intercept.install(remote_resolver(frames_fd))
    job = frames.recv(frames_fd)
    if job is None or job.get("kind") != "candidate" or not isinstance(job.get("path"), str):
        return
    try:
        loading.import_candidate(job["path"])
    except loading.Verdict as v:
        frame = v.frame()
        frame["cuda_unavailable"] = loading.looks_like_cuda_unavailable(v.message + v.tb)
        sys.stderr.write(v.tb)
        frames.send(frames_fd, frame)
        return
    frames.send(frames_fd, {"kind": "ok"})


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

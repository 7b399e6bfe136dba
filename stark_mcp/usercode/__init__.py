"""The user's own module as a problem: targets, input specs, captures, the problem file, drop-ins.

Pure parts (``target``, ``specs``, ``request``, ``render``) never import torch or the user's
code. ``introspect`` learns about a target by importing it in a short-lived subprocess
(``probe_child``). ``capture`` and ``swap`` run inside the user's own program and are exposed
as ``stark_mcp.capture`` and ``stark_mcp.swap``.
"""

from stark_mcp.usercode.errors import CaptureError, SpecError, SwapError, TargetError, UserCodeError

__all__ = ["CaptureError", "SpecError", "SwapError", "TargetError", "UserCodeError"]

"""The user's own module as a problem: targets, input specs, captures, the problem file, drop-ins.

Pure parts (``target``, ``specs``, ``request``, ``render``) never import torch or the user's
code. ``introspect`` learns about a target by importing it in a short-lived subprocess
(``probe_child``). ``capture`` and ``swap`` run inside the user's own program and are exposed
as ``stark_mcp.capture`` and ``stark_mcp.swap``.
"""

from stark_mcp.usercode.errors import CaptureError, SpecError, SwapError, TargetError, UserCodeError

# Set to "off" where a left-over @stark_mcp.capture must write nothing (problem files, the probe).
# Read by capture in the user's own program, so it is not one of stark-mcp's settings (config.py).
CAPTURE_SWITCH = "STARK_CAPTURE"

__all__ = ["CAPTURE_SWITCH", "CaptureError", "SpecError", "SwapError", "TargetError", "UserCodeError"]

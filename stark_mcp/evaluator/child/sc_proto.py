"""The child's side of the result channel: length-prefixed torch.save records on a private fd.

Stdlib and torch only: this runs inside candidate, reference and baseline processes.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from typing import Any

import torch

HEADER = struct.Struct(">Q")


class Channel:
    """Writes records to the fd the parent passed; stdout is only ever a log."""

    def __init__(self, fd: int, write: Any = os.write, save: Any = torch.save) -> None:
        self.fd = fd
        # Bound now, before candidate code runs, so a later monkeypatch cannot reroute them.
        self._write = write
        self._save = save

    def send(self, record: dict[str, Any]) -> None:
        buf = io.BytesIO()
        self._save(record, buf)
        data = buf.getvalue()
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            written = self._write(self.fd, view)
            view = view[written:]


def read_json_line(stream: Any = None) -> dict[str, Any] | None:
    """One command from the parent on stdin; None once the parent closed it."""
    line = (stream or sys.stdin).readline()
    if not line:
        return None
    return json.loads(line)


def encode(obj: Any) -> dict[str, Any]:
    """A picklable description of a forward's output that keeps exact types visible to the parent."""
    if type(obj) is torch.Tensor:
        t = obj.detach()
        return {
            "k": "tensor",
            "device": str(t.device),
            "t": t.to("cpu").clone(memory_format=torch.contiguous_format),
        }
    if isinstance(obj, torch.Tensor):
        # Never call methods on a subclass: its __torch_function__ is candidate code.
        return {"k": "subclass", "type": type(obj).__name__}
    if isinstance(obj, (tuple, list)):
        return {"k": "seq", "type": type(obj).__name__, "items": [encode(x) for x in obj]}
    if obj is None or isinstance(obj, (bool, int, float)):
        return {"k": "scalar", "v": obj}
    return {"k": "other", "type": type(obj).__name__}

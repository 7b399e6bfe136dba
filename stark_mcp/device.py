"""The device a run or an evaluation asks for: ``auto``, ``cpu`` or ``cuda``; the one list of them.

Every door parses what it was given with ``Device.parse`` (the CLI's ``--device``, ``STARK_DEVICE``,
an MCP tool's ``device``, the warm evaluator's wire, the bench plan, the evaluator's public methods),
so there is one list of names, one check and one message. ``Device`` is a ``str`` enum: a value
compares, hashes, formats and serialises as its name, so records, cache keys and the trusted worker's
frames (which see plain strings) are what they were. ``resolve_device`` turns ``auto`` into the kind
evaluations run on here (cpu or cuda).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from stark_mcp.errors import StarkError


class InvalidDevice(StarkError, ValueError):
    """A device name that is not auto, cpu or cuda; the message says which are."""


class Device(StrEnum):
    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"

    @classmethod
    def parse(cls, value: object, what: str = "device", error: type[Exception] = InvalidDevice) -> Device:
        """``value`` as a Device, else ``error`` (the caller's layer's exception) saying what
        ``what`` (``--device``, ``device``) may be."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        raise error(f"{what} must be {DEVICE_NAMES}, not {value!r}")


DEVICE_NAMES = ", ".join(d.value for d in list(Device)[:-1]) + f" or {list(Device)[-1].value}"


def _validated(value: Any) -> Device:
    try:
        return Device.parse(value)
    except InvalidDevice as exc:  # pydantic's own message for the enum would be a second one
        raise PydanticCustomError("device", str(exc)) from None


# A pydantic field of a device (settings, the warm wire, an MCP tool's argument): checked by ``parse``.
DeviceField = Annotated[Device, BeforeValidator(_validated)]

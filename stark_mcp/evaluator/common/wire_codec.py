"""How the records of ``common/wire.py`` become frames and back: each field written as it is (a nested
record as an object, a field left at None not at all) and, when read, checked against its declared
type (str, int, float, bool, None, list[...], dict[str, ...], a nested record, a TypedDict, Any for
what passes through unchecked), so a frame that is not the record is a ``WireError`` saying which
field and why. A TypedDict is a JSON object that stays a dict: its keys and their values' types are
checked, and it is kept exactly as it came (an int where a float is declared stays an int), so it
reads on the other side as it was written. Standard library only.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Union


class WireError(ValueError):
    """A frame that is not a record of the worker protocol; the message says why."""


class UnknownFrame(WireError):
    """A command or answer of a name the protocol does not have."""


class MalformedFrame(WireError):
    """A known command or answer with a field missing, unexpected or of the wrong type."""


# -- encoding and decoding -----------------------------------------------------------------------------


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def _check(value: Any, kind: Any, where: str) -> Any:
    """``value`` as ``kind`` (a nested record decoded, an int taken for a float), or MalformedFrame."""
    if kind is Any:
        return value
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _check(value, option, where)
            except MalformedFrame as exc:
                errors.append(str(exc))
        raise MalformedFrame(errors[0] if len(errors) == 1 else f"{where}: expected {_type_name(kind)}")
    if origin is list:
        if not isinstance(value, list):
            raise MalformedFrame(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(kind)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise MalformedFrame(f"{where}: expected an object, got {type(value).__name__}")
        keys, item = typing.get_args(kind)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise MalformedFrame(f"{where}: a key is not a string")
            out[k] = _check(v, item, f"{where}.{k}")
        return out
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            raise MalformedFrame(f"{where}: expected an object, got {type(value).__name__}")
        _check_typed_dict(kind, value, where)
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise MalformedFrame(f"{where}: expected an object, got {type(value).__name__}")
        return _decode_fields(kind, value, where)
    if kind is bool:
        if not isinstance(value, bool):
            raise MalformedFrame(f"{where}: expected a bool, got {type(value).__name__}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MalformedFrame(f"{where}: expected an int, got {type(value).__name__}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MalformedFrame(f"{where}: expected a number, got {type(value).__name__}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise MalformedFrame(f"{where}: expected a string, got {type(value).__name__}")
        return value
    raise TypeError(f"the wire has no rule for {kind!r}")  # a record declared with a type we do not send


def _check_typed_dict(kind: Any, value: dict[Any, Any], where: str) -> None:
    hints, required = _typed_dict_keys(kind)
    for k in value:
        if k not in hints:
            raise MalformedFrame(f"{where}: unexpected field {k!r}")
    for k, hint in hints.items():
        if k in value:
            _check(value[k], hint, f"{where}.{k}")  # the checked copy is dropped: the dict stays as sent
        elif k in required:
            raise MalformedFrame(f"{where}: missing field {k!r}")


# free-form: key -> its declared type, any type
def _typed_dict_keys(kind: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's value types and required keys. Read from its hints rather than
    ``__required_keys__``, which under ``from __future__ import annotations`` cannot see NotRequired."""
    cached = kind.__dict__.get("_wire_keys")
    if cached is None:
        hints = typing.get_type_hints(kind, include_extras=True)
        optional = {k for k, h in hints.items() if typing.get_origin(h) is typing.NotRequired}
        plain = {k: typing.get_args(h)[0] if k in optional else h for k, h in hints.items()}
        cached = (plain, frozenset(hints) - optional)
        kind._wire_keys = cached
    return cached


def _hints(cls: type) -> dict[str, Any]:  # free-form: field name -> its declared type, any type
    cached = cls.__dict__.get("_wire_hints")
    if cached is None:
        cached = typing.get_type_hints(cls)
        cls._wire_hints = cached  # type: ignore[attr-defined]
    return cached


def _admits_none(kind: Any) -> bool:
    return typing.get_origin(kind) in (Union, types.UnionType) and type(None) in typing.get_args(kind)


# free-form: ``frame`` is raw JSON, read here into ``cls``
def _decode_fields(cls: type, frame: dict[str, Any], where: str, skip: str = "") -> Any:
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(k for k in frame if k not in names and k != skip)
    if extra:
        raise MalformedFrame(f"{where}: unexpected field {extra[0]!r}")
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in frame:
            if _admits_none(hints[f.name]):
                values[f.name] = None  # a field left at None is not written
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MalformedFrame(f"{where}: missing field {f.name!r}")
            continue
        values[f.name] = _check(frame[f.name], hints[f.name], f"{where}.{f.name}")
    return cls(**values)


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields_frame(value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _fields_frame(record: Any) -> dict[str, Any]:  # free-form: any record's fields, as JSON
    out = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is not None:
            out[f.name] = _encode(value)
    return out


class Record:
    """What every command and answer has: its name on the wire, and its encoding."""

    TAG: ClassVar[str] = ""  # "cmd" for commands, "kind" for answers
    NAME: ClassVar[str] = ""

    def to_frame(self) -> dict[str, Any]:  # free-form: the JSON frame of whichever record this is
        return {self.TAG: self.NAME, **_fields_frame(self)}

    @classmethod
    def from_frame(cls, frame: dict[str, Any]) -> Any:  # free-form: raw JSON, decoded here
        if not isinstance(frame, dict):
            raise MalformedFrame(f"a frame must be an object, got {type(frame).__name__}")
        if frame.get(cls.TAG) != cls.NAME:
            raise MalformedFrame(f"{cls.NAME}: the frame's {cls.TAG} is {frame.get(cls.TAG)!r}")
        return _decode_fields(cls, frame, cls.NAME, skip=cls.TAG)

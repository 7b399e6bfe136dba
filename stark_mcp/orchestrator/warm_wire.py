"""What a client and a warm evaluator say to each other: typed records, one JSON object a line.

A client sends one request, and the daemon answers with lines until its last (``Done``, ``Failed``,
``Status``, ``Stopping``, ``Settled``). A request that does not parse as one of these records, or is
longer than ``MAX_LINE``, is answered ``Failed`` (``kind="request"``) and the connection closed:
never a crash.
The Evaluation and the profile cross as their own JSON text, so the client prints what the daemon's
evaluator made, byte for byte.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from stark_mcp.device import DeviceField

MAX_LINE = 64 * 1024 * 1024  # a candidate's source and a problem's, with room


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def line(self) -> bytes:
        return self.model_dump_json().encode() + b"\n"


# -- requests -----------------------------------------------------------------------------------------
class EvaluateRequest(Message):
    op: Literal["evaluate"] = "evaluate"
    key: str = Field(min_length=1, max_length=64)
    problem: dict[str, Any]  # a Problem's fields, validated by the daemon as a Problem
    source: str
    device: DeviceField
    eval_settings: dict[str, Any]  # EvalSettings' fields, validated by the daemon
    use_cache: bool = True
    wait_for_baselines: bool = True
    profile: bool = False


class StatusRequest(Message):
    op: Literal["status"] = "status"


class StopRequest(Message):
    op: Literal["stop"] = "stop"


class SettleRequest(Message):
    """Wait for the background work the evaluations started (a shared precompiled header)."""

    op: Literal["settle"] = "settle"


Request = Annotated[EvaluateRequest | StatusRequest | StopRequest | SettleRequest, Field(discriminator="op")]
REQUEST = TypeAdapter(Request)


# -- replies ------------------------------------------------------------------------------------------
class Progress(Message):
    op: Literal["progress"] = "progress"
    done: float
    total: float | None = None
    message: str


class Verdict(Message):
    op: Literal["verdict"] = "verdict"
    evaluation: str  # Evaluation JSON


class Profile(Message):
    op: Literal["profile"] = "profile"
    report: str  # ProfileReport JSON


class Done(Message):
    op: Literal["done"] = "done"
    served_by: int


class Failed(Message):
    """``kind``: ``user`` (the evaluation's own error: the CLI prints it and exits 2, as in-process),
    ``request`` (the request was refused), ``internal`` (the daemon failed: the client evaluates
    in-process)."""

    op: Literal["failed"] = "failed"
    kind: Literal["user", "request", "internal"]
    message: str


class Status(Message):
    op: Literal["status"] = "status"
    pid: int
    key: str
    started: float  # time.time()
    idle_timeout_s: float
    active: int
    served: int
    log: str


class Stopping(Message):
    op: Literal["stopping"] = "stopping"
    pid: int


class Settled(Message):
    op: Literal["settled"] = "settled"
    jobs: int  # background jobs that were still running when asked


Reply = Annotated[
    Progress | Verdict | Profile | Done | Failed | Status | Stopping | Settled, Field(discriminator="op")
]
REPLY = TypeAdapter(Reply)


class BadMessage(ValueError):
    """A line that is none of the records above; the message says what is wrong (first error)."""


def parse(adapter: TypeAdapter[Any], line: bytes) -> Any:
    try:
        return adapter.validate_json(line)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise BadMessage(f"{where}: {error['msg']}" if where else error["msg"]) from None

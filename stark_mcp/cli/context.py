"""What every command shares: the settings (read once per process), errors, the terminal test."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import typer

from stark_mcp.device import DEVICE_NAMES, Device, InvalidDevice
from stark_mcp.errors import StarkError

if TYPE_CHECKING:
    from stark_mcp.config import Settings

DEVICE_HELP = f"{DEVICE_NAMES} (default: STARK_DEVICE, else auto)"
GPUS_HELP = "GPUs to evaluate on: all or indices like 0,1, all of one model (default: STARK_GPUS, else all)"
EXECUTOR_HELP = "local (this host's GPUs) or ray (a Ray cluster) (default: STARK_EXECUTOR, else local)"
RAY_ADDRESS_HELP = (
    "with --executor ray: auto or ray://HOST:PORT (default: STARK_RAY_ADDRESS, else a new local one)"
)


def settings_of(ctx: typer.Context) -> Settings:
    """The process's settings: read from the environment on first use, then kept on the root context.

    Reading them applies ``STARK_LOG_LEVEL`` to the root logger.
    """
    from stark_mcp.config import Settings

    root = ctx.find_root()
    if not isinstance(root.obj, Settings):
        with user_errors():
            root.obj = Settings.from_env()
        logging.getLogger().setLevel(root.obj.log_level)
    return root.obj


def scaled(settings: Settings, gpus: str | None, executor: str | None, ray_address: str | None) -> Settings:
    """The settings with ``--gpus``, ``--executor`` and ``--ray-address`` laid over them."""
    with user_errors():
        return settings.with_options(gpus=gpus, executor=executor, ray_address=ray_address)


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@contextmanager
def user_errors() -> Iterator[None]:
    """A ``StarkError`` (or a pydantic validation error of an option) becomes ``error: ...``, exit 2."""
    from pydantic import ValidationError

    try:
        yield
    except StarkError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise fail(f"{where}: {error['msg']}" if where else error["msg"]) from None


def check_device(value: str | None) -> Device | None:
    """The ``--device`` option as a ``Device`` (None: not given)."""
    if value is None:
        return None
    try:
        return Device.parse(value, what="--device")
    except InvalidDevice as exc:
        raise fail(str(exc)) from None


def is_terminal(stream: IO[Any]) -> bool:
    """Whether ``stream`` is a terminal: live displays there, plain lines to files and pipes."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

"""One child process: own session, scrubbed env, private cwd, a result pipe, group kill on exit.

Records arrive as length-prefixed ``torch.save`` payloads on a dedicated pipe and are loaded with
``weights_only=True``; stdout and stderr go to a log file that is shown, never parsed.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.logs import trim_tail
from stark_mcp.evaluator.sandbox import scrub_env

CHILD_MAIN = Path(__file__).resolve().parent / "child" / "main.py"
_HEADER = struct.Struct(">Q")
MAX_RECORD_BYTES = 16 << 30


class ChannelError(Exception):
    """The result pipe carried bytes that are not a valid record."""


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def decode_record(payload: bytes) -> dict[str, Any]:
    import torch

    try:
        record = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except Exception as exc:
        raise ChannelError(f"unreadable record: {type(exc).__name__}: {exc}") from None
    if not isinstance(record, dict) or "kind" not in record:
        raise ChannelError("a record must be a dict with a 'kind'")
    return record


class ChildProcess:
    """``async with ChildProcess(mode, spec, ...) as child``: started on enter, group-killed on exit."""

    def __init__(self, mode: str, spec: dict[str, Any], env_overrides: dict[str, str] | None = None,
                 label: str | None = None) -> None:
        self.mode, self.spec, self.label = mode, spec, label or mode
        self.env_overrides = env_overrides or {}
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.workdir = Path()
        self.log_path = Path()
        self.started = 0.0

    async def __aenter__(self) -> ChildProcess:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"stark-{self.mode}-")
        root = Path(self._tmp.name)
        self.workdir = root / "cwd"
        self.workdir.mkdir()
        self.log_path = root / "output.log"
        for key, value in list(self.spec.items()):
            if key.endswith("_source"):  # sources become files inside the private dir
                path = self.workdir / f"{key.removesuffix('_source')}.py"
                path.write_text(value, encoding="utf-8")
                self.spec[key.removesuffix("_source") + "_path"] = str(path)
                del self.spec[key]
        rfd, wfd = os.pipe()
        log = open(self.log_path, "wb")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-X", "faulthandler", str(CHILD_MAIN), self.mode, str(wfd),
                stdin=asyncio.subprocess.PIPE, stdout=log, stderr=log, cwd=self.workdir,
                env=scrub_env(os.environ, self.env_overrides), start_new_session=True,
                close_fds=True, pass_fds=(wfd,),
            )
        except OSError as exc:
            os.close(rfd)
            raise EvaluatorError(f"cannot start the {self.label} process: {exc}") from None
        finally:
            os.close(wfd)
            log.close()
        self.started = time.monotonic()
        loop = asyncio.get_running_loop()
        self._reader = asyncio.StreamReader(limit=1 << 20)
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self._reader), os.fdopen(rfd, "rb", buffering=0))
        await self.send(self.spec)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kill()
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), 10)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        if self._transport is not None:
            self._transport.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def kill(self) -> None:
        """SIGKILL the whole session (the child and anything it spawned)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    async def send(self, command: dict[str, Any]) -> bool:
        """Write one JSON line to the child's stdin; False if it is gone."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(command) + "\n").encode())
            await self.proc.stdin.drain()
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    async def next_record(self, timeout: float | None) -> dict[str, Any] | None:
        """The next record, or None at end of stream. Raises TimeoutError and ChannelError."""
        assert self._reader is not None
        return await asyncio.wait_for(self._read_one(), timeout)

    async def _read_one(self) -> dict[str, Any] | None:
        assert self._reader is not None
        try:
            header = await self._reader.readexactly(_HEADER.size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise ChannelError("the result pipe ended inside a record header") from None
            return None
        (size,) = _HEADER.unpack(header)
        if size > MAX_RECORD_BYTES:
            raise ChannelError(f"record of {size} bytes exceeds the limit")
        try:
            payload = await self._reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise ChannelError("the result pipe ended inside a record") from None
        return decode_record(payload)

    async def exit_status(self, timeout: float = 10.0) -> tuple[int | None, str | None]:
        """(returncode, signal name) once the child has exited (killed if it lingers)."""
        assert self.proc is not None
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            self.kill()
            await self.proc.wait()
        return self.proc.returncode, signal_name(self.proc.returncode)

    def log(self, limit: int = 4000) -> str:
        try:
            text = self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return ""
        return trim_tail(text, limit)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

"""`stark-mcp serve --http`: a real server process, a bearer token, the exposure warning."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from stark_mcp.server.transports import exposure_warning, is_loopback

from .support import ok
from .test_stdio import server_env

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the HTTP server never started listening")


@pytest.fixture
def http_server(tmp_path: Path):
    port = free_port()
    env = {**server_env(tmp_path), "STARK_MCP_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "stark_mcp", "serve", "--http", "--host", "0.0.0.0", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path, text=True,
    )
    try:
        wait_listening(port, process)
        yield port, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
async def test_bearer_token_is_required_and_sufficient(
    http_server: tuple[int, subprocess.Popen[str]],
) -> None:
    port, process = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    async with httpx2.AsyncClient() as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        wrong = await http.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            assert len((await client.list_tools()).tools) == 12
            assert ok(await client.call_tool("list_runs")) == {"runs": []}
    process.terminate()
    _, stderr = process.communicate(timeout=20)
    assert "warning: serving on 0.0.0.0" in stderr and "Authorization: Bearer" in stderr


def test_exposure_warning() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    assert exposure_warning("127.0.0.1", None) is None
    assert "--token" in (exposure_warning("0.0.0.0", None) or "")
    assert "Bearer" in (exposure_warning("192.168.1.5", "t") or "")


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_bad_baselines_option_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stark_mcp", "serve", "--baselines", "eager,turbo"],
        capture_output=True, text=True, env=server_env(tmp_path), timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "turbo" in done.stderr and done.stdout == ""


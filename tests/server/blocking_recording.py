"""The wire responses of a short blocking session, recorded so a later server can be compared.

A client without the Tasks extension must keep getting exactly what it got before tasks existed.
``record(client)`` drives create_run, select_node, build_context and two add_child calls (one
failing, one passing) and returns each raw result object as the client received it; ``masked``
replaces what changes from run to run (run ids, measured times and ratios, counts of timed
calls), so the comparison is byte for byte on everything else.

Regenerate the recording from a checkout of the code it should match:
``PYTHONPATH=<checkout> python tests/server/blocking_recording.py auto \
tests/server/recordings/blocking-auto.json`` (and ``legacy``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.types import CallToolRequest, CallToolRequestParams
from pydantic import TypeAdapter

HERE = Path(__file__).parent
PROBLEM = HERE / "fixtures" / "problem_relu_scale.py"
RECORDINGS = HERE / "recordings"  # blocking-<mode>.json, one per client mode
RAW = TypeAdapter(dict[str, Any])


async def raw_call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    request = CallToolRequest(params=CallToolRequestParams(name=name, arguments=arguments))
    return await client.session.send_request(request, RAW)


async def record(client: Client) -> list[dict[str, Any]]:
    fixtures = HERE / "fixtures"
    created = await raw_call(client, "create_run", {"problem": str(PROBLEM), "budget": 3, "seed": 5})
    run_id = created["structuredContent"]["run_id"]
    turns = [{"tool": "create_run", "result": created}]
    for name, arguments in (
        ("select_node", {"run_id": run_id}),
        ("build_context", {"run_id": run_id, "node_id": "n0", "role": "plan"}),
        ("add_child", {"run_id": run_id, "parent_id": "n0",
                       "source": (fixtures / "cand_no_model_new.py").read_text()}),
        ("add_child", {"run_id": run_id, "parent_id": "n0",
                       "source": (fixtures / "cand_clamp.py").read_text()}),
    ):
        turns.append({"tool": name, "result": await raw_call(client, name, arguments)})
    return turns


_VOLATILE = [
    (re.compile(r"r-[a-z0-9]{6}"), "r-RUNID"),
    (re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?"), "<float>"),  # times, speedups, ratios
    (re.compile(r"(calls?\\?\"?:? ?)\d+"), r"\1<int>"),
    (re.compile(r"\"(samples|calls|timed_calls|checked_calls|launches|runs)\": \d+"), r'"\1": <int>'),
    (re.compile(r"/tmp/[^\"\s\\]+"), "<tmp>"),
    (re.compile(r"\d+ samples"), "<int> samples"),
    # The speed-of-light line: the fraction, headroom and peaks measured on this machine, and when.
    (re.compile(r"(?:<float>|\d+)% of the (memory|compute) roofline"), r"<n>% of the \1 roofline"),
    (re.compile(r"(?:<float>|\d+)x headroom"), "<n>x headroom"),
    # A rate prints with decimals below 100 and without above: "69.5 GFLOP/s", "109 GFLOP/s".
    (re.compile(r"(?:<float>|\d+) [GMT]?(FLOP|B)/s"), r"<rate> \1/s"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<date>"),
]


def masked(turns: list[dict[str, Any]]) -> str:
    text = json.dumps(turns, indent=1, sort_keys=False)
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


async def _main(mode: str, out: Path, home: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from server.support import make_server  # noqa: PLC0415 - the checkout's own helpers

    async with Client(make_server(home), mode=mode) as client:
        turns = await record(client)
    out.write_text(masked(turns) + "\n")


if __name__ == "__main__":
    import tempfile

    import anyio

    with tempfile.TemporaryDirectory() as home:
        anyio.run(_main, sys.argv[1], Path(sys.argv[2]), Path(home))

"""Concurrent cache writers in one process must never trip over each other's temp files."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from stark_mcp.evaluator.host.atomic_files import write_json_atomic


def test_concurrent_atomic_writes_to_one_path_all_succeed(tmp_path: Path) -> None:
    target = tmp_path / "probe.json"
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in range(50):
                write_json_atomic(target, {"writer": n, "i": i})
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_text())["i"] == 49
    assert [p.name for p in tmp_path.iterdir()] == ["probe.json"]

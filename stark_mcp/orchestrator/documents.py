"""A run read back whole: its record, every node and every LLM exchange.

The read side for reports: the CLI and the MCP server reach a run's full history only through
``load_run_document``. A benchmark keeps each run's ``RunDocument`` in ``runs/RUN_ID.json.gz``,
so its folder can be reported on without the database it ran against.
"""

from __future__ import annotations

from pydantic import BaseModel

from stark_mcp.orchestrator.run_service import RunService
from stark_mcp.records import ExchangeRecord, Node, RunRecord


class RunDocument(BaseModel):
    run: RunRecord
    nodes: list[Node]
    exchanges: list[ExchangeRecord]


async def load_run_document(service: RunService, run_id: str) -> RunDocument:
    run = await service.get_run(run_id)
    return RunDocument(
        run=run,
        nodes=await service.store.nodes(run_id),
        exchanges=await service.store.exchanges(run_id),
    )

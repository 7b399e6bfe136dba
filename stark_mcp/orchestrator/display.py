"""The state a live progress display shows, folded from ``SearchEvent``s. Pure; the CLI draws it."""

from __future__ import annotations

from pydantic import BaseModel

from stark_mcp.orchestrator.events import SearchEvent, describe_event


class DisplayState(BaseModel):
    run_id: str = ""
    attempt: int = 0
    target: int = 0
    budget: int = 0
    best_node_id: str | None = None
    best_speedup: float | None = None
    last_verdict: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    activity: str = "starting"

    def apply(self, event: SearchEvent) -> DisplayState:
        update: dict[str, object] = {
            "run_id": event.run_id, "attempt": event.attempt, "target": event.target, "budget": event.budget,
            "best_node_id": event.best_node_id, "best_speedup": event.best_speedup,
            "tokens": event.tokens, "cost_usd": event.cost_usd, "activity": describe_event(event),
        }
        if event.kind == "recorded" and event.verdict:
            speed = f" {event.speedup:.2f}x" if event.speedup is not None else ""
            update["last_verdict"] = f"{event.node_id} {event.verdict}{speed}"
        elif event.kind == "failed":
            update["last_verdict"] = f"no attempt from {event.node_id} (agent failed)"
        return self.model_copy(update=update)

    def status_line(self) -> str:
        best = "none yet"
        if self.best_speedup is not None:
            best = f"{self.best_speedup:.2f}x ({self.best_node_id})"
        last = self.last_verdict or "-"
        return (
            f"attempt {self.attempt}/{self.target} | best vs eager {best} | last {last} | "
            f"{self.tokens:,} tokens ${self.cost_usd:.4f}"
        )

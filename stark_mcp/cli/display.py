"""What a long command shows on stderr while it works, and the summary it prints at the end.

In a terminal: a live status (rich) redrawn in place. Anywhere else (a file, a pipe, CI): plain
lines, one per event, each written whole, so a log reads the same as the screen did.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from stark_mcp.cli.context import is_terminal


class PhaseDisplay:
    """Phase messages of one long call (``stark-mcp eval``, the start of a run)."""

    def __init__(self, stream: IO[str] | None = None, prefix: str = "") -> None:
        self.stream = stream or sys.stderr
        self.live = is_terminal(self.stream)
        self.prefix = prefix
        self._last = ""
        self._live: Any = None
        self._console: Any = None

    @contextmanager
    def showing(self) -> Iterator[None]:
        """Draw the live status while the block runs (in a terminal; nothing to set up otherwise)."""
        if not self.live:
            yield
            return
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._console = Console(file=self.stream, log_path=False)
        with Live(Text(self.prefix + "starting"), console=self._console, refresh_per_second=4,
                  transient=True) as self._live:
            yield
        self._live = None

    async def on_phase(self, done: float, total: float | None, message: str) -> None:
        """A ``Progress`` callback: the message replaces the status line, or is printed once as a line."""
        step = f" ({done:g}/{total:g})" if total else ""
        self.show(f"{self.prefix}{message}{step}")

    def show(self, text: str) -> None:
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(text))
        elif text != self._last:
            self.line(text)
        self._last = text

    def line(self, text: str) -> None:
        """A line that stays (logged above the live status in a terminal)."""
        if self._live is not None:
            self._console.log(text)
        else:
            print(text, file=self.stream, flush=True)


def print_summary(title: str, rows: Sequence[tuple[str, str]], stream: IO[str] | None = None) -> None:
    """A two-column summary: a table in a terminal, ``key: value`` lines elsewhere."""
    out = stream or sys.stdout
    if not is_terminal(out):
        print("\n".join([title, *(f"{key}: {value}" for key, value in rows)]), file=out, flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, value)
    Console(file=out, width=120).print(table)

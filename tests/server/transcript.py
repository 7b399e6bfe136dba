"""A conversation driven through the MCP client, written down as the Markdown in docs/ide.md.

The test records each turn (the user's words, the host's words, every prompt and tool call with
its real arguments and an excerpt of its real result) and compares the Markdown with the block
between the markers in docs/ide.md. Values that change from run to run (run ids, timings,
speedups, temporary paths) are masked in the comparison only; the doc shows those of the run that
wrote it. ``STARK_WRITE_TRANSCRIPT=1`` rewrites the block.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

BEGIN = "<!-- transcript:begin (written by tests/server/test_own_module.py) -->"
END = "<!-- transcript:end -->"
PROJECT = "/home/me/proj"


class Transcript:
    def __init__(self, project: Path) -> None:
        self.project = str(project)
        self.parts: list[str] = []

    def user(self, text: str) -> None:
        self.parts.append(f"**User:** {text}")

    def host(self, text: str) -> None:
        self.parts.append(f"**Host:** {text}")

    def prompt(self, name: str, args: dict[str, Any], text: str) -> None:
        self.parts.append(f"Host → prompt `{name}` {self._json(args)}\n\n````text\n{text.rstrip()}\n````")

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        result: dict[str, Any],
        keep: tuple[str, ...],
        excerpts: dict[str, str] | None = None,
    ) -> None:
        """A tool call and an excerpt of its result: the ``keep`` fields, long texts (a prompt, a source)
        as their first lines or the lines after ``excerpts[field]``, in a block of their own."""
        shown: dict[str, Any] = {}
        texts: list[str] = []
        for key in keep:
            if key not in result:
                continue
            value = result[key]
            if isinstance(value, str) and value.count("\n") > 3:
                lines = value.splitlines()
                marker = (excerpts or {}).get(key)
                start = next((i for i, line in enumerate(lines) if marker and marker in line), 0)
                cut = lines[start : start + 14]
                shown[key] = f"<{len(lines)} lines" + (f", from '{marker}'" if start else "") + ", below>"
                texts.append("````text\n" + "\n".join(cut) + "\n…\n````")
            else:
                shown[key] = _rounded(value)
        self.parts.append(
            f"Host → `{tool}`\n\n```json\n{self._pretty(args)}\n```\n\n"
            f"Server ←\n\n```json\n{self._pretty(shown)}\n```" + "".join("\n\n" + t for t in texts)
        )

    def markdown(self) -> str:
        return ("\n\n".join(self.parts) + "\n").replace(self.project, PROJECT)

    def _json(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=False).replace(self.project, PROJECT)

    def _pretty(self, value: dict[str, Any]) -> str:
        """One key per line, each value compact."""
        lines = [f"  {json.dumps(k)}: {self._json(v)}" for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n}"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def masked(text: str) -> str:
    """The transcript with what differs between runs replaced by placeholders."""
    text = re.sub(r"\br-[a-z0-9]{6}\b", "<run>", text)
    # Whether a kernel near 1x lands just above or just below eager is timing too: its warning with it.
    slower = r'"warnings": \[("node \w+ is slower than eager PyTorch [^"]*")?\]'
    text = re.sub(slower, '"warnings": <speed>', text)
    text = re.sub(r"\b(on (cpu|cuda)) \([^)]*\)", r"\1 (<device>)", text)
    # A shape's speed-of-light bound compares its counts with the peaks calibrated on this machine:
    # near the ridge point, a loaded machine's calibration reads it as the other side (CI saw a run's
    # "sol_bound" come out "mixed" where the recorded conversation has "memory").
    text = re.sub(r'"(sol_)?bound": "(memory|compute|mixed)"', r'"\1bound": <bound>', text)
    text = re.sub(r"-?\d+\.\d+(e-?\d+)?", "<num>", text)
    text = re.sub(r"\d+ samples", "<n> samples", text)
    # the exported file's length: its comments say which input sets the kernel is faster on, which
    # timing decides (360 or 362 lines from one code)
    text = re.sub(r"<\d+ lines, below>", "<n lines, below>", text)
    text = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", text)
    return re.sub(r"\"seed\": \d+", '"seed": <n>', text)


def doc_block(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write_block(doc: Path, markdown: str) -> None:
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    doc.write_text(f"{head}{BEGIN}\n\n{markdown}\n{END}{tail}", encoding="utf-8")

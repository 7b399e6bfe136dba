"""``report.html``: one self-contained file (no network) that lists runs and draws their trees.

The page (``viewer.html``: its CSS and script inline) gets a small JSON index of the runs and,
per run, the viewer's data gzipped and base64-encoded; the browser decompresses a run only when
it is opened (``DecompressionStream``), so a page holding many runs, or a 300-node tree with
every prompt, still opens at once.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable
from importlib import resources
from typing import Any

from stark_mcp.orchestrator.documents import RunDocument
from stark_mcp.report.viewer_data import run_data, run_summary

_TEMPLATE = "viewer.html"


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no '</' can close it early."""
    return json.dumps(value, allow_nan=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def encode_run(data: dict[str, Any]) -> str:
    raw = json.dumps(data, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def decode_run(blob: str) -> dict[str, Any]:
    """The inverse of ``encode_run`` (for tests and tools that read a report back)."""
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def render_html(documents: Iterable[RunDocument], *, title: str, subtitle: str = "") -> str:
    """The page for ``documents``; each is encoded as it comes, so only compressed runs stay in memory."""
    template = resources.files("stark_mcp.report").joinpath(_TEMPLATE).read_text(encoding="utf-8")
    summaries: list[dict[str, Any]] = []
    blobs: list[str] = []
    for document in documents:
        summaries.append(run_summary(document))
        blobs.append(
            f'<script type="application/octet-stream" id="run-{document.run.id}">'
            f"{encode_run(run_data(document))}</script>"
        )
    index = {"title": title, "subtitle": subtitle, "runs": summaries}
    # Split the template first, so nothing inside the data can be taken for a marker.
    head, _, rest = template.partition("__STARK_INDEX__")
    middle, _, tail = rest.partition("__STARK_RUNS__")
    return (
        head.replace("__STARK_TITLE__", _escape(title))
        + _script_json(index)
        + middle
        + "\n".join(blobs)
        + tail
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

"""Turn model replies into plans and candidate sources, or into precise complaints.

Pure functions over text. Every rejection raises ``AgentError`` (or the tree's
``AnchorError`` for a malformed scaffold) with a message written for the model that
will be asked again, so it can fix exactly what was wrong.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from stark_mcp import python_ast
from stark_mcp.agents.errors import AgentError
from stark_mcp.tree.anchors import BEGIN_MARK, strip_anchor_lines, validate_plan

_PY_LANGS = ("python", "py", "python3", "")
# A fence opens a block only at the start of a line; the info string names the language.
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.MULTILINE)
_HEADER = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]*(advice|scaffold|plan)\b[^\n]*$", re.IGNORECASE | re.MULTILINE)
ADVICE_HEADER = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]*(advice|plan)\b[^\n]*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class CodeBlock:
    lang: str
    code: str
    start: int  # offset of the opening fence in the reply
    end: int  # offset just past the closing fence
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced blocks of a markdown reply, in order; an unclosed last block runs to the end."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence, lang = opening.group(1), opening.group(2).lower()
        body_start = opening.end() + 1
        closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        found = closing.search(text, body_start)
        if found is None:
            blocks.append(CodeBlock(lang, text[body_start:], opening.start(), len(text), closed=False))
            return blocks
        code = text[body_start : found.start()]
        blocks.append(CodeBlock(lang, code.rstrip("\n"), opening.start(), found.end(), closed=True))
        pos = found.end()


class PlanReply(BaseModel):
    """A validated plan: the advice, the anchored scaffold and the canonical text stored on the node."""

    advice: str
    scaffold: str
    spans: int
    text: str


def plan_text(advice: str, scaffold: str) -> str:
    """The canonical form of a plan, as stored on nodes and shown to the code agent."""
    return f"## Advice\n{advice.strip()}\n\n## Scaffold\n```python\n{scaffold.rstrip()}\n```\n"


def parse_plan_reply(reply_text: str, base_source: str) -> PlanReply:
    """Find the advice and the anchored scaffold in a plan reply and check the anchors.

    Raises ``AgentError`` when the reply's shape is wrong and ``AnchorError`` (from
    ``validate_plan``) when the scaffold's marks are.
    """
    advice, scaffold = _split(reply_text, strict=True)
    if not advice:
        raise AgentError(
            "the reply has no advice: write a short paragraph under '## Advice' saying which "
            "optimization to make and what to write inside each span"
        )
    anchored = validate_plan(scaffold, base_source)
    return PlanReply(advice=advice, scaffold=scaffold, spans=len(anchored.spans),
        text=plan_text(advice, scaffold))


def parse_advice_reply(reply_text: str) -> PlanReply:
    """An advice-only plan (the no-anchors ablation): the reply's prose, without code blocks."""
    blocks = code_blocks(reply_text)
    if blocks:
        raise AgentError(
            "the reply has a code block: give only the advice, as a short paragraph under '## Advice'; "
            "the coder writes the code"
        )
    advice = ADVICE_HEADER.sub("", reply_text).strip()
    if not advice:
        raise AgentError("the reply has no advice: write a short paragraph under '## Advice'")
    return PlanReply(advice=advice, scaffold="", spans=0, text=f"## Advice\n{advice}\n")


def split_plan_text(plan_text: str) -> tuple[str, str]:
    """(advice, scaffold) of a stored plan, of advice plus a fenced scaffold, or of a bare scaffold."""
    return _split(plan_text, strict=False)


def _split(text: str, *, strict: bool) -> tuple[str, str]:
    blocks = [b for b in code_blocks(text) if b.lang in _PY_LANGS]
    anchored = [b for b in blocks if BEGIN_MARK in b.code]
    chosen = anchored[-1] if anchored else (blocks[-1] if blocks else None)
    if chosen is None:
        if BEGIN_MARK in text and not strict:
            return "", text.strip("\n")
        raise AgentError(
            "the reply has no scaffold: put the full source with its "
            f"'{BEGIN_MARK}' marks in one fenced ```python block (after the advice; "
            "a '## Scaffold' heading before it is optional)"
        )
    if not chosen.closed:
        raise AgentError(
            "the scaffold's ```python block is not closed (the reply may have been cut off); "
            "put the whole scaffold in one block and close it with ```"
        )
    outside = text[: chosen.start] + "\n" + text[chosen.end :]
    advice = _HEADER.sub("", outside).strip()
    return advice, chosen.code


def extract_source(reply_text: str, structured: dict[str, Any] | None = None) -> str:
    """The candidate source of a code, debug or generalist reply.

    Taken from ``structured["source"]`` when given, else from the last fenced Python
    block, else from the whole reply if it parses as Python. It must define
    ``class ModelNew``; span marks left in it are dropped.
    """
    source = _pick_source(reply_text, structured)
    source = strip_anchor_lines(source).strip("\n") + "\n"
    try:
        module = python_ast.parse(source)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "somewhere"
        shown = f": {exc.text.strip()}" if exc.text else ""
        raise AgentError(
            f"the source in the reply does not parse as Python ({where}: {exc.msg}{shown})"
        ) from None
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(module)):
        names = sorted(n.name for n in ast.walk(module) if isinstance(n, ast.ClassDef))
        found = f" (classes found: {', '.join(names)})" if names else ""
        raise AgentError(
            f"reply has no class ModelNew{found}: return the complete file defining "
            "class ModelNew(nn.Module) in one fenced ```python block"
        )
    return source


def _pick_source(reply_text: str, structured: dict[str, Any] | None) -> str:
    if structured is not None:
        value = structured.get("source")
        if not isinstance(value, str) or not value.strip():
            raise AgentError("the structured reply has no non-empty string field 'source'")
        inner = [b for b in code_blocks(value) if b.closed]
        return inner[-1].code if inner else value
    blocks = code_blocks(reply_text)
    python = [b for b in blocks if b.lang in _PY_LANGS]
    if python:
        last = python[-1]
        if not last.closed:
            raise AgentError(
                "the last ```python block is not closed (the reply may have been cut off); "
                "return the complete file in one closed block"
            )
        return last.code
    if blocks:
        langs = ", ".join(sorted({b.lang for b in blocks}))
        raise AgentError(
            f"the reply has code blocks ({langs}) but no ```python block: return the complete "
            "Python file, with the kernel source inside it as strings, in one ```python block"
        )
    try:
        python_ast.parse(reply_text)
    except SyntaxError:
        raise AgentError(
            "the reply has no fenced code block: return the complete file defining class "
            "ModelNew in one fenced ```python block"
        ) from None
    return reply_text

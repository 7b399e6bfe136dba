"""Lexical facts about a Python source that holds C++/CUDA inside string literals.

Anchor validation needs to know which lines lie inside string literals and to compare two
sources "apart from comments": Python ``#`` comments outside strings, ``//`` and ``/* */``
comments inside them (where the C++/CUDA code lives). ``tokenize`` gives the exact string
boundaries, so a ``#`` inside a CUDA string or a ``//`` operator in Python is never misread.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

Position = tuple[int, int]  # (1-based row, 0-based column), as tokenize reports them

_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


class LexError(ValueError):
    """The text does not tokenize as Python; ``line`` is where tokenize gave up."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class StringLiteral:
    start: Position
    end: Position  # exclusive, like tokenize's end
    text: str | None  # the token text for plain string tokens; None for f-strings (3.12+)

    def contains(self, pos: Position) -> bool:
        return self.start <= pos < self.end

    def interior_row(self, row: int) -> bool:
        """The row lies wholly inside the literal (neither the opening nor the closing line)."""
        return self.start[0] < row < self.end[0]


@dataclass(frozen=True)
class Lexed:
    lines: list[str]  # without line endings; lines[row - 1] is row ``row``
    strings: list[StringLiteral]
    comments: list[Position]  # where each Python comment starts

    def string_at(self, pos: Position) -> StringLiteral | None:
        return next((s for s in self.strings if s.contains(pos)), None)

    def string_around_row(self, row: int) -> StringLiteral | None:
        return next((s for s in self.strings if s.interior_row(row)), None)


def split_lines(text: str) -> list[str]:
    """Lines as tokenize numbers them (split on newline only), without their endings."""
    return [line.rstrip("\r\n") for line in io.StringIO(text).readlines()]


def lex(text: str) -> Lexed:
    strings: list[StringLiteral] = []
    comments: list[Position] = []
    fstring_starts: list[Position] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                strings.append(StringLiteral(tok.start, tok.end, tok.string))
            elif tok.type == tokenize.COMMENT:
                comments.append(tok.start)
            elif _FSTRING_START is not None and tok.type == _FSTRING_START:
                fstring_starts.append(tok.start)
            elif _FSTRING_END is not None and tok.type == _FSTRING_END and fstring_starts:
                strings.append(StringLiteral(fstring_starts.pop(), tok.end, None))
    except tokenize.TokenError as exc:
        line = exc.args[1][0] if len(exc.args) > 1 else 0
        raise LexError(str(exc.args[0]), line) from None
    except SyntaxError as exc:  # IndentationError from inconsistent dedents
        raise LexError(exc.msg, exc.lineno or 0) from None
    strings.sort(key=lambda s: s.start)
    return Lexed(lines=split_lines(text), strings=strings, comments=comments)


def strip_c_comments(body: str) -> str:
    """Remove // and /* */ comments, keeping newlines so line numbers survive.

    Double-quoted C string literals are copied verbatim so "http://..." is not cut.
    """
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        if body.startswith("//", i):
            nl = body.find("\n", i)
            i = n if nl == -1 else nl
        elif body.startswith("/*", i):
            close = body.find("*/", i + 2)
            stop = n if close == -1 else close + 2
            out.append("\n" * body.count("\n", i, stop))
            i = stop
        elif body[i] == '"':
            j = i + 1
            while j < n and body[j] not in '"\n':
                j += 2 if body[j] == "\\" else 1
            j = min(j + 1, n) if j < n and body[j] == '"' else j
            out.append(body[i:j])
            i = j
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _without_c_comments(token_text: str) -> str:
    prefix_len = 0
    while prefix_len < len(token_text) and token_text[prefix_len] not in "'\"":
        prefix_len += 1
    quote = token_text[prefix_len : prefix_len + 3]
    if quote not in ('"""', "'''"):
        quote = token_text[prefix_len : prefix_len + 1]
    body = token_text[prefix_len + len(quote) : len(token_text) - len(quote)]
    return token_text[: prefix_len + len(quote)] + strip_c_comments(body) + quote


def code_lines(lexed: Lexed) -> list[tuple[int, str]]:
    """(row, text) of every line that still holds code once comments are removed.

    Trailing whitespace is dropped; blank lines are skipped; indentation is kept (it is code).
    """
    lines = list(lexed.lines)
    edits: list[tuple[Position, str, StringLiteral | None]] = [
        (pos, "comment", None) for pos in lexed.comments
    ]
    edits += [(s.start, "string", s) for s in lexed.strings if s.text is not None]
    # Right to left, so earlier columns on the same row stay valid after each edit.
    for pos, kind, literal in sorted(edits, key=lambda e: e[0], reverse=True):
        row, col = pos
        if kind == "comment":
            lines[row - 1] = lines[row - 1][:col]
            continue
        assert literal is not None and literal.text is not None
        parts = _without_c_comments(literal.text).split("\n")
        (r1, c1), (r2, c2) = literal.start, literal.end
        head, tail = lines[r1 - 1][:c1], lines[r2 - 1][c2:]
        if r1 == r2:
            lines[r1 - 1] = head + parts[0] + tail
        else:
            lines[r1 - 1] = head + parts[0]
            for offset, part in enumerate(parts[1:-1], start=1):
                lines[r1 - 1 + offset] = part
            lines[r2 - 1] = parts[-1] + tail
    return [(row, line.rstrip()) for row, line in enumerate(lines, start=1) if line.strip()]

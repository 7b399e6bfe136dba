"""Conservative normalization of C/C++/CUDA source text for build-cache keys.

Two sources that normalize to the same text must compile to the same code, byte for byte. So only
changes that no compiler can observe are made, and a source this scanner cannot read with certainty
is returned unchanged (a cache miss costs a build; a wrong hit would cost correctness):

- a comment is dropped only when nothing but whitespace follows it on the line where it ends, so no
  later token moves (columns are observable through ``std::source_location``); newlines inside a
  block comment are kept, so every line keeps its number (``__LINE__``);
- trailing whitespace of every line and trailing blank lines at the end of the file are dropped;
- CRLF line ends become LF.

Raw string literals, a ``//`` comment continued by a backslash, a string or character literal that
crosses a line end, and comment markers inside an ``#include <...>`` all make the scanner give up.
"""

from __future__ import annotations

import re

_RAW_STRING = re.compile(r'(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"')
_INCLUDE_WITH_COMMENT_MARK = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<[^>\n]*(?://|/\*)", re.MULTILINE)
_CHAR_PREFIXES = {"L", "u", "U", "u8"}


class _Unreadable(Exception):
    """The scanner cannot prove a rewrite safe; the caller keeps the source as it is."""


def normalize_source(text: str) -> str:
    """Return ``text`` with unobservable differences removed (see the module docstring)."""
    if "\r" in text:
        if "\r" in text.replace("\r\n", ""):
            return text  # a lone CR is a line end to gcc; leave such files alone
        text = text.replace("\r\n", "\n")
    if _RAW_STRING.search(text) or _INCLUDE_WITH_COMMENT_MARK.search(text):
        return text
    try:
        stripped = _drop_comments(text)
    except _Unreadable:
        return text
    lines = [line.rstrip(" \t\f\v") for line in stripped.split("\n")]
    return "\n".join(lines).rstrip("\n")


def _drop_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i = _copy_literal(text, i, '"', out)
        elif c == "'":
            if _is_digit_separator_or_prefix(text, i) == "separator":
                out.append(c)
                i += 1
            else:
                i = _copy_literal(text, i, "'", out)
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            if text[i:end].rstrip(" \t").endswith("\\"):
                raise _Unreadable("a line comment continued by a backslash")
            i = end  # the newline itself is kept by the next iteration
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _Unreadable("unterminated block comment")
            end += 2
            line_end = text.find("\n", end)
            rest = text[end:] if line_end < 0 else text[end:line_end]
            if rest.strip(" \t"):
                out.append(text[i:end])  # code follows on that line: keep the comment, columns stay
            else:
                out.append("\n" * text.count("\n", i, end))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _copy_literal(text: str, start: int, quote: str, out: list[str]) -> int:
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "\n":
            raise _Unreadable("a literal crosses a line end")
        if c == quote:
            out.append(text[start : i + 1])
            return i + 1
        i += 1
    raise _Unreadable("unterminated literal")


def _is_digit_separator_or_prefix(text: str, i: int) -> str:
    """Classify a quote that follows an identifier or number character."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    word = text[j:i]
    if not word:
        return "literal"
    if word[0].isdigit():
        return "separator"  # 1'000'000: part of a pp-number
    if word in _CHAR_PREFIXES:
        return "literal"  # L'x', u8'x'
    raise _Unreadable(f"a quote after {word!r}")

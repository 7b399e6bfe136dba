"""Grounded instructions: the plan agent's span anchors, their validation, and adherence.

A plan returns the selected node's source with ``<<<IMPROVE BEGIN>>>`` / ``<<<IMPROVE END>>>``
marker lines around the code to change (the scaffold). Each marker sits alone on its line as a
comment valid where it stands: ``# ...`` in Python, ``// ...`` or ``/* ... */`` inside the string
literals that carry C++/CUDA source. Apart from comments the scaffold repeats the base source;
the code agent then rewrites the marked spans, and adherence measures how well it kept to them.
"""

from __future__ import annotations

import difflib
import io

from pydantic import BaseModel, Field

from stark_mcp.tree.errors import AnchorError
from stark_mcp.tree.pysource import Lexed, LexError, code_lines, lex, split_lines

BEGIN_MARK = "<<<IMPROVE BEGIN>>>"
END_MARK = "<<<IMPROVE END>>>"


class Span(BaseModel):
    """1-based scaffold line numbers of a BEGIN and its END marker; the span is strictly between."""

    begin_line: int = Field(ge=1)
    end_line: int = Field(ge=2)


class AnchoredPlan(BaseModel):
    scaffold: str
    spans: list[Span]


def is_marker_line(line: str) -> bool:
    return BEGIN_MARK in line or END_MARK in line


def strip_anchor_lines(scaffold: str) -> str:
    """The scaffold without its marker lines (every other byte kept, line endings included)."""
    return "".join(line for line in io.StringIO(scaffold).readlines() if not is_marker_line(line))


def _shorten(text: str, limit: int = 100) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _marker_problem(line: str, row: int, lexed: Lexed, blanked: bool) -> str | None:
    """Why the marker ``line`` (scaffold row ``row``) is not a comment valid where it stands, or None.

    ``blanked``: ``lexed`` was made with marker lines emptied, so only whole-row facts hold.
    """
    stripped = line.strip()
    mark = BEGIN_MARK if BEGIN_MARK in line else END_MARK
    where = f"scaffold line {row} (`{_shorten(line)}`)"
    if line.count(BEGIN_MARK) + line.count(END_MARK) > 1:
        return f"{where} holds more than one marker; put each BEGIN and END on its own line."
    if blanked:
        literal = lexed.string_around_row(row)
    else:
        literal = lexed.string_at((row, line.index(mark)))
        if literal is not None and not literal.interior_row(row):
            return (
                f"{where} shares its line with the quotes that open or close a string literal; "
                f"put the marker on a line of its own inside the string: `// {mark}`."
            )
    if literal is not None:
        if stripped.startswith("//"):
            return None
        if (
            stripped.startswith("/*")
            and stripped.endswith("*/")
            and stripped.find("*/", 2) == len(stripped) - 2
        ):
            return None
        if stripped.startswith("#"):
            return (
                f"{where} lies inside a string literal (C++/CUDA source), where `#` starts a "
                f"preprocessor directive and breaks the build; write `// {mark}` instead."
            )
        return (
            f"{where} lies inside a string literal (C++/CUDA source) but is not a C++ comment on "
            f"its own line; write `// {mark}` or `/* {mark} */`."
        )
    if stripped.startswith("#"):
        return None
    if stripped.startswith(("//", "/*")):
        return (
            f"{where} is Python code, outside any string literal, where `//` and `/*` are not "
            f"comments; write `# {mark}` instead."
        )
    if stripped.startswith(mark):
        return f"{where} is not inside a comment; write it as a Python comment: `# {mark}`."
    return (
        f"{where} mixes the marker with code; put the marker alone on its own line as a comment "
        f"(`# {mark}` in Python, `// {mark}` inside C++/CUDA strings), since marker lines are removed."
    )


def _lex_for_markers(scaffold: str, marker_rows: list[int]) -> tuple[Lexed | None, bool, LexError | None]:
    """Lex the scaffold; if a misplaced marker breaks tokenizing, lex it with marker lines blanked."""
    try:
        return lex(scaffold), False, None
    except LexError as exc:
        original = exc
    lines = io.StringIO(scaffold).readlines()
    for row in marker_rows:
        lines[row - 1] = "\n" if lines[row - 1].endswith("\n") else ""
    try:
        return lex("".join(lines)), True, original
    except LexError:
        return None, False, original


def _spans(scaffold_lines: list[str], marker_rows: list[int]) -> tuple[list[Span], list[tuple[int, str]]]:
    spans: list[Span] = []
    problems: list[tuple[int, str]] = []
    open_row: int | None = None
    for row in marker_rows:
        line = scaffold_lines[row - 1]
        if BEGIN_MARK in line:
            if open_row is not None:
                problems.append(
                    (
                        row,
                        f"scaffold line {row}: BEGIN while the span opened at line {open_row} is still "
                        f"open; spans cannot nest, so add `{END_MARK}` before line {row}.",
                    )
                )
            open_row = row
        elif open_row is None:
            problems.append(
                (
                    row,
                    f"scaffold line {row}: END without a BEGIN before it; add `{BEGIN_MARK}` above "
                    f"the code to change or delete this marker.",
                )
            )
        else:
            spans.append(Span(begin_line=open_row, end_line=row))
            open_row = None
    if open_row is not None:
        problems.append(
            (
                open_row,
                f"scaffold line {open_row}: BEGIN is never closed; add `{END_MARK}` after the last "
                f"line to change.",
            )
        )
    return spans, problems


def _drift(scaffold_lexed: Lexed, base_source: str) -> tuple[int | None, str] | None:
    """The first line (scaffold row, message) where the scaffold's code departs from the base."""
    try:
        base_lexed = lex(base_source)
    except LexError as exc:
        return None, (
            f"the selected node's source does not tokenize as Python (line {exc.line}: {exc}); "
            f"it cannot be planned on."
        )
    ours, theirs = code_lines(scaffold_lexed), code_lines(base_lexed)
    advice = (
        "Apart from comments and marker lines the scaffold must repeat the selected node's source "
        "exactly; mark where the change goes and leave the new code to the code agent."
    )
    for (row, mine), (base_row, original) in zip(ours, theirs, strict=False):
        if mine != original:
            return row, (
                f"scaffold line {row} differs from the selected node's source at line {base_row}: "
                f"the scaffold has `{_shorten(mine)}` where the source has `{_shorten(original)}`. {advice}"
            )
    if len(ours) > len(theirs):
        row, mine = ours[len(theirs)]
        return row, (
            f"scaffold line {row} (`{_shorten(mine)}`) is extra: the selected node's source ends "
            f"before it. {advice}"
        )
    if len(theirs) > len(ours):
        base_row, original = theirs[len(ours)]
        return len(scaffold_lexed.lines), (
            f"the scaffold ends before line {base_row} of the selected node's source "
            f"(`{_shorten(original)}`): the rest of the source is missing. {advice}"
        )
    return None


def validate_plan(scaffold: str, base_source: str) -> AnchoredPlan:
    """Check a plan's anchored scaffold against the node it was planned on.

    Raises ``AnchorError`` listing every defect with its line and the fix: no anchors, a marker
    that is not a comment valid where it sits, unbalanced or nested markers, or code (outside
    comments) that differs from ``base_source``.
    """
    scaffold_lines = split_lines(scaffold)
    marker_rows = [row for row, line in enumerate(scaffold_lines, start=1) if is_marker_line(line)]
    if not marker_rows:
        raise AnchorError(
            [
                f"the scaffold has no anchors: wrap the code to change in `{BEGIN_MARK}` and "
                f"`{END_MARK}` lines, written as comments (`# ...` in Python, `// ...` inside "
                f"C++/CUDA strings)."
            ]
        )
    lexed, blanked, lex_error = _lex_for_markers(scaffold, marker_rows)
    if lexed is None:
        assert lex_error is not None
        raise AnchorError(
            [
                f"scaffold line {lex_error.line}: the scaffold is not valid Python ({lex_error}); "
                f"fix the quoting or indentation."
            ],
            line=lex_error.line,
        )
    problems: list[tuple[int, str]] = []
    for row in marker_rows:
        problem = _marker_problem(scaffold_lines[row - 1], row, lexed, blanked)
        if problem is not None:
            problems.append((row, problem))
    spans, balance = _spans(scaffold_lines, marker_rows)
    problems += balance
    if not problems and lex_error is not None:
        problems.append((lex_error.line, f"scaffold line {lex_error.line}: not valid Python ({lex_error})."))
    if problems:
        problems.sort(key=lambda p: p[0])
        raise AnchorError([p for _, p in problems], line=problems[0][0])
    drift = _drift(lexed, base_source)
    if drift is not None:
        row, message = drift
        raise AnchorError([message], line=row)
    return AnchoredPlan(scaffold=scaffold, spans=spans)


def _span_ranges(plan: AnchoredPlan) -> list[tuple[int, int]]:
    """Each span as [start, stop) indices into the scaffold's lines with marker lines removed."""
    kept_before: list[int] = []  # kept_before[row - 1]: non-marker lines above scaffold row ``row``
    count = 0
    for line in split_lines(plan.scaffold):
        kept_before.append(count)
        if not is_marker_line(line):
            count += 1
    return [(kept_before[s.begin_line - 1], kept_before[s.end_line - 1]) for s in plan.spans]


def adherence(plan: AnchoredPlan, new_source: str) -> float:
    """Share of changed lines that fall inside the anchored spans, in [0, 1]; 1.0 if nothing changed.

    Changed lines are the removed plus the added lines of a line diff (trailing whitespace
    ignored) between the scaffold and ``new_source``, both without marker lines, because code
    agents often leave the markers in. A removed line counts as inside when it lay in a span;
    an added line when its insertion point lies in a span, where the point just after BEGIN and
    just before END count as inside (an empty span marks where new code is inserted).
    """
    ranges = _span_ranges(plan)
    before = [line.rstrip() for line in split_lines(strip_anchor_lines(plan.scaffold))]
    after = [line.rstrip() for line in split_lines(strip_anchor_lines(new_source))]

    def line_inside(index: int) -> bool:
        return any(start <= index < stop for start, stop in ranges)

    def point_inside(point: int) -> bool:
        return any(start <= point <= stop for start, stop in ranges)

    inside = total = 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for index in range(i1, i2):
            total += 1
            inside += line_inside(index)
        for offset in range(j2 - j1):
            # An added line replacing a removed one is judged where that line was; extra added
            # lines at the insertion point after the replaced block.
            total += 1
            inside += line_inside(i1 + offset) if i1 + offset < i2 else point_inside(i2)
    return 1.0 if total == 0 else inside / total

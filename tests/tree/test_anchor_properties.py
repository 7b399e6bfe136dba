"""Anchors round-trip on random sources: add markers, validate, strip, measure."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK, Span, adherence, strip_anchor_lines, validate_plan

PY_LINES = ["import math", "x = 1", "y = x // 2  # floor", "def f(a):", "    return a * 2", "", "z = [1, 2]"]
CPP_LINES = [
    "#include <cuda_runtime.h>",
    "__global__ void k(float* p) {",
    "    p[threadIdx.x] *= 2.0f;  // double it",
    "}",
    "",
    '    printf("see http://example.org");',
    "    /* block */ int n = 4;",
]


@st.composite
def sources_with_spans(draw: st.DrawFn) -> tuple[str, str, list[Span]]:
    pre = draw(st.lists(st.sampled_from(PY_LINES), max_size=5))
    cpp = draw(st.lists(st.sampled_from(CPP_LINES), max_size=6))
    post = draw(st.lists(st.sampled_from(PY_LINES), max_size=5))
    lines = pre + ['cuda_source = r"""'] + cpp + ['"""'] + post
    base = "".join(line + "\n" for line in lines)

    # Insertion points (marker goes before base line p) per region, with the comment style it needs.
    regions = [
        (0, len(pre), "py"),
        (len(pre) + 1, len(pre) + 1 + len(cpp), "cpp"),
        (len(pre) + len(cpp) + 2, len(lines), "py"),
    ]
    events: list[tuple[int, int, str, str]] = []  # (point, order, kind, style)
    order = 0
    for lo, hi, style in regions:
        points = sorted(draw(st.lists(st.integers(lo, hi), max_size=4)))
        for a, b in zip(points[::2], points[1::2], strict=False):
            events += [(a, order, "BEGIN", style), (b, order + 1, "END", style)]
            order += 2
    if not events:
        events = [(0, 0, "BEGIN", "py"), (len(pre), 1, "END", "py")]
    events.sort()

    out: list[str] = []
    spans: list[Span] = []
    pending_begin = 0
    cursor = 0
    for point, _, kind, style in events:
        out.extend(lines[cursor:point])
        cursor = point
        mark = BEGIN_MARK if kind == "BEGIN" else END_MARK
        note = draw(st.sampled_from(["", " fuse the loops", " -- step 2"]))
        indent = draw(st.sampled_from(["", "    "]))
        if style == "py":
            out.append(f"{indent}# {mark}{note}")
        else:
            out.append(draw(st.sampled_from([f"{indent}// {mark}{note}", f"{indent}/* {mark}{note} */"])))
        if kind == "BEGIN":
            pending_begin = len(out)
        else:
            spans.append(Span(begin_line=pending_begin, end_line=len(out)))
    out.extend(lines[cursor:])
    scaffold = "".join(line + "\n" for line in out)
    return base, scaffold, spans


@settings(max_examples=120, deadline=None)
@given(sources_with_spans())
def test_markers_added_to_a_source_validate_and_strip_back(case: tuple[str, str, list[Span]]) -> None:
    base, scaffold, spans = case
    plan = validate_plan(scaffold, base)
    assert plan.spans == spans
    assert strip_anchor_lines(scaffold) == base
    assert adherence(plan, base) == 1.0
    assert adherence(plan, scaffold) == 1.0


@settings(max_examples=120, deadline=None)
@given(sources_with_spans(), st.data())
def test_edits_confined_to_spans_adhere_fully_and_outside_edits_do_not(
    case: tuple[str, str, list[Span]], data: st.DataObject
) -> None:
    base, scaffold, spans = case
    plan = validate_plan(scaffold, base)
    lines = scaffold.split("\n")
    span = data.draw(st.sampled_from(spans))
    inside = lines[: span.begin_line] + ["    new_code();"] + lines[span.begin_line :]
    assert adherence(plan, "\n".join(inside)) == 1.0
    covered = {row for s in spans for row in range(s.begin_line, s.end_line + 1)}
    # A distinctive line appended after the last line that no span reaches.
    if len(lines) not in covered and len(lines) - 1 not in covered:
        assert adherence(plan, scaffold + "unrelated = True\n") == 0.0
    value = adherence(plan, "\n".join(inside) + "unrelated = True\n")
    assert 0.0 <= value <= 1.0

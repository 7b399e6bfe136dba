import pytest

from stark_mcp.errors import StarkError
from stark_mcp.tree import TreeError
from stark_mcp.tree.anchors import (
    BEGIN_MARK,
    END_MARK,
    AnchoredPlan,
    AnchorError,
    Span,
    adherence,
    strip_anchor_lines,
    validate_plan,
)
from stark_mcp.tree.pysource import LexError, lex

BASE = '''import torch
from torch.utils.cpp_extension import load_inline

kernel_source = """
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * s;
    }
}
"""


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = x * 2.0
        return y + 1.0
'''


def scaffold_with(**replacements: str) -> str:
    text = BASE
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text


CUDA_AND_PY = (
    BASE.replace(
        "__global__ void scale_kernel",
        "// <<<IMPROVE BEGIN>>> vectorise with float4\n__global__ void scale_kernel",
    )
    .replace("    }\n}\n", "    }\n}\n/* <<<IMPROVE END>>> */\n")
    .replace(
        "        y = x * 2.0\n",
        "        # <<<IMPROVE BEGIN>>>\n        y = x * 2.0\n        # <<<IMPROVE END>>>\n",
    )
)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), start=1) if needle in line)


def problem(scaffold: str, base: str = BASE) -> AnchorError:
    with pytest.raises(AnchorError) as info:
        validate_plan(scaffold, base)
    return info.value


def test_cpp_markers_in_a_string_and_python_markers_outside_are_accepted() -> None:
    plan = validate_plan(CUDA_AND_PY, BASE)
    assert plan.scaffold == CUDA_AND_PY
    assert plan.spans == [
        Span(
            begin_line=line_of(CUDA_AND_PY, "vectorise"), end_line=line_of(CUDA_AND_PY, "/* <<<IMPROVE END")
        ),
        Span(
            begin_line=line_of(CUDA_AND_PY, "# <<<IMPROVE BEGIN"),
            end_line=line_of(CUDA_AND_PY, "# <<<IMPROVE END"),
        ),
    ]
    assert strip_anchor_lines(CUDA_AND_PY) == BASE


def test_comments_blank_lines_and_trailing_spaces_do_not_count_as_drift() -> None:
    scaffold = (
        CUDA_AND_PY.replace(
            "    int i = blockIdx.x", "    // one thread per element\n\n    int i = blockIdx.x"
        )
        .replace("y[i] = x[i] * s;", "y[i] = x[i] * s;   /* hot loop */   ")
        .replace(
            "        return y + 1.0", "        # keep the bias add in Python\n        return y + 1.0  # cheap"
        )
        .replace("import torch\n", "import torch   \n")
    )
    assert len(validate_plan(scaffold, BASE).spans) == 2


def test_an_empty_span_marks_an_insertion_point() -> None:
    scaffold = BASE.replace(
        "\n\nclass ModelNew",
        "\n# <<<IMPROVE BEGIN>>> add the launcher here\n# <<<IMPROVE END>>>\n\nclass ModelNew",
    )
    plan = validate_plan(scaffold, BASE)
    assert plan.spans[0].end_line == plan.spans[0].begin_line + 1


def test_no_anchors() -> None:
    err = problem(BASE)
    assert "no anchors" in str(err) and BEGIN_MARK in str(err)
    assert isinstance(err, TreeError) and isinstance(err, StarkError)


def test_unclosed_begin() -> None:
    scaffold = CUDA_AND_PY.replace("        # <<<IMPROVE END>>>\n", "")
    err = problem(scaffold)
    row = line_of(scaffold, "# <<<IMPROVE BEGIN")
    assert err.line == row
    assert (
        str(err)
        == f"scaffold line {row}: BEGIN is never closed; add `{END_MARK}` after the last line to change."
    )


def test_end_before_begin() -> None:
    scaffold = BASE.replace(
        "        y = x * 2.0\n",
        "        # <<<IMPROVE END>>>\n        y = x * 2.0\n        # <<<IMPROVE BEGIN>>>\n",
    )
    err = problem(scaffold)
    assert len(err.problems) == 2
    assert err.problems[0].startswith(f"scaffold line {line_of(scaffold, 'END')}: END without a BEGIN")
    assert err.problems[1].startswith(f"scaffold line {line_of(scaffold, 'BEGIN')}: BEGIN is never closed")


def test_nested_spans() -> None:
    scaffold = CUDA_AND_PY.replace("    if (i < n) {", "    // <<<IMPROVE BEGIN>>>\n    if (i < n) {")
    err = problem(scaffold)
    inner = line_of(scaffold, "    // <<<IMPROVE BEGIN")
    outer = line_of(scaffold, "vectorise")
    assert err.line == inner
    assert f"scaffold line {inner}: BEGIN while the span opened at line {outer} is still open" in str(err)


def test_hash_marker_inside_a_cuda_string_is_a_preprocessor_line() -> None:
    scaffold = CUDA_AND_PY.replace("// <<<IMPROVE BEGIN>>> vectorise with float4", "# <<<IMPROVE BEGIN>>>")
    err = problem(scaffold)
    row = line_of(scaffold, "# <<<IMPROVE BEGIN>>>")
    assert err.line == row
    assert "inside a string literal (C++/CUDA source)" in str(err)
    assert f"write `// {BEGIN_MARK}` instead" in str(err)


def test_cpp_comment_marker_in_python_code() -> None:
    scaffold = CUDA_AND_PY.replace("        # <<<IMPROVE END>>>", "        // <<<IMPROVE END>>>")
    err = problem(scaffold)
    assert err.line == line_of(scaffold, "// <<<IMPROVE END")
    assert f"write `# {END_MARK}` instead" in str(err)


def test_bare_marker_and_marker_sharing_a_code_line() -> None:
    # A bare marker at column 0 inside a method also breaks indentation; it is still named.
    bare = CUDA_AND_PY.replace("        # <<<IMPROVE BEGIN>>>", "<<<IMPROVE BEGIN>>>")
    err = problem(bare)
    assert err.line == next(i for i, line in enumerate(bare.split("\n"), 1) if line == BEGIN_MARK)
    assert f"is not inside a comment; write it as a Python comment: `# {BEGIN_MARK}`" in str(err)
    shared = BASE.replace(
        "        y = x * 2.0\n", "        y = x * 2.0  # <<<IMPROVE BEGIN>>>\n        # <<<IMPROVE END>>>\n"
    )
    err = problem(shared)
    assert "mixes the marker with code" in str(err)


def test_marker_on_the_line_of_the_string_quotes() -> None:
    scaffold = BASE.replace('kernel_source = """\n', 'kernel_source = """// <<<IMPROVE BEGIN>>>\n').replace(
        '}\n"""\n', '}\n// <<<IMPROVE END>>>\n"""\n'
    )
    err = problem(scaffold)
    assert err.line == 4
    assert "shares its line with the quotes" in str(err)


def test_two_markers_on_one_line_and_unclosed_block_comment() -> None:
    both = BASE.replace("    if (i < n) {", "    // <<<IMPROVE BEGIN>>> <<<IMPROVE END>>>\n    if (i < n) {")
    assert "holds more than one marker" in str(problem(both))
    open_block = CUDA_AND_PY.replace("/* <<<IMPROVE END>>> */", "/* <<<IMPROVE END>>>")
    assert "is not a C++ comment on its own line" in str(problem(open_block))


def test_drift_names_both_lines_and_what_differs() -> None:
    scaffold = CUDA_AND_PY.replace("y[i] = x[i] * s;", "y[i] = __fmul_rn(x[i], s);")
    err = problem(scaffold)
    row = line_of(scaffold, "__fmul_rn")
    assert err.line == row
    base_row = line_of(BASE, "y[i] = x[i]")
    assert str(err).startswith(
        f"scaffold line {row} differs from the selected node's source at line {base_row}: "
        "the scaffold has `y[i] = __fmul_rn(x[i], s);` where the source has `y[i] = x[i] * s;`."
    )


def test_indentation_is_code() -> None:
    scaffold = CUDA_AND_PY.replace("        return y + 1.0", "    return y + 1.0")
    assert "differs from the selected node's source" in str(problem(scaffold))


def test_extra_and_missing_code() -> None:
    extra = CUDA_AND_PY + "print('hello')\n"
    err = problem(extra)
    assert err.line == line_of(extra, "print(")
    assert "is extra: the selected node's source ends before it" in str(err)
    missing = CUDA_AND_PY.replace("        return y + 1.0\n", "")
    err = problem(missing)
    assert f"the scaffold ends before line {line_of(BASE, 'return y')} of the selected node's source" in str(
        err
    )


def test_scaffold_or_base_that_does_not_tokenize() -> None:
    broken = CUDA_AND_PY.replace('"""\n\n\nclass', "\n\n\nclass")
    assert broken != CUDA_AND_PY
    err = problem(broken)
    assert err.line == line_of(broken, 'kernel_source = """')
    assert "the scaffold is not valid Python (EOF in multi-line string)" in str(err)
    err = problem(CUDA_AND_PY, base='x = """never closed\n')
    assert "the selected node's source does not tokenize" in str(err)


SIMPLE_BASE = "a = 1\nb = 2\nc = 3\nd = 4\n"
SIMPLE_SCAFFOLD = "a = 1\n# <<<IMPROVE BEGIN>>>\nb = 2\nc = 3\n# <<<IMPROVE END>>>\nd = 4\n"


def simple_plan() -> AnchoredPlan:
    return validate_plan(SIMPLE_SCAFFOLD, SIMPLE_BASE)


@pytest.mark.parametrize(
    ("new_source", "expected"),
    [
        (SIMPLE_BASE, 1.0),  # nothing changed
        ("a = 1\nb = 20\nc = 3\nd = 4\n", 1.0),  # one line replaced inside
        ("a = 10\nb = 2\nc = 3\nd = 4\n", 0.0),  # one line replaced outside
        ("a = 10\nb = 20\nc = 3\nd = 4\n", 0.5),  # one of each
        ("a = 1\nb = 2\nx = 0\nc = 3\nd = 4\n", 1.0),  # inserted inside
        ("a = 1\nb = 2\nc = 3\nx = 0\nd = 4\n", 1.0),  # inserted just before END
        ("a = 1\nb = 2\nc = 3\nd = 4\nx = 0\n", 0.0),  # appended after the span
        ("a = 1\nd = 4\n", 1.0),  # the span's lines deleted
        ("a = 1\nb = 2\nc = 3\n", 0.0),  # an outside line deleted
        ("a = 1\n# <<<IMPROVE BEGIN>>>\nb = 5\nc = 3\n# <<<IMPROVE END>>>\nd = 4\n", 1.0),  # markers kept
        ("a = 1   \nb = 2\t\nc = 3\nd = 4\n", 1.0),  # trailing whitespace is no change
        # 2 removed + 3 added inside, 1 appended outside
        ("a = 1\nb = 7\nc = 8\ny = 9\nd = 4\nz = 1\n", 5 / 6),
    ],
)
def test_adherence_on_small_diffs(new_source: str, expected: float) -> None:
    assert adherence(simple_plan(), new_source) == pytest.approx(expected)


def test_adherence_with_an_empty_insertion_span() -> None:
    plan = validate_plan("a = 1\n# <<<IMPROVE BEGIN>>>\n# <<<IMPROVE END>>>\nb = 2\n", "a = 1\nb = 2\n")
    assert adherence(plan, "a = 1\nnew = 0\nb = 2\n") == 1.0
    assert adherence(plan, "new = 0\na = 1\nb = 2\n") == 0.0


def test_a_marker_that_breaks_indentation_is_still_named() -> None:
    # Six spaces after an eight-space line: tokenize itself fails on this line.
    scaffold = CUDA_AND_PY.replace("        # <<<IMPROVE END>>>", "      <<<IMPROVE END>>>")
    with pytest.raises(LexError):
        lex(scaffold)
    err = problem(scaffold)
    row = line_of(scaffold, "      <<<IMPROVE END>>>")
    assert err.line == row
    assert str(err) == (
        f"scaffold line {row} (`{END_MARK}`) is not inside a comment; write it as a Python "
        f"comment: `# {END_MARK}`."
    )
    # The rows inside the CUDA string are still known when the scaffold had to be re-lexed.
    both = scaffold.replace("// <<<IMPROVE BEGIN>>> vectorise with float4", "# <<<IMPROVE BEGIN>>>")
    err = problem(both)
    assert len(err.problems) == 2
    assert "inside a string literal (C++/CUDA source)" in err.problems[0]


def test_anchor_error_accepts_a_single_message() -> None:
    err = AnchorError("plan has no scaffold block")
    assert err.problems == ["plan has no scaffold block"] and str(err) == "plan has no scaffold block"
    many = AnchorError(["first", "second"], line=3)
    assert str(many) == "2 problems in the anchored scaffold:\n- first\n- second" and many.line == 3

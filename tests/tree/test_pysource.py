import pytest

from stark_mcp.tree.pysource import LexError, code_lines, lex, strip_c_comments


def test_strip_c_comments_keeps_newlines_and_c_strings() -> None:
    assert strip_c_comments("a; // x\nb; /* y\nz */ c;") == "a; \nb; \n c;"
    assert strip_c_comments('s = "http://x"; // tail') == 's = "http://x"; '
    assert strip_c_comments('s = "a \\" // b";') == 's = "a \\" // b";'
    assert strip_c_comments("x /* never closed\nstill comment") == "x \n"


def test_code_lines_drop_python_and_cpp_comments_only_where_they_are_comments() -> None:
    source = (
        'a = 7 // 2  # floor\nsrc = """\n// note\nint x = 1; /* c */\n# define N 4\n"""\n'
        '\nb = "# not a comment"\n'
    )
    assert code_lines(lex(source)) == [
        (1, "a = 7 // 2"),
        (2, 'src = """'),
        (4, "int x = 1;"),
        (5, "# define N 4"),
        (6, '"""'),
        (8, 'b = "# not a comment"'),
    ]


def test_string_positions() -> None:
    lexed = lex('x = 1\ns = """\nbody\n"""\n')
    literal = lexed.string_around_row(3)
    assert literal is not None and literal.start == (2, 4) and literal.end == (4, 3)
    assert lexed.string_around_row(2) is None and lexed.string_around_row(4) is None
    assert lexed.string_at((3, 0)) is literal and lexed.string_at((1, 0)) is None


def test_lex_errors_carry_the_line() -> None:
    with pytest.raises(LexError) as info:
        lex('a = 1\nb = """open\n')
    assert info.value.line == 2
    with pytest.raises(LexError) as info:
        lex("if x:\n        a = 1\n    b = 2\n")
    assert info.value.line == 3

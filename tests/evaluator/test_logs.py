from stark_mcp.evaluator.host.log_trimming import trim_compiler_log, trim_tail


def test_short_logs_are_untouched() -> None:
    assert trim_compiler_log("all good", limit=100) == "all good"
    assert trim_tail("abc", limit=10) == "abc"


def test_compiler_log_keeps_the_first_error_not_the_cascade() -> None:
    preamble = "\n".join(f"[{i}/3] c++ -c main.cpp -I/very/long/include/path" * 3 for i in range(60))
    first = "main.cpp:5:18: error: 'undeclared_scale_factor' was not declared in this scope"
    cascade = "\n".join(f"main.cpp:{i}:1: error: follow-on error {i}" for i in range(6, 400))
    log = f"{preamble}\n{first}\n{cascade}"
    trimmed = trim_compiler_log(log, limit=2000)
    assert first in trimmed
    assert "follow-on error 399" not in trimmed
    assert "earlier lines trimmed" in trimmed
    assert len(trimmed) < 2300


def test_tail_trim_keeps_the_end() -> None:
    text = "x" * 5000 + "Traceback: the real exception"
    trimmed = trim_tail(text, limit=100)
    assert trimmed.endswith("the real exception")
    assert "earlier characters trimmed" in trimmed

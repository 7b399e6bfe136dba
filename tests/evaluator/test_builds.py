"""Real C++ extension builds (cpp_sources only) through the builder process; each source builds once."""

import time

import pytest

from stark_mcp.problems import source_hash
from stark_mcp.records import Status
from tests.evaluator.conftest import evaluate_fixture, fixture_text

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


async def test_extension_builds_despite_a_stale_lock_and_rebuild_is_a_cache_hit(cache_dir) -> None:
    digest = source_hash(fixture_text("ext_ok.py"))
    lock = cache_dir / "builds" / digest / "stark_relu_sum" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.touch()  # what a killed build leaves behind; torch would wait on it forever

    first = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_ok.py", use_cache=False)
    assert first.status is Status.PASSED, first.message
    assert (cache_dir / "builds" / digest / ".built").exists()
    assert not lock.exists()

    start = time.monotonic()
    again = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_ok.py", use_cache=False)
    elapsed = time.monotonic() - start
    assert again.status is Status.PASSED and not again.cached
    assert again.phase_seconds["build"] < 0.5  # the builder process did not run
    assert elapsed < 15  # ~2 s unloaded: reference and candidate processes run side by side


async def test_same_extension_name_different_source_gets_its_own_build(cache_dir) -> None:
    other = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_same_name.py", use_cache=False)
    assert (other.status, other.reason) == (Status.WRONG_OUTPUT, "tolerance"), other.message
    ok = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_ok.py", use_cache=False)
    assert ok.status is Status.PASSED
    dirs = {source_hash(fixture_text(n)) for n in ("ext_ok.py", "ext_same_name.py")}
    assert all((cache_dir / "builds" / d / "stark_relu_sum").is_dir() for d in dirs) and len(dirs) == 2


async def test_build_past_its_budget_is_killed_and_leaves_no_lock(cache_dir) -> None:
    from tests.evaluator.conftest import FAST

    settings = FAST.model_copy(update={"build_timeout_s": 8.0})
    result = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_compile_error.py", settings=settings,
                                    use_cache=False)
    assert (result.status, result.reason) == (Status.TIMEOUT, "build")
    digest = source_hash(fixture_text("ext_compile_error.py"))
    assert not list((cache_dir / "builds" / digest).glob("*/lock"))
    # The next test builds this same source again and must not wait on the killed build.


async def test_compile_error_keeps_the_first_error(cache_dir) -> None:
    result = await evaluate_fixture(cache_dir, "relu_sum.py", "ext_compile_error.py", use_cache=False)
    assert (result.status, result.reason) == (Status.BUILD_ERROR, "compile")
    assert "undeclared_scale_factor" in result.message
    assert "error:" in result.logs["build"] and "undeclared_scale_factor" in result.logs["build"]
    assert result.runtime is None

"""Real C++ extension builds (cpp_sources only) in the sandboxed builder; the cache is the parent's."""

import time

import pytest

from stark_mcp.evaluator.builds import MANIFEST
from stark_mcp.problems import source_hash
from stark_mcp.records import Status
from tests.evaluator.conftest import evaluate_fixture, fixture_text

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


async def test_extension_builds_over_leftovers_and_rebuild_is_a_cache_hit(evaluator, cache_dir) -> None:
    digest = source_hash(fixture_text("ext_ok.py"))
    lock = cache_dir / "builds" / digest / "stark_relu_sum" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.touch()  # what a killed build leaves behind: an unsigned directory is never reused

    first = await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py", use_cache=False)
    assert first.status is Status.PASSED, first.message
    assert (cache_dir / "builds" / digest / MANIFEST).exists()
    assert not lock.exists()

    start = time.monotonic()
    again = await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py", use_cache=False)
    elapsed = time.monotonic() - start
    assert again.status is Status.PASSED and not again.cached
    assert again.phase_seconds["build"] < 1.0  # the builder did not run
    assert elapsed < 30


async def test_a_tampered_build_is_rebuilt_not_loaded(evaluator, cache_dir) -> None:
    digest = source_hash(fixture_text("ext_ok.py"))
    await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py")
    library = next((cache_dir / "builds" / digest).rglob("*.so"))
    library.write_bytes(b"not a library")  # as a process at a weaker isolation level could
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py", use_cache=False)
    assert result.status is Status.PASSED, result.message
    assert result.phase_seconds["build"] > 1.0  # built again from source
    assert next((cache_dir / "builds" / digest).rglob("*.so")).read_bytes()[:4] == b"\x7fELF"


async def test_same_extension_name_different_source_gets_its_own_build(evaluator, cache_dir) -> None:
    other = await evaluate_fixture(evaluator, "relu_sum.py", "ext_same_name.py", use_cache=False)
    assert (other.status, other.reason) == (Status.WRONG_OUTPUT, "tolerance"), other.message
    ok = await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py", use_cache=False)
    assert ok.status is Status.PASSED
    dirs = {source_hash(fixture_text(n)) for n in ("ext_ok.py", "ext_same_name.py")}
    assert all((cache_dir / "builds" / d / "stark_relu_sum").is_dir() for d in dirs) and len(dirs) == 2


async def test_build_past_its_budget_is_killed_and_leaves_nothing(evaluator, cache_dir) -> None:
    from tests.evaluator.conftest import FAST

    settings = FAST.model_copy(update={"build_timeout_s": 8.0})
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_compile_error.py", settings=settings,
                                    use_cache=False)
    assert (result.status, result.reason) == (Status.TIMEOUT, "build")
    digest = source_hash(fixture_text("ext_compile_error.py"))
    assert not (cache_dir / "builds" / digest).exists()
    assert not list((cache_dir / "builds").glob(f".tmp-{digest}-*"))


async def test_compile_error_keeps_the_first_error(evaluator) -> None:
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_compile_error.py", use_cache=False)
    assert (result.status, result.reason) == (Status.BUILD_ERROR, "compile")
    assert "undeclared_scale_factor" in result.message
    assert "error:" in result.logs["build"] and "undeclared_scale_factor" in result.logs["build"]
    assert result.runtime is None

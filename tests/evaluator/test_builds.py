"""Real C++ extension builds (cpp_sources only) in the sandboxed builder; the cache is the parent's."""

import time

import pytest

from stark_mcp.evaluator.host.integrity import MANIFEST
from stark_mcp.evaluator.sandbox.forked import ForkedProcess
from stark_mcp.problems import load_problem, source_hash
from stark_mcp.records import Status
from tests.evaluator.conftest import FAST, FIXTURES, evaluate_fixture, fixture_text
from tests.toolchain import shared_toolchain

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@pytest.mark.slow(seconds=80)  # the evaluator folder's group starts early (tests/conftest.py)
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
    # An extension on Python's C API alone: the subject is the cache, and its build takes a second
    # where a torch-header one takes twenty CPU-s (the precompiled header's use in a compile jail:
    # test_a_fresh_cache_builds_with_the_toolchain_directory_it_shares).
    digest = source_hash(fixture_text("ext_python_api.py"))
    first = await evaluate_fixture(evaluator, "relu_sum.py", "ext_python_api.py")
    assert first.status is Status.PASSED, first.message
    key = first.extensions[0]["key"]
    library = next((cache_dir / "builds" / digest).rglob("*.so"))
    library.write_bytes(b"not a library")  # as a process at a weaker isolation level could
    shared = cache_dir / "extensions" / key / "stark_relu_sum_capi.so"
    shared.write_bytes(shared.read_bytes() + b"\0")  # the shared entry too: it must not verify
    compiles = evaluator.extensions.compiles
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_python_api.py", use_cache=False)
    assert result.status is Status.PASSED, result.message
    assert evaluator.extensions.compiles == compiles + 1 and not result.extensions[0]["cached"]  # built again
    assert next((cache_dir / "builds" / digest).rglob("*.so")).read_bytes()[:4] == b"\x7fELF"
    assert shared.read_bytes()[:4] == b"\x7fELF" and evaluator.extensions.verified(key, "stark_relu_sum_capi")


async def test_the_same_request_from_another_candidate_is_a_cache_hit(evaluator, cache_dir) -> None:
    """Another source (a different Python body, a comment and trailing spaces in the C++) that makes
    the same normalized request: the builder runs, the compile does not."""
    await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py")
    compiles = evaluator.extensions.compiles
    variant = fixture_text("ext_ok.py").replace(
        "    return out;\n", "    return out;   // the result\n"
    ).replace("class ModelNew", "# a second candidate\nclass ModelNew")
    assert source_hash(variant) != source_hash(fixture_text("ext_ok.py"))
    result = await evaluator.evaluate(
        load_problem(str(FIXTURES / "relu_sum.py")), variant, device="cpu", settings=FAST, use_cache=False
    )
    assert result.status is Status.PASSED, result.message
    assert evaluator.extensions.compiles == compiles
    assert result.extensions == [
        {**result.extensions[0], "name": "stark_relu_sum", "layout": "cpp", "ok": True, "cached": True}
    ]
    named = {k: v for k, v in result.phase_seconds.items() if k != "other"}
    assert abs(sum(named.values()) - result.wall_seconds) <= 0.05 * result.wall_seconds, result.phase_seconds


async def test_a_hostile_build_request_is_a_build_error(evaluator, cache_dir) -> None:
    """The candidate writes its own frames to the builder's channel: a request that is not one."""
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_hostile_request.py", use_cache=False)
    assert (result.status, result.reason) == (Status.BUILD_ERROR, "request"), result.message
    assert "cpp_sources must be a string or a list of strings" in result.message
    named = await evaluator.evaluate(
        load_problem(str(FIXTURES / "relu_sum.py")),
        fixture_text("ext_ok.py").replace('name="stark_relu_sum"', 'name="../../escape"'),
        device="cpu", settings=FAST, use_cache=False,
    )  # fmt: skip
    assert (named.status, named.reason) == (Status.BUILD_ERROR, "request")
    assert "is not a Python identifier" in named.message


async def test_the_compile_runs_in_its_jail(evaluator, cache_dir, tmp_path) -> None:
    """A compiler wrapper (a flag the candidate chose) runs inside the compile jail: it cannot write
    the host, the shared toolchain directory or the cache, and the build still succeeds."""
    marks = [tmp_path / "escaped", evaluator.toolchain_dir / "poison", cache_dir / "escaped"]
    source = fixture_text("ext_wrapper.py").replace("MARKS", " ".join(str(m) for m in marks))
    result = await evaluator.evaluate(
        load_problem(str(FIXTURES / "relu_sum.py")), source, device="cpu", settings=FAST, use_cache=False
    )
    assert result.status is Status.PASSED, (result.message, result.logs)
    assert result.extensions[0]["primed"] == ["not primed: flags outside the plain list"]
    assert not any(m.exists() for m in marks)


async def test_same_extension_name_different_source_gets_its_own_build(evaluator, cache_dir) -> None:
    names = ("ext_python_api_same_name.py", "ext_python_api.py")  # one extension name, two kernels
    other = await evaluate_fixture(evaluator, "relu_sum.py", names[0], use_cache=False)
    assert (other.status, other.reason) == (Status.WRONG_OUTPUT, "tolerance"), other.message
    ok = await evaluate_fixture(evaluator, "relu_sum.py", names[1], use_cache=False)
    assert ok.status is Status.PASSED, ok.message
    dirs = {source_hash(fixture_text(n)) for n in names}
    libraries = {next((cache_dir / "builds" / d / "ext").glob("*/stark_relu_sum_capi.so")).parent.name
                 for d in dirs}
    assert len(dirs) == 2 and len(libraries) == 2  # two requests, two keys, two libraries


async def test_build_past_its_budget_is_killed_and_leaves_nothing(evaluator, cache_dir) -> None:
    # The fixture's compile is the compiler's own work (about 35 s here), so the budget is exceeded
    # whatever headers are precompiled; a fixture that merely fails to compile raced the budget.
    from tests.evaluator.conftest import FAST

    settings = FAST.model_copy(update={"build_timeout_s": 8.0})
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_slow_build.py", settings=settings,
                                    use_cache=False)
    assert (result.status, result.reason) == (Status.TIMEOUT, "build"), result.message
    digest = source_hash(fixture_text("ext_slow_build.py"))
    assert not (cache_dir / "builds" / digest).exists()
    assert not list((cache_dir / "builds").glob(f".tmp-{digest}-*"))


async def test_compile_error_keeps_the_first_error(evaluator) -> None:
    result = await evaluate_fixture(evaluator, "relu_sum.py", "ext_compile_error.py", use_cache=False)
    assert (result.status, result.reason) == (Status.BUILD_ERROR, "compile")
    assert "undeclared_scale_factor" in result.message
    assert "error:" in result.logs["build"] and "undeclared_scale_factor" in result.logs["build"]
    assert result.runtime is None
    # Compiled once, with the precompiled header despite the repeated include: the error is the
    # source's own, so compiling it again without the header could only repeat it.
    (extension,) = result.extensions
    assert extension["variants"] == ["pch"] and extension["fallbacks"] == [], extension


async def test_a_builder_started_ahead_builds_the_next_candidate(cache_dir, monkeypatch) -> None:
    """On a GPU the next builder starts while the current one works, so a re-evaluation's build does
    not wait for Python and torch to start. Here on the CPU, with that turned on: the spare builds
    the next candidate, a dead spare is replaced by a fresh builder, and closing stops the spare."""
    from stark_mcp.evaluator import Evaluator
    from stark_mcp.evaluator.host import candidate_builds

    monkeypatch.setattr(
        candidate_builds, "_warms_ahead", lambda info, isolation: isolation.level == "sandbox"
    )
    problem = load_problem(str(FIXTURES / "relu_sum.py"))
    # New sources (the builder runs) that make the session's cached extension request (no compile).
    source = fixture_text("ext_ok.py") + f"\n# started ahead {time.time_ns()}\n"
    async with Evaluator(cache_dir, FAST, toolchain_dir=shared_toolchain()) as ev:
        if (await ev.isolation()).level != "sandbox":
            pytest.skip("builders are started ahead at the sandbox level only")
        first = await ev.evaluate(problem, source, device="cpu", settings=FAST)
        assert first.status is Status.PASSED, first.message
        ahead = ev.builds._spare
        assert ahead is not None and ahead.jail.poll() is None  # started, waiting for a candidate
        if (await ev.isolation()).root:  # forked from the zygote, which imported torch already
            assert isinstance(ahead.jail.proc, ForkedProcess), ahead.jail.proc

        again = source + "\n# the same kernel again\n"
        second = await ev.evaluate(problem, again, device="cpu", settings=FAST)
        assert second.status is Status.PASSED, second.message
        assert ahead.jail.poll() is not None and not ahead.job.exists()  # it built this one, and ended
        assert ev.builds._spare is not None and ev.builds._spare is not ahead

        dead = ev.builds._spare
        dead.jail.kill_all()
        dead.jail.wait(10)
        third = await ev.evaluate(problem, source + "\n# and once more\n", device="cpu", settings=FAST)
        assert third.status is Status.PASSED, third.message
        assert not dead.job.exists() and not dead.work.exists()  # discarded, not used
        last = ev.builds._spare
    assert last is not None and last.jail.poll() is not None
    assert not last.job.exists() and not last.work.exists()


async def test_a_fresh_cache_builds_with_the_toolchain_directory_it_shares(evaluator, tmp_path) -> None:
    """Two caches pointed at one toolchain directory (``STARK_TOOLCHAIN_DIR``): what the first made
    for these flags, the second's first build uses; nothing is made again, in either directory."""
    from stark_mcp.evaluator import Evaluator

    first = await evaluate_fixture(evaluator, "relu_sum.py", "ext_ok.py")
    assert first.status is Status.PASSED, first.message
    made = sorted(p.name for p in (evaluator.toolchain_dir / "pch").iterdir())
    fresh = tmp_path / "cache"
    async with Evaluator(fresh, FAST, toolchain_dir=evaluator.toolchain_dir) as ev:
        result = await evaluate_fixture(ev, "relu_sum.py", "ext_ok.py")
        assert result.status is Status.PASSED, result.message
        (extension,) = result.extensions
        assert not extension["cached"] and ev.extensions.compiles == 1  # compiled, in this cache
        assert "pch" in extension["variants"] and extension["primed"] == [], extension
    assert sorted(p.name for p in (evaluator.toolchain_dir / "pch").iterdir()) == made
    assert not (fresh / "toolchain").exists()

"""One real candidate per verdict, each evaluated in real processes on the CPU."""

import pytest

from stark_mcp.records import Status
from tests.evaluator.conftest import evaluate_fixture

CASES = [
    ("relu_sum.py", "torch_ok.py", Status.PASSED, None),
    ("affine_tanh.py", "affine_ok.py", Status.PASSED, None),
    ("relu_sum.py", "syntax_error.py", Status.LOAD_ERROR, "syntax"),
    ("relu_sum.py", "no_model_new.py", Status.LOAD_ERROR, "no_model_new"),
    ("relu_sum.py", "import_error.py", Status.LOAD_ERROR, "import"),
    ("relu_sum.py", "constructor_error.py", Status.LOAD_ERROR, "constructor"),
    ("relu_sum.py", "raises.py", Status.RUNTIME_ERROR, "exception"),
    ("relu_sum.py", "segfault.py", Status.RUNTIME_ERROR, "signal"),
    ("relu_sum.py", "exits.py", Status.RUNTIME_ERROR, "no_result"),
    ("relu_sum.py", "wrong_shape.py", Status.WRONG_OUTPUT, "shape"),
    ("relu_sum.py", "wrong_dtype.py", Status.WRONG_OUTPUT, "dtype"),
    ("relu_sum.py", "wrong_device.py", Status.WRONG_OUTPUT, "device"),
    ("relu_sum.py", "nan_output.py", Status.WRONG_OUTPUT, "nonfinite"),
    ("relu_sum.py", "off_by_tolerance.py", Status.WRONG_OUTPUT, "tolerance"),
    ("affine_tanh.py", "affine_bf16.py", Status.WRONG_OUTPUT, "tolerance"),
    ("relu_sum.py", "phase_switch.py", Status.WRONG_OUTPUT, "inconsistent"),
    ("relu_sum.py", "mutates_input.py", Status.REJECTED, "input_mutated"),
    ("relu_sum.py", "flag_change.py", Status.PASSED, None),
    ("relu_sum.py", "tamper_timer.py", Status.REJECTED, "tamper"),
    ("relu_sum.py", "subclass_output.py", Status.REJECTED, "tensor_subclass"),
    ("relu_sum.py", "subclasses_reference.py", Status.REJECTED, "reference_model"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("problem,candidate,status,reason", CASES, ids=[c[1] for c in CASES])
async def test_verdict(evaluator, problem, candidate, status, reason) -> None:
    result = await evaluate_fixture(evaluator, problem, candidate, use_cache=False)
    assert (result.status, result.reason) == (status, reason), result.message
    assert result.device == "cpu" and result.source_hash and result.settings_hash
    if status is Status.PASSED:
        assert result.runtime is not None and result.runtime.samples >= 30
        c = result.correctness
        assert c is not None and c.trials >= 5 + 3 and c.trials_passed == c.trials and c.allclose_1e4
        assert result.trust is not None and result.trust.isolation and result.trust.timed_checked >= 3
        assert set(result.baselines) == {"eager"} and result.speedups["eager"] > 0
    else:
        assert result.runtime is None and result.speedups == {}
        assert result.message


@pytest.mark.anyio
async def test_a_crash_does_not_affect_the_next_evaluation(evaluator) -> None:
    crashed = await evaluate_fixture(evaluator, "relu_sum.py", "segfault.py", use_cache=False)
    assert crashed.status is Status.RUNTIME_ERROR and "SIGSEGV" in crashed.message
    after = await evaluate_fixture(evaluator, "relu_sum.py", "torch_ok.py", use_cache=False)
    assert after.status is Status.PASSED


@pytest.mark.anyio
async def test_a_hang_times_out_in_its_phase(evaluator) -> None:
    from tests.evaluator.conftest import FAST

    settings = FAST.model_copy(update={"correctness_timeout_s": 4.0})
    result = await evaluate_fixture(evaluator, "relu_sum.py", "hangs.py", settings=settings, use_cache=False)
    assert (result.status, result.reason) == (Status.TIMEOUT, "correctness")
    assert "4 s budget" in result.message


@pytest.mark.anyio
async def test_stdout_is_never_parsed_for_results(evaluator) -> None:
    result = await evaluate_fixture(evaluator, "relu_sum.py", "raises.py", use_cache=False)
    assert result.status is Status.RUNTIME_ERROR
    assert '"speedup": 100' in result.logs.get("candidate", "")  # shown as a log, nothing more
    assert "kernel exploded" in result.message


@pytest.mark.anyio
async def test_a_wrong_output_after_checked_calls_that_passed_says_where_to_look(evaluator) -> None:
    """The debug role's prompt carries this message: an error that comes and goes is not a formula."""
    flaky = await evaluate_fixture(evaluator, "relu_sum.py", "wrong_now_and_then.py", use_cache=False)
    assert (flaky.status, flaky.reason) == (Status.WRONG_OUTPUT, "tolerance"), flaky.message
    assert "2 checked calls before it passed" in flaky.message and "race" in flaky.message
    steady = await evaluate_fixture(evaluator, "relu_sum.py", "off_by_tolerance.py", use_cache=False)
    assert steady.status is Status.WRONG_OUTPUT and "before it passed" not in steady.message


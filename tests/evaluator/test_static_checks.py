import pytest

from stark_mcp.evaluator.host.static_checks import check_candidate
from stark_mcp.records import Status

OK = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def test_clean_candidate_has_no_verdict() -> None:
    result = check_candidate(OK)
    assert result.status is None and not result.needs_build and result.flags == []


def test_syntax_error_is_a_load_error_with_the_line() -> None:
    result = check_candidate("class ModelNew(:\n  pass\n")
    assert (result.status, result.reason) == (Status.LOAD_ERROR, "syntax")
    assert "line 1" in result.message


def test_missing_model_new() -> None:
    result = check_candidate("class ModelNw:\n    pass\n")
    assert (result.status, result.reason) == (Status.LOAD_ERROR, "no_model_new")


@pytest.mark.parametrize("source", [
    "from problem import Model\nclass ModelNew(Model):\n    pass\n",
    "import problem\nclass ModelNew(problem.Model):\n    pass\n",
    "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.ref = Model()\n",
])
def test_using_the_reference_model_is_rejected(source: str) -> None:
    result = check_candidate(source)
    assert (result.status, result.reason) == (Status.REJECTED, "reference_model")


def test_defining_an_unused_model_class_is_fine() -> None:
    assert check_candidate("class Model:\n    pass\n" + OK).status is None


def test_build_detection_and_flags() -> None:
    source = OK + ("from torch.utils.cpp_extension import load_inline\n"
                   "m = load_inline(name='x', cpp_sources='', extra_cuda_cflags=['--use_fast_math', '-G'])\n")
    result = check_candidate(source)
    assert result.needs_build
    assert result.flags == ["fast_math", "debug_device_code"]

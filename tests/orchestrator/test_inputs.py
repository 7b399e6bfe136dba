"""What clients send, checked before anything is evaluated: one ModelNew rule with the evaluator."""

from __future__ import annotations

import pytest

from stark_mcp.evaluator import check_candidate
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.orchestrator.inputs import check_candidate_source

CLASS = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
ASSIGNED = "import torch\n\nclass _Fast(torch.nn.Module):\n    pass\n\nModelNew = _Fast\n"
IMPORTED = "from fastlib import Fused as ModelNew\n"
NESTED = "import torch\n\ndef make():\n    class ModelNew(torch.nn.Module):\n        pass\n"
MISSING = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
BROKEN = "class ModelNew(:\n"


@pytest.mark.parametrize("source", [CLASS, ASSIGNED, IMPORTED, BROKEN])
def test_sources_the_evaluator_would_load_are_let_through(source: str) -> None:
    check_candidate_source(source)
    assert check_candidate(source).reason != "no_model_new"


@pytest.mark.parametrize("source", [NESTED, MISSING])
def test_sources_without_a_top_level_model_new_are_refused_exactly_when_the_evaluator_would_say_so(
    source: str,
) -> None:
    with pytest.raises(InvalidInput, match="no top-level class ModelNew"):
        check_candidate_source(source)
    assert check_candidate(source).reason == "no_model_new"

from __future__ import annotations

import pytest

from stark_mcp.agents import AgentError, extract_source, parse_plan_reply, plan_text, split_plan_text
from stark_mcp.agents.parsing import code_blocks, parse_advice_reply
from stark_mcp.tree import AnchorError
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

from .samples import CANDIDATE, REFERENCE

FORWARD = "        y = torch.tanh(x)\n        return y * self.scale\n"
SCAFFOLD = REFERENCE.replace(FORWARD, f"        # {BEGIN_MARK}\n{FORWARD}        # {END_MARK}\n")
KERNEL_SPAN = CANDIDATE.replace(
    "torch::Tensor scaled_tanh(", f"// {BEGIN_MARK}\ntorch::Tensor scaled_tanh("
).replace("* s; }\n", f"* s; }}\n// {END_MARK}\n")


def plan_reply(scaffold: str,
    advice: str = "Fuse tanh and the scaling into one C++ loop over the tensor.") -> str:
    return f"## Advice\n{advice}\n\n## Scaffold\n```python\n{scaffold}```\n"


def test_plan_reply_yields_advice_scaffold_and_canonical_text() -> None:
    parsed = parse_plan_reply(plan_reply(SCAFFOLD), REFERENCE)
    assert parsed.advice == "Fuse tanh and the scaling into one C++ loop over the tensor."
    assert parsed.scaffold == SCAFFOLD.rstrip("\n")
    assert parsed.spans == 1
    assert parsed.text == plan_text(parsed.advice, parsed.scaffold)
    assert split_plan_text(parsed.text) == (parsed.advice, parsed.scaffold)


def test_plan_reply_with_spans_inside_kernel_strings() -> None:
    two = KERNEL_SPAN.replace(
        "        return _ext.scaled_tanh(x, self.scale)\n",
        f"        # {BEGIN_MARK}\n        return _ext.scaled_tanh(x, self.scale)\n        # {END_MARK}\n",
    )
    parsed = parse_plan_reply(plan_reply(two), CANDIDATE)
    assert parsed.spans == 2


def test_plan_reply_in_looser_shape_is_accepted() -> None:
    # Advice without headers, a preamble block in another language, and text after the scaffold.
    reply = (
        "I would fuse the two operators:\n\n```cpp\nout[i] = tanhf(x[i]) * s;\n```\n\n"
        f"```python\n{SCAFFOLD}```\nThis removes one temporary."
    )
    parsed = parse_plan_reply(reply, REFERENCE)
    assert "I would fuse the two operators" in parsed.advice
    assert "out[i] = tanhf(x[i]) * s;" in parsed.advice and "This removes one temporary." in parsed.advice
    assert parsed.spans == 1


def test_plan_reply_without_anchors_says_how_to_add_them() -> None:
    with pytest.raises(AnchorError, match="no anchors"):
        parse_plan_reply(plan_reply(REFERENCE), REFERENCE)


def test_plan_reply_that_edits_code_outside_comments_names_the_line() -> None:
    drifted = SCAFFOLD.replace("self.scale = scale", "self.scale = float(scale)")
    with pytest.raises(AnchorError) as info:
        parse_plan_reply(plan_reply(drifted), REFERENCE)
    assert "scaffold line 8 differs" in str(info.value) and "self.scale = float(scale)" in str(info.value)
    assert info.value.line == 8


def test_plan_reply_with_unclosed_span_is_rejected() -> None:
    unclosed = SCAFFOLD.replace(f"        # {END_MARK}\n", "")
    with pytest.raises(AnchorError, match="never closed"):
        parse_plan_reply(plan_reply(unclosed), REFERENCE)


def test_plan_reply_without_scaffold_block() -> None:
    with pytest.raises(AgentError, match="no scaffold.*heading before it is optional"):
        parse_plan_reply("## Advice\nFuse them.\n", REFERENCE)


def test_plan_reply_needs_no_scaffold_heading() -> None:
    parsed = parse_plan_reply(f"## Advice\nFuse them.\n\n```python\n{SCAFFOLD}```\n", REFERENCE)
    assert parsed.advice == "Fuse them." and parsed.spans >= 1


def test_plan_reply_without_advice() -> None:
    with pytest.raises(AgentError, match="no advice"):
        parse_plan_reply(f"## Scaffold\n```python\n{SCAFFOLD}```\n", REFERENCE)


def test_plan_reply_cut_off_inside_the_scaffold() -> None:
    with pytest.raises(AgentError, match="not closed"):
        parse_plan_reply(f"## Advice\nFuse.\n\n## Scaffold\n```python\n{SCAFFOLD[:200]}", REFERENCE)


def test_split_plan_text_accepts_a_bare_scaffold_and_rejects_plain_prose() -> None:
    assert split_plan_text(SCAFFOLD) == ("", SCAFFOLD.strip("\n"))
    with pytest.raises(AgentError, match="no scaffold"):
        split_plan_text("just make it faster")


def test_extract_source_takes_the_last_python_block() -> None:
    reply = f"First try:\n```python\nclass Draft: pass\n```\nFinal:\n```python\n{CANDIDATE}```\n"
    assert extract_source(reply) == CANDIDATE


def test_extract_source_accepts_untagged_fence_and_strips_marks() -> None:
    marked = KERNEL_SPAN
    source = extract_source(f"```\n{marked}```")
    assert BEGIN_MARK not in source and END_MARK not in source
    assert source == CANDIDATE


def test_extract_source_prefers_structured_output() -> None:
    assert extract_source("ignored", {"source": CANDIDATE}) == CANDIDATE
    assert extract_source("ignored", {"source": f"```python\n{CANDIDATE}```"}) == CANDIDATE
    with pytest.raises(AgentError, match="'source'"):
        extract_source(f"```python\n{CANDIDATE}```", {"code": CANDIDATE})


def test_extract_source_accepts_a_bare_python_reply() -> None:
    assert extract_source(CANDIDATE) == CANDIDATE


def test_reply_without_model_new_is_rejected() -> None:
    with pytest.raises(AgentError, match=r"reply has no class ModelNew \(classes found: Model\)"):
        extract_source(f"```python\n{REFERENCE}```")


def test_reply_with_syntax_error_names_the_line() -> None:
    broken = CANDIDATE.replace("def forward(self, x: torch.Tensor) -> torch.Tensor:", "def forward(self, x)")
    with pytest.raises(AgentError, match=r"does not parse as Python \(line 17"):
        extract_source(f"```python\n{broken}```")


def test_reply_with_only_cuda_blocks_is_rejected() -> None:
    with pytest.raises(AgentError, match=r"code blocks \(cuda\) but no ```python block"):
        extract_source("```cuda\n__global__ void k() {}\n```")


def test_prose_reply_is_rejected() -> None:
    with pytest.raises(AgentError, match="no fenced code block"):
        extract_source("I could not find a faster way to do this.")


def test_code_blocks_handles_longer_fences_and_unclosed_tail() -> None:
    text = "````python\nprint('```')\n````\ntext\n```python\nx = 1\n"
    blocks = code_blocks(text)
    assert [(b.lang, b.code, b.closed) for b in blocks] == [("python", "print('```')", True), ("python",
        "x = 1\n", False)]


def test_plan_on_the_reference_with_an_insertion_span() -> None:
    # What plan.md asks for on the root: an empty span after the imports plus the replaced body.
    scaffold = SCAFFOLD.replace(
        "import torch.nn as nn\n", f"import torch.nn as nn\n# {BEGIN_MARK}\n# {END_MARK}\n", 1
    )
    parsed = parse_plan_reply(plan_reply(scaffold), REFERENCE)
    assert parsed.spans == 2


def test_an_advice_only_plan_keeps_the_prose_and_refuses_code() -> None:
    plan = parse_advice_reply("## Advice\nFuse the two loops.\n")
    assert (plan.advice, plan.scaffold, plan.spans) == ("Fuse the two loops.", "", 0)
    assert plan.text == "## Advice\nFuse the two loops.\n"
    with pytest.raises(AgentError, match="has a code block"):
        parse_advice_reply("## Advice\nLike this:\n```python\nx = 1\n```\n")
    with pytest.raises(AgentError, match="no advice"):
        parse_advice_reply("## Advice\n\n")

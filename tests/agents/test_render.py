from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.agents import PLAN_FOCI, AgentError, Prompt, plan_text, render_prompt
from stark_mcp.agents.templates import PromptTemplates
from stark_mcp.problems import Problem
from stark_mcp.tree import Tree, TreeError
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

from .samples import REFERENCE

SCAFFOLD = REFERENCE.replace(
    "        y = torch.tanh(x)\n        return y * self.scale\n",
    f"        # {BEGIN_MARK}\n        y = torch.tanh(x)\n        return y * self.scale\n"
    f"        # {END_MARK}\n",
)
PLAN = plan_text("Write one C++ loop computing tanh(x) * scale.", SCAFFOLD)


def _render(role: str, problem: Problem, tree: Tree, node_id: str = "n1", window: list[str] | None = None,
            **kwargs: object) -> Prompt:
    return render_prompt(
        role,  # type: ignore[arg-type]
        problem=problem, tree=tree, node_id=node_id, window_ids=window or [], device="cuda", **kwargs,  # type: ignore[arg-type]
    )


def _in_order(text: str, *needles: str) -> None:
    positions = [text.index(n) for n in needles]
    assert positions == sorted(positions), list(zip(needles, positions, strict=True))


@pytest.mark.parametrize("role", ["plan", "code", "debug", "generalist"])
def test_every_role_has_the_paper_sections_in_order(role: str, problem: Problem, tree: Tree) -> None:
    node_id = "n2" if role == "debug" else "n1"
    plan = PLAN if role == "code" else None
    prompt = _render(role, problem, tree, node_id, ["n3"], plan=plan)
    assert prompt.role == role
    assert "Rules the evaluator enforces" in prompt.system and "Device notes" in prompt.system
    _in_order(prompt.prefix, "## Example", "class Model(nn.Module):", "class ModelNew(nn.Module):",
              "## Architecture to optimize: scaled_tanh", "y = torch.tanh(x)")
    _in_order(prompt.body, "## Latest attempt", f"### Attempt {node_id} ", "## History",
              "### Attempt n0 (the reference", "### Attempt n3 ", "## Instruction")
    text = prompt.text
    _in_order(text, "# System", prompt.system[:60], "# Context", "## Example", "# Task", "## Latest attempt")
    assert prompt.node_ids == [node_id, "n0", "n3"]


def test_role_instructions_differ_and_state_the_output_format(problem: Problem, tree: Tree) -> None:
    plan = _render("plan", problem, tree).body
    assert "You are the planner" in plan and "## Scaffold" in plan and f"# {BEGIN_MARK}" in plan
    code = _render("code", problem, tree, plan=PLAN).body
    assert "You are the coder" in code and "one fenced ```python code block" in code
    debug = _render("debug", problem, tree, "n2").body
    assert "You are the debugger" in debug and "latest attempt (n2) failed" in debug
    general = _render("generalist", problem, tree, "n2").body
    assert "only engineer" in general and "its status is\nbuild_error" in general


def test_window_entries_carry_their_observations(problem: Problem, tree: Tree) -> None:
    body = _render("plan", problem, tree, "n1", ["n2", "n3"]).body
    history = body[body.index("## History"): body.index("## Instruction")]
    # The root shows the eager time to beat; each attempt its logs, verdict and plan advice.
    assert "median 2.5 ms" in history
    assert "### Attempt n2 (planned change, parent: n1)" in history
    assert "expected identifier before ')' token" in history
    assert "status: build_error (compiler)" in history
    # The latest attempt's plan is labelled as applied: a coder once read it as the step's own plan.
    followed = "Plan it followed (already applied in the source below; not this step's plan): "
    assert followed + "Vectorize the loop." in history
    assert "### Attempt n3 (debug fix, parent: n1)" in history
    assert "status: wrong_output (tolerance)" in history and "rel-norm error 0.31" in history
    latest = body[body.index("## Latest attempt"): body.index("## History")]
    assert "speedup over compile_default: 1.5x" in latest and "flags: fast-math" in latest
    assert "linking scaled_tanh.so" in latest
    assert "_ext.scaled_tanh(x, self.scale)" in latest


def test_window_ids_are_deduplicated_and_skip_i_and_root(problem: Problem, tree: Tree) -> None:
    prompt = _render("plan", problem, tree, "n1", ["n0", "n1", "n3", "n2", "n3"])
    assert prompt.node_ids == ["n1", "n0", "n3", "n2"]
    assert prompt.body.count("### Attempt n3 ") == 1


def test_planning_on_the_root_shows_no_duplicate_history(problem: Problem, tree: Tree) -> None:
    prompt = _render("plan", problem, tree, "n0")
    assert prompt.node_ids == ["n0"]
    assert "No earlier attempts" in prompt.body
    assert "### Attempt n0 (the reference architecture)" in prompt.body


def test_unknown_window_node_is_an_error(problem: Problem, tree: Tree) -> None:
    with pytest.raises(TreeError, match="n9"):
        _render("plan", problem, tree, "n1", ["n9"])


def test_code_prompt_includes_advice_and_scaffold(problem: Problem, tree: Tree) -> None:
    body = _render("code", problem, tree, "n0", plan=PLAN).body
    _in_order(body, "## Latest attempt", "### The plan for this step",
              "Write one C++ loop computing tanh(x) * scale.", f"# {BEGIN_MARK}", f"# {END_MARK}",
              "## History")


def test_code_prompt_accepts_a_bare_scaffold_as_plan(problem: Problem, tree: Tree) -> None:
    body = _render("code", problem, tree, "n0", plan=SCAFFOLD).body
    assert f"# {BEGIN_MARK}" in body and "(none given: follow the marked regions)" in body


@pytest.mark.parametrize("plan", [None, "", "   "])
def test_code_prompt_without_plan_is_an_error(plan: str | None, problem: Problem, tree: Tree) -> None:
    with pytest.raises(AgentError, match="needs the plan"):
        _render("code", problem, tree, plan=plan)


def test_focus_reaches_the_plan_instruction_only_when_given(problem: Problem, tree: Tree) -> None:
    focused = _render("plan", problem, tree, focus=PLAN_FOCI[2]).body
    assert f"consider this theme first: {PLAN_FOCI[2]}." in focused
    assert "consider this theme first" not in _render("plan", problem, tree).body
    assert len(set(PLAN_FOCI)) == len(PLAN_FOCI) >= 6
    with pytest.raises(AgentError, match="focus"):
        _render("debug", problem, tree, "n2", focus=PLAN_FOCI[0])


def test_device_selects_guidance_and_example(problem: Problem, tree: Tree) -> None:
    cuda = render_prompt("plan", problem=problem, tree=tree, node_id="n1", window_ids=[], device="cuda:1")
    cpu = render_prompt("plan", problem=problem, tree=tree, node_id="n1", window_ids=[], device="cpu")
    assert "cuda_sources" in cuda.system and "extern \"C\"" in cuda.system
    assert "at::parallel_for" in cpu.system and "no CUDA" in cpu.system and "on one thread" in cpu.system
    assert "__global__" in cuda.prefix and "__global__" not in cpu.prefix
    assert "at::parallel_for" in cpu.prefix
    # The prefix is the same for every role, so providers can cache it across calls.
    debug = render_prompt("debug", problem=problem, tree=tree, node_id="n2", window_ids=[], device="cuda")
    assert debug.prefix == cuda.prefix and debug.system == cuda.system
    with pytest.raises(AgentError, match="resolve 'auto'"):
        render_prompt("plan", problem=problem, tree=tree, node_id="n1", window_ids=[], device="auto")


def test_triton_language_selects_triton_guidance_example_and_wording(problem: Problem, tree: Tree) -> None:
    cuda = _render("code", problem, tree, "n0", plan=PLAN)
    triton = _render("code", problem, tree, "n0", plan=PLAN, language="triton")
    assert "@triton.jit" in triton.system and "tl.constexpr" in triton.system and "autotune" in triton.system
    assert "cuda_sources" not in triton.system and "nvcc" not in triton.system
    assert "Write the kernels in Triton" in triton.system and "Write the kernels in CUDA C++" in cuda.system
    assert "@triton.autotune" in triton.prefix and "__global__" not in triton.prefix
    assert "kernels (Triton" in triton.body and "kernels (CUDA C++" in cuda.body
    assert triton.prefix != cuda.prefix
    with pytest.raises(AgentError, match="no prompt guidance for language 'rust'"):
        render_prompt("plan", problem=problem, tree=tree, node_id="n1", window_ids=[], device="cuda",
                      language="rust")


def test_unknown_role_is_an_error(problem: Problem, tree: Tree) -> None:
    with pytest.raises(AgentError, match="unknown role"):
        _render("review", problem, tree)


def test_to_request_and_retry(problem: Problem, tree: Tree) -> None:
    prompt = _render("plan", problem, tree)
    request = prompt.to_request(max_tokens=1234)
    assert (request.role, request.system, request.prefix, request.body, request.max_tokens) == (
        "plan", prompt.system, prompt.prefix, prompt.body, 1234
    )
    again = prompt.with_retry(["no anchors", "line 3 drifted"])
    assert again.body.startswith(prompt.body)
    _in_order(again.body, "## Your previous reply was rejected", "- attempt 1: no anchors",
        "- attempt 2: line 3 drifted")


def test_override_changes_rendering_and_missing_placeholder_fails(
    problem: Problem, tree: Tree, tmp_path: Path
) -> None:
    templates = PromptTemplates(tmp_path)
    (tmp_path / "debug.md").write_text("Fix $node_id on $device, please.\n")
    body = _render("debug", problem, tree, "n2", templates=templates).body
    assert body.endswith("## Instruction\n\nFix n2 on cuda, please.")
    assert "Fix n2" not in _render("debug", problem, tree, "n2").body  # the packaged set is untouched
    (tmp_path / "debug.md").write_text("Fix $node_id within $deadline.\n")
    with pytest.raises(AgentError, match=r"debug.md uses \$deadline"):
        _render("debug", problem, tree, "n2", templates=templates)


def test_a_retry_uses_the_prompts_own_templates(problem: Problem, tree: Tree, tmp_path: Path) -> None:
    (tmp_path / "retry.md").write_text("\nRejected: $errors\n")
    prompt = _render("debug", problem, tree, "n2", templates=PromptTemplates(tmp_path))
    assert prompt.with_retry(["no code"]).body.endswith("Rejected: - attempt 1: no code")



def test_generalist_prompt_carries_the_focus_theme(problem: Problem, tree: Tree) -> None:
    focused = _render("generalist", problem, tree, focus=PLAN_FOCI[2]).body
    assert f"consider this theme first: {PLAN_FOCI[2]}." in focused
    assert PLAN_FOCI[2] not in _render("generalist", problem, tree).body


def test_prompts_say_what_a_host_found_hard_on_the_reference(problem: Problem, tree: Tree) -> None:
    """Frictions from the kernel-quality rounds (docs/benchmarks/kernels.md): planners marked
    ``super(Model, self)`` and the test code by hand, and avoided cuDNN because the rules read as
    if the reference's own TF32 convolutions were forbidden to a candidate."""
    system = _render("plan", problem, tree).system
    assert "the reference's own float32 error" in system
    assert "cuDNN convolutions may use TF32" in " ".join(system.split())
    plan = " ".join(_render("plan", problem, tree, "n0").body.split())
    assert "`super(Model, self)`" in plan and "`get_inputs`" in plan and "need no marks" in plan
    code = " ".join(_render("code", problem, tree, "n0", plan=PLAN).body.split())
    assert "any `super(Model, self)`" in code and "leave out the test code" in code

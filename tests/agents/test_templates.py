from __future__ import annotations

from pathlib import Path

import pytest

from stark_mcp.agents import AgentError, fill, load_template
from stark_mcp.agents.templates import PROMPTS_ENV, PromptTemplates, builtin_prompts_dir, placeholders

SHIPPED = [
    "system.md", "device_cuda.md", "device_cpu.md", "device_triton.md", "prefix.md", "body.md",
    "entry.md", "root.md", "scaffold.md", "profile.md", "focus.md", "retry.md", "plan.md", "code.md",
    "debug.md", "generalist.md",
    "plan_advice.md", "code_advice.md", "advice.md",
    "example_reference.py", "example_kernel_cuda.py", "example_kernel_cpu.py",
    "example_kernel_triton.py", "README.md",
]


def test_builtin_folder_is_the_repository_prompts_folder() -> None:
    folder = builtin_prompts_dir()
    for name in SHIPPED:
        assert (folder / name).is_file(), name


def test_fill_substitutes_and_leaves_dollar_signs_in_values_alone() -> None:
    text = fill("focus.md", focus="tiling with $shared memory")
    assert "consider this theme first: tiling with $shared memory." in text


def test_missing_placeholder_names_it(tmp_path: Path) -> None:
    (tmp_path / "focus.md").write_text("Theme: $focus, budget: $budget\n")
    with pytest.raises(AgentError, match=r"uses \$budget, which is not provided.*\$focus"):
        PromptTemplates(tmp_path).fill("focus.md", focus="fusion")


def test_stray_dollar_reports_its_line(tmp_path: Path) -> None:
    (tmp_path / "focus.md").write_text("line one\ncosts $5 for $focus\n")
    with pytest.raises(AgentError, match=r"line 2: .*write \$\$"):
        PromptTemplates(tmp_path).fill("focus.md", focus="fusion")


def test_override_folder_wins_file_by_file(tmp_path: Path) -> None:
    (tmp_path / "plan.md").write_text("Custom planner for $node_id.\n")
    templates = PromptTemplates(tmp_path)
    assert templates.path("plan.md") == tmp_path / "plan.md"
    assert templates.fill("plan.md", node_id="n4") == "Custom planner for n4."
    # Files the override folder lacks still come from the packaged set.
    assert templates.path("code.md") == builtin_prompts_dir() / "code.md"


def test_override_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match=f"{PROMPTS_ENV}=.*missing is not a directory"):
        PromptTemplates(tmp_path / "missing")


@pytest.mark.parametrize("name", ["../pyproject.toml", "sub/plan.md", ".hidden", "nope.md"])
def test_bad_or_unknown_template_names(name: str) -> None:
    with pytest.raises(AgentError):
        load_template(name)


def test_role_templates_use_only_documented_placeholders() -> None:
    documented = {"node_id", "begin", "end", "focus_hint", "latest_status", "device", "problem_name",
                  "language", "language_name"}
    for role in ("plan", "code", "debug", "generalist", "plan_advice", "code_advice"):
        used = placeholders(f"{role}.md")
        assert used <= documented, (role, used - documented)
    assert placeholders("plan.md") >= {"begin", "end", "focus_hint", "node_id"}
    assert placeholders("entry.md") == {"node_id", "action", "parent_id", "plan_advice", "source",
        "observations"}


def test_readme_lists_every_template() -> None:
    readme = load_template("README.md")
    for name in SHIPPED:
        if name != "README.md":
            assert f"`{name}`" in readme, name


def test_installed_layout_is_found_before_a_checkout(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "stark_mcp"
    (package / "_prompts").mkdir(parents=True)
    (package / "_prompts" / "system.md").write_text("installed\n")
    assert builtin_prompts_dir(package) == package / "_prompts"
    checkout = tmp_path / "repo" / "stark_mcp"
    (tmp_path / "repo" / "prompts").mkdir(parents=True)
    (tmp_path / "repo" / "prompts" / "system.md").write_text("checkout\n")
    assert builtin_prompts_dir(checkout) == tmp_path / "repo" / "prompts"
    with pytest.raises(AgentError, match=f"cannot find the prompt templates.*{PROMPTS_ENV}"):
        builtin_prompts_dir(tmp_path / "empty" / "stark_mcp")

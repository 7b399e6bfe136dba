"""Assemble a role's prompt from the templates, the problem and the tree.

Layout (the paper's): ``system`` = system.md with the device's guidance; ``prefix`` =
the in-context example pair and the problem's architecture, identical for every call of
a run so providers can cache it; ``body`` = the latest attempt (node i, and for the code
role the plan's advice and scaffold), the history (the root and the window's nodes, each
with its observations) and the role's instruction.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, PrivateAttr

from stark_mcp.agents.errors import AgentError
from stark_mcp.agents.observations import execution_result, render_observations
from stark_mcp.agents.parsing import ADVICE_HEADER, split_plan_text
from stark_mcp.agents.profiles import profiled_nodes, render_profile_table
from stark_mcp.agents.templates import PromptTemplates, packaged
from stark_mcp.llm import LLMRequest
from stark_mcp.problems import Problem
from stark_mcp.records import Action, Node
from stark_mcp.tree import Tree
from stark_mcp.tree.anchors import BEGIN_MARK, END_MARK

RoleName = Literal["plan", "code", "debug", "generalist"]
ROLE_NAMES: tuple[str, ...] = ("plan", "code", "debug", "generalist")

# Themes a caller can rotate through to vary plans, in place of a high sampling temperature.
PLAN_FOCI: tuple[str, ...] = (
    "memory coalescing: consecutive threads reading and writing consecutive addresses",
    "operator fusion: one kernel instead of several, so intermediates never reach main memory",
    "tiling through shared memory and registers, so each loaded value is reused many times",
    "vectorized memory access: wide loads and stores such as float4 on aligned data",
    "occupancy and launch configuration: block size, grid size, registers and shared memory per block",
    "an algorithmic rewrite: less work, a better reduction order, or exploiting the problem's structure",
    "using cuBLAS or cuDNN for the heavy operator, with custom kernels fused around it",
)

NO_HISTORY = "No earlier attempts: the latest attempt is the reference itself."
_ACTION_LABELS = {Action.PLAN: "planned change", Action.DEBUG: "debug fix", Action.ROOT: "reference"}
_SECTION_HEADERS = ("# System", "# Context", "# Task")


class Prompt(BaseModel):
    """One rendered prompt for one role and node, split the way prompt caching wants it."""

    role: str
    system: str
    prefix: str
    body: str
    node_ids: list[str]

    _templates: PromptTemplates = PrivateAttr(default_factory=packaged)

    @property
    def text(self) -> str:
        """The whole prompt as one string, for hosts that take a single message."""
        parts = (self.system, self.prefix, self.body)
        sections = zip(_SECTION_HEADERS, parts, strict=True)
        return "\n\n".join(f"{header}\n\n{part}" for header, part in sections) + "\n"

    def to_request(self, max_tokens: int | None = None,
        json_schema: dict[str, Any] | None = None) -> LLMRequest:
        return LLMRequest(
            role=self.role, system=self.system, prefix=self.prefix, body=self.body,
            max_tokens=max_tokens, json_schema=json_schema,
        )

    def with_retry(self, errors: list[str]) -> Prompt:
        """The same prompt with the reasons earlier replies were rejected appended to the body."""
        listed = "\n".join(f"- attempt {i}: {e}" for i, e in enumerate(errors, start=1))
        return self.model_copy(update={"body": self.body + self._templates.fill("retry.md", errors=listed)})


# Per kernel language: its device notes, its version of the in-context example, and its name.
LANGUAGE_FILES = {
    "cuda": ("device_cuda.md", "example_kernel_cuda.py", "CUDA C++"),
    "triton": ("device_triton.md", "example_kernel_triton.py", "Triton"),
    "cpp": ("device_cpu.md", "example_kernel_cpu.py", "C++"),
}


def language_of(device: str, language: str | None) -> str:
    """The run's language, or the device's default (C++ on the CPU, CUDA on a GPU)."""
    if language is None:
        return "cpp" if device_kind(device) == "cpu" else "cuda"
    if language not in LANGUAGE_FILES:
        raise AgentError(f"no prompt guidance for language {language!r}: use {', '.join(LANGUAGE_FILES)}")
    return language


def device_kind(device: str) -> str:
    """'cuda' or 'cpu' for a resolved device string such as 'cuda', 'cuda:1' or 'cpu'."""
    kind = device.split(":", 1)[0].strip().lower()
    if kind not in ("cuda", "cpu"):
        raise AgentError(
            f"no prompt guidance for device {device!r}: expected cuda or cpu (resolve 'auto' first)"
        )
    return kind


def render_system(device: str, templates: PromptTemplates, language: str | None = None) -> str:
    guidance, _example, name = LANGUAGE_FILES[language_of(device, language)]
    return templates.fill(
        "system.md", device=device_kind(device), device_guidance=templates.fill(guidance), language_name=name
    )


def render_prefix(
    problem: Problem, device: str, templates: PromptTemplates, language: str | None = None
) -> str:
    _guidance, example, _name = LANGUAGE_FILES[language_of(device, language)]
    return templates.fill(
        "prefix.md",
        example_reference=templates.load("example_reference.py"),
        example_kernel=templates.load(example),
        architecture=problem.source.strip("\n"),
        problem_name=problem.name,
    )


def render_entry(node: Node, templates: PromptTemplates) -> str:
    """One node as the history shows it: source, the plan it followed, observations."""
    if node.action is Action.ROOT:
        # The reference needs no compiler observation; its execution result carries the time to beat.
        measured = execution_result(node.evaluation) if node.evaluation is not None else "Not measured yet."
        return templates.fill("root.md", node_id=node.id, observations=measured)
    observations = render_observations(node)
    return templates.fill(
        "entry.md",
        node_id=node.id,
        action=_ACTION_LABELS.get(node.action, node.action.value),
        parent_id=node.parent_id or "none",
        plan_advice=_advice_of(node),
        source=node.source.strip("\n"),
        observations=observations,
    )


def _advice_of(node: Node) -> str:
    if not node.plan:
        return "none recorded."
    return _advice_text(node.plan) or "see the marked regions of its scaffold."


def _advice_text(plan: str) -> str:
    """The advice of a plan with a scaffold, or of an advice-only plan (no-anchors ablation)."""
    try:
        advice, _ = split_plan_text(plan)
    except AgentError:
        advice = ADVICE_HEADER.sub("", plan).strip()
    return advice


def render_prompt(
    role: RoleName,
    *,
    problem: Problem,
    tree: Tree,
    node_id: str,
    window_ids: list[str],
    device: str,
    plan: str | None = None,
    focus: str | None = None,
    templates: PromptTemplates | None = None,
    anchored: bool = True,
    language: str | None = None,
    memories: str | None = None,
) -> Prompt:
    """The prompt for ``role`` acting on node ``node_id`` with the given context window.

    ``language`` (cuda, triton or cpp; default: the device's) picks the device notes and the
    in-context example.
    ``plan`` (advice and anchored scaffold) is required for ``code``; ``focus`` (one of
    ``PLAN_FOCI`` or the caller's own theme) applies to ``plan`` and ``generalist``.
    ``templates`` default to the packaged set (a run's own come from ``STARK_PROMPTS_DIR``).
    ``memories`` (the plan role only): what worked on similar problems in earlier runs, rendered
    by ``stark_mcp.memory``; shown after the profile.
    ``anchored=False`` (the no-anchors ablation): the plan role is asked for advice only
    (``plan_advice.md``) and the code role gets that advice without a scaffold (``code_advice.md``).
    """
    templates = templates or packaged()
    language = language_of(device, language)
    if role not in ROLE_NAMES:
        raise AgentError(f"unknown role {role!r}; expected one of {', '.join(ROLE_NAMES)}")
    if role == "code" and not (plan and plan.strip()):
        raise AgentError("the code prompt needs the plan (advice and anchored scaffold) it realizes")
    if focus is not None and role not in ("plan", "generalist"):
        raise AgentError(f"a focus theme applies to the plan and generalist roles, not {role}")
    node = tree.get(node_id)
    root = tree.root

    latest = render_entry(node, templates)
    if role == "code" and not anchored:
        assert plan is not None
        latest += "\n\n" + templates.fill("advice.md", advice=_advice_text(plan))
    elif role == "code":
        assert plan is not None
        advice, scaffold = split_plan_text(plan)
        latest += "\n\n" + templates.fill(
            "scaffold.md", advice=advice or "(none given: follow the marked regions)",
            scaffold=scaffold, begin=BEGIN_MARK, end=END_MARK,
        )

    history_ids = _history_ids(node.id, root.id, window_ids)
    history = [render_entry(tree.get(i), templates) for i in history_ids]
    if role == "plan" or (role == "generalist" and not node.has_bug):
        table = render_profile_table(profiled_nodes(node, [tree.get(i) for i in history_ids]))
        if table:
            latest += "\n\n" + templates.fill("profile.md", table=table)
    if role == "plan" and memories:
        latest += "\n\n" + templates.fill("memory.md", entries=memories)

    status = node.status.value if node.status is not None else "not evaluated"
    instruction = templates.fill(
        f"{role}_advice.md" if not anchored and role in ("plan", "code") else f"{role}.md",
        node_id=node.id,
        begin=BEGIN_MARK,
        end=END_MARK,
        focus_hint=_focus_hint(focus, templates),
        latest_status="reference" if node.action is Action.ROOT else status,
        device=device_kind(device),
        problem_name=problem.name,
        language=language,
        language_name=LANGUAGE_FILES[language][2],
    )
    body = templates.fill(
        "body.md",
        latest=latest,
        history="\n\n".join(history) if history else NO_HISTORY,
        instruction=instruction,
    )
    prompt = Prompt(
        role=role,
        system=render_system(device, templates, language),
        prefix=render_prefix(problem, device, templates, language),
        body=body,
        node_ids=_dedupe([node.id, root.id, *history_ids]),
    )
    prompt._templates = templates
    return prompt


def _focus_hint(focus: str | None, templates: PromptTemplates) -> str:
    if not (focus and focus.strip()):
        return ""
    return "\n" + templates.fill("focus.md", focus=focus.strip()) + "\n"


def _history_ids(node_id: str, root_id: str, window_ids: list[str]) -> list[str]:
    # The root always opens the history (with the eager runtime to beat) unless it is node i.
    ids = [root_id] if node_id != root_id else []
    return _dedupe(ids + [i for i in window_ids if i not in (node_id, root_id)])


def _dedupe(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))

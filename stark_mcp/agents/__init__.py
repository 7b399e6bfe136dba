"""Role prompts and reply parsing for the plan, code, debug and generalist agents.

``render_prompt`` builds a role's prompt from the templates in ``prompts/``; the agents
send it through an ``LLMBackend`` and parse the reply (``parse_plan_reply``,
``extract_source``), re-asking with the exact complaint when a reply is unusable.
"""

from stark_mcp.agents.errors import AgentError
from stark_mcp.agents.observations import render_observations
from stark_mcp.agents.parsing import PlanReply, extract_source, parse_plan_reply, plan_text, split_plan_text
from stark_mcp.agents.render import PLAN_FOCI, ROLE_NAMES, Prompt, RoleName, render_prompt
from stark_mcp.agents.roles import (
    CodeAgent,
    DebugAgent,
    Exchange,
    GeneralistAgent,
    PlanAgent,
    total_usage,
)
from stark_mcp.agents.templates import PROMPTS_ENV, PromptTemplates, fill, load_template

__all__ = [
    "PLAN_FOCI",
    "PROMPTS_ENV",
    "ROLE_NAMES",
    "AgentError",
    "CodeAgent",
    "DebugAgent",
    "Exchange",
    "GeneralistAgent",
    "PlanAgent",
    "PlanReply",
    "PromptTemplates",
    "Prompt",
    "RoleName",
    "extract_source",
    "fill",
    "load_template",
    "parse_plan_reply",
    "plan_text",
    "render_observations",
    "render_prompt",
    "split_plan_text",
    "total_usage",
]

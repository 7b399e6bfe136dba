"""Every ``STARK_*`` variable the README documents is read once, into ``Settings``, and honoured."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp.cli import app
from stark_mcp.config import ConfigError, Settings
from stark_mcp.llm import backend_from_settings
from stark_mcp.orchestrator.session import open_service
from stark_mcp.problems import problem_from_source
from stark_mcp.records import Evaluation, Status

PROBLEM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
    "def get_inputs():\n    return [torch.ones(4)]\n\ndef get_init_inputs():\n    return []\n"
)


def test_paths_follow_home_unless_named(tmp_path: Path) -> None:
    home = Settings.from_env({"STARK_HOME": str(tmp_path / "home")})
    assert (home.database, home.cache) == (tmp_path / "home" / "stark.db", tmp_path / "home" / "cache")
    named = Settings.from_env({
        "STARK_HOME": str(tmp_path / "home"), "STARK_DB_PATH": str(tmp_path / "my.db"),
        "STARK_CACHE_DIR": str(tmp_path / "cache"),
    })
    assert (named.database, named.cache) == (tmp_path / "my.db", tmp_path / "cache")
    assert named.toolchain == tmp_path / "cache" / "toolchain"
    shared = Settings.from_env({"STARK_CACHE_DIR": str(tmp_path / "cache"),
                                "STARK_TOOLCHAIN_DIR": str(tmp_path / "shared")})
    assert (shared.cache, shared.toolchain) == (tmp_path / "cache", tmp_path / "shared")


def test_stark_toolchain_dir_is_where_the_evaluator_keeps_its_headers(tmp_path: Path) -> None:
    from stark_mcp.orchestrator.session import open_evaluator

    settings = Settings.from_env({"STARK_HOME": str(tmp_path / "home"),
                                  "STARK_TOOLCHAIN_DIR": str(tmp_path / "shared")})
    evaluator = open_evaluator(settings)
    assert evaluator.extensions.toolchain_dir == tmp_path / "shared"
    assert str(tmp_path / "shared") in evaluator.hidden  # no candidate reads or writes it


def test_every_variable_lands_in_its_field(tmp_path: Path) -> None:
    settings = Settings.from_env({
        "STARK_DEVICE": "CPU", "STARK_LOG_LEVEL": "debug", "STARK_LLM": "scripted:r.jsonl",
        "STARK_MODEL": "claude-opus-4-8", "STARK_MODEL_DEBUG": "claude-haiku-4-5", "STARK_MODEL_CODE": "",
        "STARK_PRICES": str(tmp_path / "p.json"), "STARK_PROMPTS_DIR": str(tmp_path),
        "STARK_MCP_TOKEN": "s3cret", "UNRELATED": "x",
    })
    assert (settings.device, settings.log_level, settings.llm) == ("cpu", "DEBUG", "scripted:r.jsonl")
    assert settings.model == "claude-opus-4-8" and settings.role_models == {"debug": "claude-haiku-4-5"}
    assert (settings.prices, settings.prompts_dir) == (tmp_path / "p.json", tmp_path)
    assert settings.mcp_token is not None and settings.mcp_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize("variable,value", [("STARK_DEVICE", "tpu"), ("STARK_LOG_LEVEL", "LOUD")])
def test_a_bad_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{variable}='{value}' is not usable"):
        Settings.from_env({variable: value})


def test_the_cli_reads_the_settings_once_and_applies_the_log_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STARK_HOME", str(tmp_path))
    monkeypatch.setenv("STARK_LOG_LEVEL", "ERROR")
    root = logging.getLogger()
    before = root.level
    try:
        result = CliRunner().invoke(app, ["runs"])
        assert result.exit_code == 0, result.output
        assert "no runs yet" in result.output
        assert root.level == logging.ERROR
    finally:
        root.setLevel(before)
    monkeypatch.setenv("STARK_DEVICE", "tpu")
    refused = CliRunner().invoke(app, ["runs"])
    assert refused.exit_code == 2 and "STARK_DEVICE='tpu' is not usable" in refused.output


def test_the_server_takes_its_log_level_from_the_settings(tmp_path: Path) -> None:
    from stark_mcp.server import build_server

    server = build_server(Settings(home=tmp_path, log_level="ERROR"))
    assert server.settings.log_level == "ERROR"


def test_stark_device_is_the_default_device(tmp_path: Path) -> None:
    # No CUDA here: a run or evaluation that takes the default device from STARK_DEVICE=cuda says so.
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(PROBLEM.replace("class Model(", "class ModelNew("))
    runner = CliRunner()
    env = {"STARK_HOME": str(tmp_path / "home"), "STARK_DEVICE": "cuda"}
    result = runner.invoke(app, ["eval", str(problem), str(candidate), "--baselines", "eager"], env=env)
    assert result.exit_code == 2 and "no CUDA device" in result.output, result.output


@pytest.mark.xdist_group("anthropic_sdk")  # builds the real backend: on the worker that imports the SDK
def test_stark_prices_reach_the_anthropic_backend(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"my-model": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 0}}')
    settings = Settings.from_env({"STARK_PRICES": str(prices), "STARK_MODEL": "my-model"})
    backend = backend_from_settings(settings, api_key="sk-ant-test")
    assert backend.prices.price("my-model").output == 2  # type: ignore[attr-defined]
    assert backend.profiles["plan"].model == "my-model"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_stark_prompts_dir_shapes_the_runs_prompts(tmp_path: Path) -> None:
    overrides = tmp_path / "prompts"
    overrides.mkdir()
    (overrides / "plan.md").write_text("Custom planner for $node_id.\n")
    settings = Settings.from_env({"STARK_HOME": str(tmp_path / "home"), "STARK_PROMPTS_DIR": str(overrides)})
    problem = problem_from_source(PROBLEM, name="double")
    async with open_service(settings) as service:
        run = await service.store.create_run(
            problem=problem, device="cpu", policy={"name": "stark"}, budget=2, seed=1,
            root_evaluation=Evaluation(status=Status.PASSED),
        )
        prompt = await service.build_context(run.id, "n0", "plan")
    assert prompt.body.endswith("Custom planner for n0.")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

import os

import pytest

from stark_mcp.evaluator.sandbox.env import looks_secret, scrub_env
from stark_mcp.problems import load_problem
from stark_mcp.records import Status
from tests.evaluator.conftest import FIXTURES


def test_secrets_and_unknown_variables_are_dropped() -> None:
    env = scrub_env({
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0", "TORCH_EXTENSIONS_DIR": "/x", "OMP_NUM_THREADS": "2",
        "ANTHROPIC_API_KEY": "sk-ant", "AWS_SECRET_ACCESS_KEY": "a", "GITHUB_TOKEN": "g",
        "DB_PASSWORD": "p", "TORCH_HUB_TOKEN": "t", "RANDOM_APP_SETTING": "r", "CUDA_AUTH_COOKIE": "c",
    })
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "0" and env["LC_ALL"] == "C"
    for gone in ("ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DB_PASSWORD",
                 "TORCH_HUB_TOKEN", "RANDOM_APP_SETTING", "CUDA_AUTH_COOKIE"):
        assert gone not in env


def test_overrides_win() -> None:
    env = scrub_env({"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": "9.0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "hf_token", "MY_Credentials", "SSH_PRIVATE"])
def test_secret_names(name: str) -> None:
    assert looks_secret(name)


PROBE = '''
import os, tempfile
import torch, torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        leaked = [k for k in os.environ if "SECRET" in k or "API_KEY" in k]
        if leaked:
            raise RuntimeError(f"saw {leaked}")
        if os.getcwd().startswith(REPO) or not os.getcwd().startswith(tempfile.gettempdir()):
            raise RuntimeError(f"cwd is {os.getcwd()}")
        return torch.relu(a + b)
'''


@pytest.mark.anyio
async def test_candidate_process_sees_no_secrets_and_a_private_cwd(evaluator, monkeypatch) -> None:
    monkeypatch.setenv("STARK_TEST_SECRET_VALUE", "hunter2")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    source = PROBE.replace("REPO", repr(str(FIXTURES.parents[2])))
    result = await evaluator.evaluate(load_problem(str(FIXTURES / "relu_sum.py")), source, device="cpu")
    assert result.status is Status.PASSED, result.message
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-test"

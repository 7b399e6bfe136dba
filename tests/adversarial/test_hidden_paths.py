"""Every jail a candidate's code reaches hides the evaluator's hidden folders: the builder that imports
it, the compile jail that compiles its sources, the runner that calls it. Each variant reads a secret
from a hidden folder and tries to bring it out through what the evaluation reports (an exception, a
compiler diagnostic); the secret must appear nowhere in the verdict.

The folder lies in the checkout, which every jail can read (it is an import root), so only the hiding
keeps it out: a data directory such as ``STARK_HOME=/srv/stark`` is in the same position.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from stark_mcp.evaluator import EvalSettings, Evaluator
from stark_mcp.problems import load_problem
from tests.adversarial import cases
from tests.toolchain import shared_toolchain

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = EvalSettings(
    baselines=("eager",), trials=2, min_calls=10, min_time_s=0.002, max_time_s=0.1, load_timeout_s=90.0
)
pytestmark = pytest.mark.anyio

HEADER = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline  # a builder imports every source that names it

SECRET = SECRET_PATH


def steal():
    try:
        with open(SECRET) as fh:
            return fh.read()
    except OSError as exc:
        return ""
'''

# What the compile-jail variants run if their extension builds: the model calls it.
EXT_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return ext.same(torch.relu(a * self.scale + b))
'''

VARIANTS = {
    # the builder imports the module: what it raises there becomes the load error's message
    "import": HEADER + '''
stolen = steal()
if stolen:
    raise RuntimeError("stolen at import: " + stolen)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.relu(a * self.scale + b)
''',
    # the compile jail reads what the source includes: a diagnostic quotes the line it choked on
    "include": HEADER + '''
ext = load_inline(
    name="stark_adv_include_secret",
    cpp_sources='#include "' + SECRET + '"\\ntorch::Tensor same(torch::Tensor x) { return x; }\\n',
    functions=["same"],
)
''' + EXT_MODEL,
    # the same jail, by a flag instead of the source: gcc reads a forced include before anything else
    "forced_include": HEADER + '''
ext = load_inline(
    name="stark_adv_forced_include_secret",
    cpp_sources="torch::Tensor same(torch::Tensor x) { return x; }\\n",
    functions=["same"],
    extra_cflags=["-include", SECRET],
)
''' + EXT_MODEL,
    # the same jail, by a response file: gcc reads its options from the named file, and quotes an
    # option it does not know (the file's first word) in its error. A source without torch's header:
    # a response file turns the precompiled header off, and the leak, if any, is in gcc's first words.
    "response_file": HEADER + '''
ext = load_inline(
    name="stark_adv_response_file_secret",
    cpp_sources="static int same(int x) { return x; }\\n",
    extra_cflags=["@" + SECRET],
    no_implicit_headers=True,
)
''' + EXT_MODEL,
    # the same jail, by a directory: a quote-include directory flag makes gcc find the file by its
    # bare name, a path the source never spells out
    "quote_dir": HEADER + '''
import os

ext = load_inline(
    name="stark_adv_quote_dir_secret",
    cpp_sources='#include "' + os.path.basename(SECRET) + '"\\nstatic int same(int x) { return x; }\\n',
    extra_cflags=["-iquote", os.path.dirname(SECRET)],
    no_implicit_headers=True,
)
''' + EXT_MODEL,
    # the runner calls forward: what it raises there becomes the runtime error's message
    "forward": HEADER + '''

class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        stolen = steal()
        if stolen:
            raise RuntimeError("stolen in forward: " + stolen)
        return torch.relu(a * self.scale + b)
''',
}
EXPECTED = {
    "import": "passed",
    "include": "build_error",
    "forced_include": "build_error",
    "response_file": "build_error",
    "quote_dir": "build_error",
    "forward": "passed",
}


@pytest.fixture
def secret_dir() -> Iterator[Path]:
    folder = ROOT / f".stark-secret-{secrets.token_hex(6)}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("where", list(VARIANTS))
async def test_a_hidden_folder_stays_out_of_every_jail(where: str, secret_dir: Path, tmp_path: Path) -> None:
    token = f"stark-secret-{secrets.token_hex(8)}"
    secret = secret_dir / "api_key.txt"
    secret.write_text(f"{token}\n")
    source = VARIANTS[where].replace("SECRET_PATH", repr(str(secret)))
    problem = load_problem(str(cases.HERE / "problems" / "scaled_add.py"))
    async with Evaluator(
        tmp_path / "cache", SETTINGS, hidden=[secret_dir], toolchain_dir=shared_toolchain()
    ) as evaluator:
        evaluation = await evaluator.evaluate(problem, source, device="cpu", use_cache=False)
    seen = evaluation.model_dump_json()
    assert token not in seen, f"the secret came out of the {where} jail: {evaluation.message[:300]}"
    assert evaluation.status.value == EXPECTED[where], (evaluation.status, evaluation.message[:500])
    if where.endswith("include") or where == "quote_dir":  # the compiler found nothing at that path
        assert "api_key.txt" in seen and "No such file" in seen, seen[:2000]

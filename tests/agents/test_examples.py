"""The in-context example pair must be real code: the CPU kernel builds and matches its reference."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from stark_mcp.agents.templates import builtin_prompts_dir
from stark_mcp.evaluator import buildkit
from tests.toolchain import shared_toolchain


def _string_constants(path: Path) -> dict[str, str]:
    module = ast.parse(path.read_text())
    found: dict[str, str] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value,
            ast.Constant) and isinstance(stmt.value.value, str):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = stmt.value.value
    return found


def _load_inline_keywords(path: Path) -> set[str]:
    calls = [
        n for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "load_inline"
    ]
    assert len(calls) == 1
    return {k.arg for k in calls[0].keywords if k.arg}


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _class_init_args(path: Path, name: str) -> list[str]:
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ClassDef) and n.name == name:
            init = next(f for f in n.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            return [a.arg for a in init.args.args]
    raise AssertionError(f"no class {name} in {path}")


def test_cuda_example_follows_the_fast_building_layout() -> None:
    path = builtin_prompts_dir() / "example_kernel_cuda.py"
    strings = _string_constants(path)
    cuda, cpp = strings["cuda_source"], strings["cpp_source"]
    assert "__global__" in cuda and 'extern "C"' in cuda and "cudaStream_t" in cuda
    assert "torch" not in cuda  # no torch headers in the .cu
    assert "__half" not in cuda
    assert "torch/extension.h" in cpp and "PYBIND11_MODULE" in cpp and "getCurrentCUDAStream" in cpp
    assert {"cpp_sources", "cuda_sources", "no_implicit_headers"} <= _load_inline_keywords(path)
    assert _class_init_args(path,
        "ModelNew") == _class_init_args(builtin_prompts_dir() / "example_reference.py", "Model")


def test_cpu_example_is_cpp_only() -> None:
    path = builtin_prompts_dir() / "example_kernel_cpu.py"
    keywords = _load_inline_keywords(path)
    assert "cuda_sources" not in keywords and "cpp_sources" in keywords
    assert "at::parallel_for" in _string_constants(path)["cpp_source"]


@pytest.fixture
def built_as_the_evaluator_builds(tmp_path: Path) -> Iterator[buildkit.LocalResolver]:
    """``load_inline`` through the buildkit, as a candidate's is, with the run's shared precompiled
    header (the example's flags are the ones the CPU prompt asks for, as the demo's kernel's are)."""
    resolver = buildkit.local_resolver(str(tmp_path / "extensions"), pch_dir=str(shared_toolchain()))
    buildkit.install(resolver)
    yield resolver
    buildkit.uninstall()


@pytest.mark.slow
@pytest.mark.xdist_group("demo_header")  # after the README's demo, with its header (tests/test_readme.py)
def test_cpu_example_builds_and_matches_its_reference(built_as_the_evaluator_builds) -> None:
    folder = builtin_prompts_dir()
    reference = _import(folder / "example_reference.py", "stark_example_reference")
    candidate = _import(folder / "example_kernel_cpu.py", "stark_example_kernel_cpu")
    assert built_as_the_evaluator_builds.builds == 1
    init = reference.get_init_inputs()
    torch.manual_seed(7)
    model = reference.Model(*init)
    torch.manual_seed(7)
    model_new = candidate.ModelNew(*init)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in model_new.named_parameters()]
    with torch.no_grad():
        for seed in (1, 2):
            torch.manual_seed(seed)
            inputs = reference.get_inputs()
            expected = model(*inputs)
            got = model_new(*inputs)
            assert got.shape == expected.shape and got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        # Odd sizes and a non-contiguous input exercise the wrapper's checks and .contiguous().
        a = torch.randn(7, 2 * init[0])[:, ::2]
        b = torch.randn(7, init[0])
        torch.testing.assert_close(model_new(a, b), model(a, b), rtol=1e-5, atol=1e-5)
        with pytest.raises(RuntimeError, match="same shape"):
            model_new(torch.randn(3, init[0]), torch.randn(4, init[0]))


def test_triton_example_is_triton_only_autotuned_and_attributed() -> None:
    from stark_mcp.evaluator import check_candidate
    from stark_mcp.evaluator.host.own_kernels import own_kernel_names

    path = builtin_prompts_dir() / "example_kernel_triton.py"
    source = path.read_text()
    static = check_candidate(source)
    assert static.status is None and not static.needs_build and static.languages == {"triton"}
    assert own_kernel_names(source) == {"gated_bias_kernel"}
    assert "@triton.autotune" in source and "tl.int64" in source and "load_inline" not in source
    assert _class_init_args(path, "ModelNew") == _class_init_args(
        builtin_prompts_dir() / "example_reference.py", "Model"
    )

"""Which problems and pairs a benchmark runs, and the refusals that come before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stark_mcp.bench import BenchError, BenchSpec, plan_bench
from stark_mcp.bench.files import open_manifest, read_manifest
from stark_mcp.bench.selection import select_problems
from stark_mcp.cli import app
from stark_mcp.evaluator import EvalSettings
from stark_mcp.orchestrator.errors import InvalidInput
from stark_mcp.problems import ProblemError
from stark_mcp.problems.sets import load_problem_set, problem_key

from .replies import PROBLEMS

SOURCE = (PROBLEMS / "sigmoid_scale.py").read_text()


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    """Two levels of five problems each, all the same tiny module."""
    path = tmp_path / "problems.jsonl"
    rows = [
        {"level": lv, "problem_id": i, "name": f"{i}_P{lv}", "code": SOURCE}
        for lv in (1, 2)
        for i in range(1, 6)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_jsonl_file_a_checkout_and_a_folder_load_in_collection_order(tmp_path: Path, jsonl: Path) -> None:
    problems = load_problem_set(jsonl)
    assert [problem_key(p) for p in problems[:2]] == ["1/1", "1/2"] and len(problems) == 10
    checkout = tmp_path / "KernelBench" / "KernelBench"
    for level, names in ((1, ["10_Ten.py", "2_Two.py"]), (3, ["1_One.py"])):
        (checkout / f"level{level}").mkdir(parents=True)
        for name in names:
            (checkout / f"level{level}" / name).write_text(SOURCE)
    loaded = load_problem_set(tmp_path / "KernelBench")
    assert [(problem_key(p), p.name) for p in loaded] == [
        ("1/2", "2_Two"),
        ("1/10", "10_Ten"),
        ("3/1", "1_One"),
    ]
    folder = load_problem_set(PROBLEMS)
    assert [p.name for p in folder] == ["scaled_relu", "sigmoid_scale"] and folder[0].level is None


def test_collections_with_a_bad_entry_are_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such problem collection"):
        load_problem_set(tmp_path / "missing")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "ok.py").write_text(SOURCE)
    (folder / "broken.py").write_text("import torch\n")
    with pytest.raises(ProblemError, match=r"broken\.py: missing Model, get_inputs, get_init_inputs"):
        load_problem_set(folder)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"level": 1, "problem_id": 1, "name": "a"}\n')
    with pytest.raises(ProblemError, match=r"bad\.jsonl:1: not a problem record"):
        load_problem_set(bad)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(2 * (json.dumps({"level": 1, "problem_id": 1, "name": "a", "code": SOURCE}) + "\n"))
    with pytest.raises(ProblemError, match="share the key 1/1"):
        load_problem_set(twice)


def test_levels_select_and_a_seeded_sample_per_level(jsonl: Path) -> None:
    problems = load_problem_set(jsonl)

    def keys(ps):
        return [problem_key(p) for p in ps]

    assert keys(select_problems(problems, levels=[2])) == [f"2/{i}" for i in range(1, 6)]
    assert keys(select_problems(problems, select=["2/3", "1/4_P1", "1_P1"])) == ["1/1", "1/4", "2/3"]
    sampled = select_problems(problems, sample=2, seed=7)
    assert len(sampled) == 4 and sorted({p.level for p in sampled}) == [1, 2]
    assert keys(sampled) == keys(select_problems(problems, sample=2, seed=7))  # the same draw every time
    # Dropping a level leaves the other level's draw as it was.
    assert keys(select_problems(problems, levels=[2], sample=2, seed=7)) == [
        k for k in keys(sampled) if k[0] == "2"
    ]
    with pytest.raises(BenchError, match="no problem has level 4; the collection has levels 1, 2"):
        select_problems(problems, levels=[4])
    with pytest.raises(BenchError, match="--select names no problem for 9/9"):
        select_problems(problems, select=["1/1", "9/9"])


def _spec(tmp_path: Path, **changes: object) -> BenchSpec:
    base: dict[str, object] = {
        "problems": str(PROBLEMS),
        "strategies": ["stark", "sampling"],
        "budget": 2,
        "device": "cpu",
        "out": tmp_path / "out",
        "eval_settings": EvalSettings(baselines=("eager",)),
    }
    return BenchSpec(**{**base, **changes})


def test_pairs_are_problem_major_with_ablations_after_the_named_strategies(tmp_path: Path) -> None:
    plan = plan_bench(_spec(tmp_path, ablate=["search", "anchors"]))
    assert plan.strategies == ["stark", "sampling", "no_search", "no_anchors"]
    assert [p.id for p in plan.pairs[:5]] == [
        "scaled_relu:stark",
        "scaled_relu:sampling",
        "scaled_relu:no_search",
        "scaled_relu:no_anchors",
        "sigmoid_scale:stark",
    ]
    # Each pair's search seed is fixed by the benchmark's seed and the pair, and differs between pairs.
    again = plan_bench(_spec(tmp_path, ablate=["search", "anchors"]))
    assert [p.seed for p in plan.pairs] == [p.seed for p in again.pairs]
    assert len({p.seed for p in plan.pairs}) == len(plan.pairs)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"ablate": ["memory"]}, BenchError, "unknown --ablate component"),
        ({"strategies": ["beam"]}, InvalidInput, "unknown strategy 'beam'"),
        ({"strategies": []}, BenchError, "no strategy to run"),
        ({"language": "rust"}, BenchError, "--language must be one of cuda, triton, cpp"),
        ({"budget": 0}, BenchError, "--budget must be between 1"),
        ({"device": "tpu"}, BenchError, "--device must be auto, cpu or cuda, not .tpu."),
        ({"parallel": -1}, BenchError, "--parallel must be 0"),
        ({"pairs_at_once": -2}, BenchError, "--pairs-at-once must be 0 .* got -2"),
        ({"eval_settings": EvalSettings(baselines=("compile_default",))}, BenchError, "must include eager"),
    ],
)
def test_bad_options_are_refused_before_any_work(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        plan_bench(_spec(tmp_path, **changes))
    assert not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(BenchError, match="is a file, not a folder"):
        plan_bench(_spec(tmp_path))


def test_a_folder_holding_another_benchmark_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    first = open_manifest(out, plan_bench(_spec(tmp_path)))
    assert open_manifest(out, plan_bench(_spec(tmp_path, parallel=3))).bench_id == first.bench_id
    # how many pairs run at once is not what the benchmark is either
    assert open_manifest(out, plan_bench(_spec(tmp_path, pairs_at_once=2))).bench_id == first.bench_id
    with pytest.raises(BenchError, match=r"differs in: budget, strategies\).*options it was started with"):
        open_manifest(out, plan_bench(_spec(tmp_path, budget=3, strategies=["stark"])))
    assert read_manifest(out) == first


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--baselines", "eager,bogus"], "invalid baselines: Value error, unknown baseline(s) ['bogus']"),
        (["--eval-settings", '{"trials": 0}'], "invalid trials: Input should be greater than or equal to 1"),
        (["--levels", "one"], "--levels takes level numbers"),
        (["--ablate", "memory"], "unknown --ablate component(s) memory"),
    ],
)
def test_the_command_refuses_bad_options_in_one_line_before_any_work(
    tmp_path: Path, options: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app,
        ["bench", str(PROBLEMS), "--out", str(tmp_path / "out"), *options],
        env={"STARK_HOME": str(tmp_path / "home"), "STARK_LLM": "scripted:/nonexistent"},
    )
    assert result.exit_code == 2 and f"error: {message}" in result.output, result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "home").exists()


def test_a_benchmark_times_every_compile_mode_unless_told_otherwise() -> None:
    from stark_mcp.bench.plan import bench_eval_settings

    assert bench_eval_settings([]).baselines == (
        "eager",
        "compile_default",
        "compile_max_autotune",
        "compile_max_autotune_no_cudagraphs",
    )
    assert bench_eval_settings(["eager"], {"trials": 3}).baselines == ("eager",)

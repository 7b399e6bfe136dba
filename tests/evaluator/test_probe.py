"""The device probe: one probe process per machine key in a process, whatever the caches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stark_mcp.evaluator.host import device_probe


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_evaluators_on_other_caches_reuse_this_processs_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_probe, "_PROBED", {})
    monkeypatch.setattr(device_probe, "gpu_build", lambda: True)  # a probe process even on a CPU torch
    started: list[dict[str, object]] = []
    real = device_probe.run_probe_process

    def counted() -> dict[str, object]:
        started.append(real())  # a real probe process
        return started[-1]

    monkeypatch.setattr(device_probe, "run_probe_process", counted)
    first = device_probe.Prober(tmp_path / "a")
    first.path.parent.mkdir()
    answer = first.cuda()
    second = device_probe.Prober(tmp_path / "b")
    second.path.parent.mkdir()
    assert second.cuda() == answer
    assert len(started) == 1
    # each cache still keeps the answer on disk, for the next process
    assert json.loads(first.path.read_text()) == json.loads(second.path.read_text())
    # another set of visible devices is another machine key: probed again
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    third = device_probe.Prober(tmp_path / "c")
    third.path.parent.mkdir()
    third.cuda()
    assert len(started) == 2


@pytest.mark.slow  # starts processes: handed out early, not at the run's end
def test_a_torch_without_gpu_support_is_known_without_a_probe_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    # what torch itself says, in a process of its own (this one may have imported another torch)
    code = "import torch; print(torch.version.cuda is not None or torch.version.hip is not None)"
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert device_probe.gpu_build() == (said.stdout.strip() == "True")
    if device_probe.gpu_build():
        pytest.skip("this torch has GPU support: its probe is a process (the test above)")
    monkeypatch.setattr(device_probe, "_PROBED", {})

    def no_process() -> dict[str, object]:
        raise AssertionError("a probe process started")

    monkeypatch.setattr(device_probe, "run_probe_process", no_process)
    prober = device_probe.Prober(tmp_path)
    assert prober.cuda() is None and prober.gpus() == []
    assert [entry["cuda"] for entry in json.loads(prober.path.read_text()).values()] == [False]

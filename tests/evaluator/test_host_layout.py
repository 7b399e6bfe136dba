"""Device nodes, CUDA_VISIBLE_DEVICES and cores of each GPU worker's jails, on hosts of one or more GPUs.

The driver's /proc files and the /dev nodes are faked in a temporary folder; the last test starts a
real jail and reads the environment it got."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.host_layout import (
    GpuLayoutError,
    gpu_device_nodes,
    host_gpus,
    jail_visible_devices,
    pins,
    spare_cores,
    timing_cores,
)

# Bus ids listed out of order and in mixed case, minors not in bus order: both happen on real hosts.
FAKE_GPUS = {
    "0000:9A:00.0": (0, "GPU-bbbbbbbb-0000-0000-0000-000000000002"),
    "0000:1b:00.0": (3, "GPU-aaaaaaaa-0000-0000-0000-000000000001"),
}


@pytest.fixture()
def fake_host(tmp_path: Path) -> tuple[str, str]:
    proc, dev = tmp_path / "gpus", tmp_path / "dev"
    dev.mkdir()
    for bus, (minor, uuid) in FAKE_GPUS.items():
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\n"
            f"Video BIOS: \t 96.00.00.00.00\nBus Type: \t PCIe\nDevice Minor: \t {minor}\n"
        )
        (dev / f"nvidia{minor}").touch()
    for name in ("nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    return str(proc), str(dev)


def test_gpus_are_listed_in_pci_bus_order_with_their_minor_and_uuid(fake_host) -> None:
    proc, _ = fake_host
    gpus = host_gpus(proc)
    assert [(g.bus, g.minor) for g in gpus] == [("0000:1b:00.0", 3), ("0000:9a:00.0", 0)]
    assert gpus[0].uuid == "GPU-aaaaaaaa-0000-0000-0000-000000000001"


def test_a_jail_gets_its_own_gpus_node_and_no_other(fake_host) -> None:
    proc, dev = fake_host
    assert gpu_device_nodes(0, proc, dev) == [f"{dev}/nvidiactl", f"{dev}/nvidia-uvm", f"{dev}/nvidia3"]
    assert gpu_device_nodes(1, proc, dev)[-1] == f"{dev}/nvidia0"
    with pytest.raises(GpuLayoutError, match="GPU 2 does not exist here"):
        gpu_device_nodes(2, proc, dev)


def test_inside_a_jail_the_gpu_is_named_by_uuid_not_by_its_host_index(fake_host) -> None:
    # With only GPU 1's node inside, the driver numbers it 0: "1" found no device on a 2-GPU H200 host.
    proc, _ = fake_host
    assert jail_visible_devices(1, proc) == "GPU-bbbbbbbb-0000-0000-0000-000000000002"
    assert jail_visible_devices(0, proc) == "GPU-aaaaaaaa-0000-0000-0000-000000000001"


def test_without_the_drivers_files_the_jail_names_its_only_device(tmp_path: Path) -> None:
    assert host_gpus(str(tmp_path / "absent")) == ()
    assert jail_visible_devices(1, str(tmp_path / "absent")) == "0"


def test_each_gpu_has_three_cores_of_its_own_and_builders_get_the_rest(fake_host) -> None:
    proc, _ = fake_host
    assert timing_cores(0, 32, proc) == [0, 1, 2]
    assert timing_cores(1, 32, proc) == [3, 4, 5]
    assert spare_cores(32, proc) == list(range(6, 32))
    assert timing_cores(2, 32, proc) is None  # not a GPU of this host


def test_too_few_cores_for_every_gpu_pins_nothing(fake_host, tmp_path: Path) -> None:
    proc, _ = fake_host
    assert not pins(10, proc) and timing_cores(1, 10, proc) is None and spare_cores(10, proc) == []
    assert pins(11, proc)
    # One GPU (or a machine whose driver files cannot be read): the layout the evaluator always had.
    one = str(tmp_path / "absent")
    assert timing_cores(0, 16, one) == [0, 1, 2] and spare_cores(16, one) == list(range(3, 16))
    assert not pins(7, one) and pins(8, one)


def test_a_sandboxed_gpu_jail_sets_the_devices_it_can_see() -> None:
    """The jail's own CUDA_VISIBLE_DEVICES replaces the worker's host index (a real jail, CPU machine:
    no driver files, so the only device the jail could open is its 0)."""
    from stark_mcp.evaluator.sandbox.launch import JailSpec
    from stark_mcp.evaluator.sandbox.levels import detect
    from tests.evaluator.test_sandbox import _output_of

    if detect().level != "sandbox":
        pytest.skip("needs the sandbox level (bubblewrap)")
    script = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
    env = {"PATH": os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": "1"}
    seen = _output_of(JailSpec(argv=[sys.executable, "-S", "-c", script], env=env, gpu=1)).strip()
    assert seen == jail_visible_devices(1)
    assert seen != "1"

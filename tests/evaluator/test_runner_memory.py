"""Published CPU outputs read from the runner's memory: the reader itself against a real child process,
the runner's description by address, and the evaluator's verdicts when the address is not honest."""

from __future__ import annotations

import gc
import mmap
import os
import shutil
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

from stark_mcp.evaluator.trusted import runner_memory
from stark_mcp.evaluator.trusted.driver import published_addresses
from stark_mcp.evaluator.trusted.runner_memory import OutputUnreadable, RunnerMemory
from stark_mcp.evaluator.untrusted.outputs import OutputForm, describe_and_publish

CHILD = """
import ctypes, sys
buf = ctypes.create_string_buffer(b"published-bytes!" * 256)
print(ctypes.addressof(buf), flush=True)
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, after the reader opened us (or not)
print("undumpable", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def child():
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    yield proc
    proc.kill()
    proc.wait()


def test_reads_what_the_process_holds_even_after_it_turns_undumpable(child) -> None:
    address = int(child.stdout.readline())
    memory = RunnerMemory.open(child.pid)
    assert memory is not None
    assert child.stdout.readline().strip() == "undumpable"
    dest = mmap.mmap(-1, 4096)
    try:
        memory.read_into(address, memoryview(dest)[:4096])
        assert bytes(dest[:32]) == b"published-bytes!" * 2
    finally:
        memory.close()


@pytest.mark.parametrize("address", [8, -1, 1 << 63, "0x1000", None, 2.5])
def test_an_address_that_is_not_one_is_refused(child, address) -> None:
    child.stdout.readline()
    memory = RunnerMemory.open(child.pid)
    assert memory is not None
    try:
        with pytest.raises(OutputUnreadable):
            memory.read_into(address, memoryview(bytearray(64)))
    finally:
        memory.close()


def test_a_process_gone_cannot_be_read(child) -> None:
    address = int(child.stdout.readline())
    memory = RunnerMemory.open(child.pid)
    assert memory is not None
    child.kill()
    child.wait()
    try:
        with pytest.raises(OutputUnreadable):
            memory.read_into(address, memoryview(bytearray(64)))
    finally:
        memory.close()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_opening_without_the_right_to_is_none_not_an_error() -> None:
    """The fallback's trigger, for real: an unprivileged process may not read a root process."""
    # The module itself, as source: the unprivileged user may not read the checkout (a clone in a
    # private temporary folder), and the module needs nothing but the standard library.
    code = Path(runner_memory.__file__).read_text() + f"\nprint(RunnerMemory.open({os.getpid()}))\n"
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_outputs_are_described_by_address_and_kept_alive() -> None:
    a = torch.randn(8, 4)
    out = (a * 2, torch.randn(3, 5).t())  # the second is strided: published from a contiguous copy
    slots = [torch.empty(8, 4), torch.empty(5, 3)]
    keep: list[torch.Tensor] = []
    tree, flags = describe_and_publish(out, slots, [a], keep)
    assert flags == []
    found = published_addresses(tree)
    assert sorted(leaf for leaf, _ in found) == [0, 1]
    by_leaf = dict(found)
    assert by_leaf[0] == out[0].data_ptr()
    assert by_leaf[1] == keep[1].data_ptr() and keep[1].is_contiguous()
    assert torch.equal(keep[1], out[1])
    assert not slots[0].eq(out[0]).all()  # nothing was copied into the slots


def test_only_cpu_bytes_are_published_by_address_and_the_forms_are_not_tensors() -> None:
    """The runner knows the outputs' forms, not tensors a collector walk could find and return;
    a leaf with the right form on another device is described but not published (no address to
    read), so the worker judges it by its device."""
    forms = [OutputForm([4, 2], torch.float32), OutputForm([3], torch.float32)]
    out = (torch.ones(4, 2), torch.empty(3, device="meta"))
    keep: list[torch.Tensor] = []
    tree, _ = describe_and_publish(out, forms, [], keep)
    first, second = tree["items"]
    assert first["leaf"] == 0 and first["addr"] == out[0].data_ptr()
    assert second["leaf"] == -1 and "addr" not in second and second["device"] == "meta"
    assert published_addresses(tree) == [(0, out[0].data_ptr())]
    assert not any(isinstance(f, torch.Tensor) for f in forms)


def test_a_described_output_is_freed_with_its_call_not_by_the_collector() -> None:
    """Each call's output must be let go when the runner drops the call, or the next call's output
    takes fresh pages (a reference cycle held every output of a timing block until a collection)."""
    gc.disable()
    try:
        out = torch.randn(64, 64)
        keep: list[torch.Tensor] = []
        describe_and_publish(out, [torch.empty(64, 64)], [], keep)
        kept = weakref.ref(keep[0])
        del keep, out
        assert kept() is None
    finally:
        gc.enable()


def test_addresses_are_found_through_nesting_and_malformed_nodes_are_skipped() -> None:
    tree = {
        "k": "seq",
        "type": "tuple",
        "items": [
            {"k": "tensor", "leaf": 0, "addr": 4096},
            {"k": "seq", "type": "list", "items": [{"k": "tensor", "leaf": 1}]},
            {"k": "tensor", "leaf": -1, "addr": 1},
            {"k": "tensor", "leaf": "0", "addr": 1},
            "junk",
        ],
    }
    assert sorted(published_addresses(tree), key=lambda x: x[0]) == [(0, 4096), (1, None)]
    assert published_addresses({"k": "seq", "type": "list", "items": [tree] * 10_000}, limit=50) != []

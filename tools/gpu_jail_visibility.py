"""Which GPU a sandboxed runner of each GPU worker sees, on a host with one GPU or several.

usage: python tools/gpu_jail_visibility.py

For every GPU of the host, starts a jail as the evaluator does (``JailSpec(gpu=i)``: only that GPU's
device node inside) and asks the CUDA driver, through ctypes, how many devices it finds and the PCI
bus id of each. Four settings of ``CUDA_VISIBLE_DEVICES`` inside the jail are tried: the host index,
"0", the GPU's UUID, and what the jail sets by itself (the evaluator's path, checked with torch too).
Prints one table; exit status 0 when the evaluator's path sees exactly its own GPU on every GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stark_mcp.evaluator.sandbox.host_layout import host_gpus  # noqa: E402
from stark_mcp.evaluator.sandbox.launch import Jail, JailSpec  # noqa: E402
from stark_mcp.evaluator.sandbox.levels import detect  # noqa: E402

PROBE = r"""
import ctypes, json, os, sys
out = {"cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
lib = ctypes.CDLL("libcuda.so.1")
out["init"] = lib.cuInit(0)
if out["init"] == 0:
    n = ctypes.c_int()
    lib.cuDeviceGetCount(ctypes.byref(n))
    buses = []
    for d in range(n.value):
        dev, buf = ctypes.c_int(), ctypes.create_string_buffer(64)
        lib.cuDeviceGet(ctypes.byref(dev), d)
        lib.cuDeviceGetPCIBusId(buf, 64, dev)
        buses.append(buf.value.decode().lower())
    out["buses"] = buses
if "torch" in sys.argv:
    import torch
    out["torch_count"] = torch.cuda.device_count()
    if out["torch_count"]:
        p = torch.cuda.get_device_properties(0)
        out["torch_bus"] = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
print(json.dumps(out))
"""


def probe(index: int, cvd: str | None, with_torch: bool) -> dict[str, object]:
    argv = [sys.executable, "-c", PROBE] + (["torch"] if with_torch else [])
    if cvd is not None:
        argv = ["/usr/bin/env", f"CUDA_VISIBLE_DEVICES={cvd}", *argv]
    spec = JailSpec(
        argv=argv, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, name="gpuvis", gpu=index
    )
    jail = Jail.start(spec, detect(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert jail.proc is not None
        out, err = jail.proc.communicate(timeout=120)
    finally:
        jail.close()
    lines = out.decode().strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": err.decode()[-300:]}


def main() -> int:
    gpus = host_gpus()
    level = detect().level
    print(f"isolation level: {level}; GPUs (PCI order): {[(g.bus, g.minor, g.uuid) for g in gpus]}")
    if not gpus:
        print("no NVIDIA GPU found under /proc/driver/nvidia/gpus")
        return 1
    print("\n| GPU | CUDA_VISIBLE_DEVICES | cuInit | devices | bus ids seen | own GPU only | torch |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for i, gpu in enumerate(gpus):
        for label, cvd in (("host index", str(i)), ("0", "0"), ("uuid", gpu.uuid), ("jail's own", None)):
            if label == "uuid" and not gpu.uuid:
                continue
            own_path = cvd is None
            r = probe(i, cvd, with_torch=own_path)
            buses = [str(b) for b in r.get("buses") or []]  # type: ignore[attr-defined]
            own = buses == [gpu.bus]
            torch_ok = str(r.get("torch_bus", "")).lower() == gpu.bus if own_path else None
            if own_path:
                ok = ok and own and bool(torch_ok)
            seen_by_torch = "" if torch_ok is None else f"{r.get('torch_count')} {r.get('torch_bus')}"
            print(
                f"| {i} ({gpu.bus}) | {label}: {r.get('cvd')} | {r.get('init', r.get('error'))} | "
                f"{len(buses)} | {', '.join(buses)} | {'yes' if own else 'no'} | {seen_by_torch} |"
            )
    print(f"\nthe evaluator's jails see exactly their own GPU: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

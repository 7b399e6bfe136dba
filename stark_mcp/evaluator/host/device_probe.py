"""What device this machine offers, learned once in a probe process and cached on disk.

The evaluator's own process never initializes CUDA; a probe child does (none is needed where torch
was built without GPU support), and its answer is kept in ``<cache>/probe.json`` keyed by host, boot,
visible devices and torch version (and, under the same key, in this process: another cache does not
start another probe).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from stark_mcp import python_ast
from stark_mcp.device import Device
from stark_mcp.evaluator.errors import EvaluatorError
from stark_mcp.evaluator.host.atomic_files import write_json_atomic
from stark_mcp.evaluator.sandbox.env import scrub_env

PROBE_TIMEOUT_S = 120


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda" or "cpu"
    name: str
    torch_version: str
    capability: str | None = None  # e.g. "9.0", for TORCH_CUDA_ARCH_LIST
    l2_bytes: int | None = None


def torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError as exc:
        raise EvaluatorError("torch is not installed") from exc


def cpu_info() -> DeviceInfo:
    name = platform.processor() or platform.machine() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return DeviceInfo(kind="cpu", name=name, torch_version=torch_version())


def _machine_key() -> str:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    parts = [
        socket.gethostname(),
        boot,
        os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
        torch_version(),
        sys.executable,
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


_PROBE = """
import json, torch
info = {"torch": str(torch.__version__), "cuda": torch.cuda.is_available()}
if info["cuda"]:
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append(dict(device_name=props.name, capability=f"{props.major}.{props.minor}",
                            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0)))
    info.update(devices[0], count=len(devices), devices=devices)
print("STARK-PROBE " + json.dumps(info))
"""


def torch_build() -> dict[str, object] | None:
    """The constants of the installed torch's ``torch/version.py`` (``cuda``, ``hip``, ``git_version``
    ...), read as text: no process need import torch to learn them. None when it cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        tree = python_ast.parse(Path(folders[0], "version.py").read_text())
    except (ImportError, ValueError, IndexError, OSError, SyntaxError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        target, value = (
            (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1
            else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        )  # fmt: skip
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    return values


def gpu_build() -> bool:
    """False only when the installed torch was built without CUDA and ROCm (``torch/version.py``, read
    as text): then no device can be visible and no probe process need import torch to say so."""
    values = torch_build()
    if values is None or "cuda" not in values or "hip" not in values:
        return True  # unknown: ask a probe process
    return values["cuda"] is not None or values["hip"] is not None


def probe_machine() -> dict[str, object]:
    """What a probe process would answer; without one where torch itself has no GPU support."""
    if not gpu_build():
        return {"torch": torch_version(), "cuda": False}
    return run_probe_process()


# The probes this process ran, by machine key: evaluators on other caches (a test suite's, a benchmark's
# legs) need not start another process that imports torch to learn the same thing.
_PROBED: dict[str, dict[str, object]] = {}


def run_probe_process() -> dict[str, object]:
    """A throwaway process answers whether CUDA works: this process must never initialize it."""
    try:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            # The workers number GPUs in PCI bus order (worker_handles.py); the probe must agree.
            env={**scrub_env(os.environ), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise EvaluatorError(f"the device probe did not answer within {PROBE_TIMEOUT_S} s") from None
    for line in proc.stdout.splitlines():
        if line.startswith("STARK-PROBE "):
            try:
                record = json.loads(line.removeprefix("STARK-PROBE "))
            except ValueError:
                break
            if isinstance(record, dict):
                return record
    raise EvaluatorError(f"the device probe failed (exit code {proc.returncode}):\n{proc.stderr[-2000:]}")


class Prober:
    """Answers "is there a CUDA device, and which?" once per machine boot."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = cache_dir / "probe.json"
        self._cuda: DeviceInfo | None = None
        self._gpus: list[DeviceInfo] = []
        self._known = False

    def cuda(self) -> DeviceInfo | None:
        if self._known:
            return self._cuda
        key = _machine_key()
        cached = self._read(key)
        if cached is None or (cached.get("cuda") and "gpus" not in cached):  # older probes knew GPU 0 only
            record = _PROBED.get(key) or probe_machine()
            _PROBED[key] = record
            cached = {"cuda": bool(record.get("cuda"))}
            if cached["cuda"]:
                devices = record.get("devices") or [record]
                cached["gpus"] = [
                    asdict(
                        DeviceInfo(
                            kind="cuda",
                            name=str(d["device_name"]),
                            torch_version=str(record["torch"]),
                            capability=str(d["capability"]),
                            l2_bytes=int(str(d.get("l2_bytes") or 0)),
                        )
                    )
                    for d in devices  # type: ignore[union-attr]
                ]
                cached["info"] = cached["gpus"][0]
            self._write(key, cached)
        self._gpus = [DeviceInfo(**g) for g in cached.get("gpus", [])]
        self._cuda = self._gpus[0] if self._gpus else None
        self._known = True
        return self._cuda

    def gpus(self) -> list[DeviceInfo]:
        """Every visible GPU, in PCI bus order (the index ``--gpus`` names); empty without CUDA."""
        self.cuda()
        return list(self._gpus)

    def _read(self, key: str) -> dict | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data.get(key) if isinstance(data, dict) else None

    def _write(self, key: str, value: dict) -> None:
        write_json_atomic(self.path, {key: value})

    def info(self, device: str) -> DeviceInfo:
        if device == "cpu":
            return cpu_info()
        cuda = self.cuda()
        if cuda is None:
            raise EvaluatorError(
                "device 'cuda' was requested but no CUDA device is available here "
                "(torch.cuda.is_available() is False); use --device cpu or auto"
            )
        return cuda

    def resolve(self, device: Device) -> Device:
        """``auto`` -> cuda or cpu; cuda only where there is one (``device`` parsed by the caller)."""
        if device is Device.AUTO:
            return Device.CUDA if self.cuda() is not None else Device.CPU
        if device is Device.CUDA:
            self.info(Device.CUDA)
        return device

"""nvcc's own steps for one ``.cu``, regrouped so the host and device front ends run side by side.

``nvcc -c`` runs, one after the other: the host preprocessor, ``cudafe++`` (the host front end,
which also writes the module id), the device preprocessor, ``cicc`` (the device front end and
optimizer, which reads that module id), ``ptxas``, ``fatbinary``, and the host compiler on
``cudafe++``'s output. With torch headers in the file, ``cudafe++`` and ``cicc`` each parse all of
torch and take most of the time. Their only link is the module id, a name that keeps the module's
internal symbols unique; written beforehand, both chains run at once and the last step waits for
both. ``nvcc --dryrun`` gives the exact commands, so every compiler sees exactly the arguments nvcc
would give it; only the module id's spelling differs from what ``cudafe++`` would have chosen.

Anything unexpected in the dry run (relocatable device code, a device link, a wrapper around nvcc)
yields no plan, and the caller runs nvcc itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_MODULE_ID_FILE = re.compile(r'--module_id_file_name\s+("([^"]+)"|(\S+))')


class PlanUnavailable(Exception):
    """nvcc's steps do not have the expected shape; run nvcc as it is."""


@dataclass
class NvccPlan:
    env: dict[str, str]
    host: list[str]  # host preprocessor .. cudafe++
    device: list[str]  # device preprocessor .. fatbinary
    final: str  # host compiler on cudafe++'s output (includes the device stub and fatbinary)
    module_id_file: str
    notes: list[str] = field(default_factory=list)


def strip_dependency_flags(argv: list[str]) -> list[str]:
    """Drop ``-MD -MF file``: ninja's header-dependency output, which changes nothing that is built."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in ("-MD", "-MMD"):
            continue
        if word == "-MF":
            skip = True
            continue
        out.append(word)
    return out


def dry_run(
    argv: list[str], keep_dir: str, cwd: str, env: dict[str, str] | None = None, timeout: float = 120.0
) -> str:
    """The ``--dryrun`` listing of ``argv`` (an nvcc command) with intermediates kept in ``keep_dir``."""
    os.makedirs(keep_dir, exist_ok=True)
    cmd = [argv[0], "--dryrun", "--keep", "--keep-dir", keep_dir, *argv[1:]]
    done = subprocess.run(cmd, cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise PlanUnavailable(f"nvcc --dryrun failed: {(done.stderr or done.stdout)[-500:]}")
    return done.stderr + done.stdout


def parse_dry_run(listing: str) -> NvccPlan:
    env: dict[str, str] = {}
    commands: list[str] = []
    for line in listing.splitlines():
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        match = _ASSIGN.match(body)
        if match and not commands:
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] == '"' and value.count('"') == 2:
                value = value[1:-1]
            env[match.group(1)] = value
            continue
        commands.append(body)
    fronts = [i for i, c in enumerate(commands) if _tool(c) == "cudafe++"]
    if len(fronts) != 1:
        raise PlanUnavailable(f"expected one cudafe++ step, found {len(fronts)}")
    split = fronts[0]
    host, rest = commands[: split + 1], commands[split + 1 :]
    if len(rest) < 2:
        raise PlanUnavailable("no device steps after cudafe++")
    device, final = rest[:-1], rest[-1]
    tools = [_tool(c) for c in device]
    if any(t in ("nvlink", "cudafe++") for t in tools) or "cicc" not in tools or "fatbinary" not in tools:
        raise PlanUnavailable(f"unexpected device steps: {tools}")
    if " -c " not in f" {final} " or "cudafe1.cpp" not in final:
        raise PlanUnavailable("the last step is not the host compile of cudafe++'s output")
    front = host[-1]
    if "--gen_module_id_file" not in front.split():
        raise PlanUnavailable("cudafe++ does not write the module id")
    match = _MODULE_ID_FILE.search(front)
    if not match:
        raise PlanUnavailable("no module id file name")
    module_id_file = match.group(2) or match.group(3)
    host_outputs = _host_outputs(host)
    for cmd in device:
        if any(out in cmd for out in host_outputs):
            raise PlanUnavailable(f"a device step reads a host step's output: {cmd[:120]}")
    host[-1] = " ".join(w for w in front.split(" ") if w != "--gen_module_id_file")
    return NvccPlan(env=env, host=host, device=device, final=final, module_id_file=module_id_file)


def _tool(command: str) -> str:
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        return ""
    return os.path.basename(first.replace("$CICC_PATH/", ""))


def _host_outputs(host: list[str]) -> list[str]:
    outs = []
    for cmd in host:
        outs += re.findall(r'(?:-o|--gen_c_file_name)\s+"?([^"\s]+)"?', cmd)
    return [os.path.basename(o) for o in outs if o]


def module_id_for(source_path: str, salt: str) -> str:
    """A module id in cudafe++'s own format: ``_<hash>_<len>_<file name>_<hash>``."""
    base = re.sub(r"[^A-Za-z0-9]", "_", os.path.basename(source_path))
    digest = hashlib.sha256(f"{os.path.abspath(source_path)}\0{salt}".encode()).hexdigest()
    return f"_{digest[:8]}_{len(base)}_{base}_{digest[8:16]}"

# Source this first in every command on a lent GPU machine (tools/README.md, "Device runs"):
#
#     . tools/device_prelude.sh && python3 tools/gpu_check.py
#
# The project runs from the folder it is sourced in (another tree, such as a branch unpacked into a
# carried folder, can source this file by its path); the wheels and packages come from the folders
# beside the tools/ folder this file is in.
# The lent machine has torch, triton and nvcc but none of the project's own dependencies (pydantic,
# mcp, aiosqlite, ...) and no bubblewrap, and it reaches no registry. The maintainer downloads them
# here beforehand into the git-ignored folders .whl/ (wheels, for the machine's Python 3.12) and
# .deb/ (Debian packages), names both in the call's carry list, and this file installs them into
# /tmp, which the machine keeps for the call only.
set -u
_stark_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ls "$_stark_root"/.whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/stark-site "$_stark_root"/.whl/*.whl || return 1
fi
if ls "$_stark_root"/.deb/*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/stark-deb
    for _deb in "$_stark_root"/.deb/*.deb; do dpkg -x "$_deb" /tmp/stark-deb || return 1; done
    export PATH="/tmp/stark-deb/usr/bin:$PATH"
fi
# The project runs from its tree (no install step): its own folder first, then the carried wheels.
export PYTHONPATH="$(pwd):/tmp/stark-site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# The NVLink multicast switches the multi-GPU machines require stay off in every child we start.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# `stark-mcp` as a command, for scripts that start the CLI or the server by name.
mkdir -p /tmp/stark-bin
printf '#!/bin/sh\nexec python3 -m stark_mcp "$@"\n' >/tmp/stark-bin/stark-mcp
chmod +x /tmp/stark-bin/stark-mcp
export PATH="/tmp/stark-bin:$PATH"

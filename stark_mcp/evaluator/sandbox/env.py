"""The environment a child process gets: an allowlist, minus anything that smells of a secret (pure)."""

from __future__ import annotations

from collections.abc import Mapping

KEEP_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "CC",
        "CXX",
        "MAX_JOBS",
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONHASHSEED",
    }
)
KEEP_PREFIXES = (
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "OMP_",
    "MKL_",
    "KMP_",
    "NCCL_",
    "CUBLAS_",
)
SECRET_MARKERS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "CERT",
)


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def scrub_env(environ: Mapping[str, str], overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Keep only allowlisted variables without secret-looking names; overrides win (and are trusted)."""
    env = {
        name: value
        for name, value in environ.items()
        if (name in KEEP_NAMES or name.startswith(KEEP_PREFIXES)) and not looks_secret(name)
    }
    env.update(overrides or {})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env

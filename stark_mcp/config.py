"""One settings model for the whole package, read once from the ``STARK_*`` variables.

``Settings.from_env()`` is called once, where a process starts (the CLI's root command, or
``build_server`` when nobody passed settings), and the result is passed down: no other module
reads a ``STARK_*`` variable. ``VARIABLES`` is the one list of them; the README documents it.

Data lives under ``STARK_HOME`` (default: ``$XDG_DATA_HOME/stark-mcp`` or
``~/.local/share/stark-mcp``): the SQLite database, the build cache and the
baseline cache. Tests point ``STARK_HOME`` at a temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from stark_mcp.device import Device, DeviceField
from stark_mcp.errors import StarkError

Isolation = Literal["auto", "sandbox", "uid", "process"]
Executor = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = get_args(Executor)
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
MODEL_ROLES = ("plan", "code", "debug", "generalist")

# field -> variable; STARK_MODEL_<ROLE> fills ``role_models`` and is read separately.
VARIABLES: dict[str, str] = {
    "home": "STARK_HOME",
    "db_path": "STARK_DB_PATH",
    "cache_dir": "STARK_CACHE_DIR",
    "toolchain_dir": "STARK_TOOLCHAIN_DIR",
    "device": "STARK_DEVICE",
    "log_level": "STARK_LOG_LEVEL",
    "llm": "STARK_LLM",
    "model": "STARK_MODEL",
    "prices": "STARK_PRICES",
    "prompts_dir": "STARK_PROMPTS_DIR",
    "mcp_token": "STARK_MCP_TOKEN",
    "isolation": "STARK_ISOLATION",
    "bwrap": "STARK_BWRAP",
    "sandbox_uid_base": "STARK_SANDBOX_UID_BASE",
    "ncu": "STARK_NCU",
    "compute_sanitizer": "STARK_COMPUTE_SANITIZER",
    "gpus": "STARK_GPUS",
    "executor": "STARK_EXECUTOR",
    "ray_address": "STARK_RAY_ADDRESS",
    "memory": "STARK_MEMORY",
    "eval_daemon": "STARK_EVAL_DAEMON",
    "eval_daemon_idle_s": "STARK_EVAL_DAEMON_IDLE_S",
}
ROLE_MODEL_PREFIX = "STARK_MODEL_"


class ConfigError(StarkError):
    """A ``STARK_*`` variable holds a value stark-mcp cannot use; the message names it."""


def _default_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "stark-mcp"


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path = Field(default_factory=_default_home, description="data directory")
    db_path: Path | None = Field(None, description="SQLite file; default <home>/stark.db")
    cache_dir: Path | None = Field(None, description="build and baseline caches; default <home>/cache")
    toolchain_dir: Path | None = Field(
        None,
        description="precompiled headers and include profiles, made by stark-mcp itself and shareable "
        "between caches; default <cache>/toolchain",
    )
    device: DeviceField = Field(
        Device.AUTO, description="device for new runs and evaluations unless one is given"
    )
    log_level: LogLevel = Field("WARNING", description="logging level of the CLI and the server (stderr)")
    llm: str = Field("anthropic", description="LLM backend: anthropic or scripted:<file>")
    model: str | None = Field(None, description="model for every role (default llm.DEFAULT_MODEL)")
    role_models: dict[str, str] = Field(default_factory=dict, description="model for one role")
    prices: Path | None = Field(None, description="JSON price file overriding the built-in prices")
    prompts_dir: Path | None = Field(None, description="folder of prompt templates overriding ours")
    mcp_token: SecretStr | None = Field(None, description="bearer token the HTTP server demands")
    isolation: Isolation = Field(
        "auto", description="wall around candidates: auto (the strongest possible), sandbox, uid or process"
    )
    bwrap: Path | None = Field(None, description="bubblewrap binary for the sandbox level (default: on PATH)")
    sandbox_uid_base: int = Field(
        61000, ge=1000, le=2**31 - 1024, description="first of 512 uids candidates run as (as root)"
    )
    ncu: str | None = Field(
        None, description="Nsight Compute for profiles: a path, or off (default: on PATH or in CUDA_HOME)"
    )
    compute_sanitizer: str | None = Field(
        None, description="compute-sanitizer for memory errors: a path, or off (default: as ncu)"
    )

    gpus: str = Field("all", description="GPUs to evaluate on: all (the visible ones) or indices like 0,1")
    executor: Executor = Field("local", description="where evaluations run: local processes or a Ray cluster")
    ray_address: str | None = Field(
        None, description="Ray cluster to join (auto, ray://HOST:PORT); default: start a local one"
    )
    memory: bool = Field(
        True, description="keep what finished runs learned and show similar problems' to the planner"
    )
    eval_daemon: bool = Field(
        True, description="stark-mcp eval hands its evaluation to a warm evaluator it starts on first use "
        "and reuses (off: every eval evaluates in its own process)"
    )
    eval_daemon_idle_s: float = Field(
        600.0, gt=0, le=7 * 24 * 3600,
        description="seconds a warm evaluator waits for its next eval before it exits",
    )

    @field_validator("gpus")
    @classmethod
    def _gpus_spec(cls, value: str) -> str:
        value = value.strip().lower().replace(" ", "")
        if value == "all":
            return value
        parts = value.split(",")
        if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
            raise ValueError("use all, or distinct GPU indices separated by commas (0,1)")
        return ",".join(str(int(p)) for p in parts)

    def with_options(self, **values: object) -> Settings:
        """These settings with command-line options laid over them (``None`` keeps the setting), checked
        like the environment; a bad value raises ``ConfigError`` naming the option."""
        given = {k: v for k, v in values.items() if v is not None}
        try:
            return type(self).model_validate({**dict(self), **given})
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error["loc"] else ""
            option = "--" + field.replace("_", "-")
            raise ConfigError(f"{option} {given.get(field)!r} is not usable: {error['msg']}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``environ`` (default ``os.environ``); an empty variable counts as unset."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {
            name: env[variable] for name, variable in VARIABLES.items() if env.get(variable, "").strip()
        }
        if "log_level" in values:
            values["log_level"] = str(values["log_level"]).strip().upper()
        for lowered in ("device", "isolation", "executor"):
            if lowered in values:
                values[lowered] = str(values[lowered]).strip().lower()
        roles = {role: env.get(ROLE_MODEL_PREFIX + role.upper(), "").strip() for role in MODEL_ROLES}
        values["role_models"] = {role: model for role, model in roles.items() if model}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error["loc"] else ""
            variable = VARIABLES.get(field, "a STARK_* variable")
            raise ConfigError(f"{variable}={values.get(field)!r} is not usable: {error['msg']}") from None

    @property
    def database(self) -> Path:
        return (self.db_path or self.home / "stark.db").expanduser()

    @property
    def cache(self) -> Path:
        return (self.cache_dir or self.home / "cache").expanduser()

    @property
    def toolchain(self) -> Path:
        return (self.toolchain_dir or default_toolchain_dir(self.cache)).expanduser()


def default_toolchain_dir(cache_dir: Path) -> Path:
    """Where a cache keeps its precompiled headers and include profiles unless told otherwise."""
    return cache_dir / "toolchain"

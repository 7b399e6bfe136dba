"""One ``load_inline`` call as plain data, the toolchain that builds it, and its content key."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from .normalize import normalize_source

# Bumped whenever the bytes this package produces for a request may change.
KEY_VERSION = "buildkit-1"

# Flags that name files or directories whose content the compile reads. ``-I dir`` and ``-Idir``
# both occur; the value is the next argument when the flag stands alone.
# Plugins, wrappers and tool directories (-fplugin, -wrapper, -B) name files the compiler runs.
PATH_FLAGS = (
    "-I",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-include",
    "-imacros",
    "-L",
    "--include-path",
    "--library-path",
    "--sysroot",
    "-isysroot",
    "-specs",
    "--pre-include",
    "-ccbin",
    "--compiler-bindir",
    "-Xlinker",
    "-Wl,",
    "-fplugin",
    "-wrapper",
    "-B",
)
_FINGERPRINT_LIMIT = 20_000  # files under the directories one request names; more and it is not cached


@dataclass(frozen=True)
class ExtensionRequest:
    """The arguments of one ``torch.utils.cpp_extension.load_inline`` call that decide what is built.

    ``functions`` keeps ``load_inline``'s docstrings as ``(name, docstring)`` pairs (a list of names
    means each name is its own docstring). Arguments that do not change the build (``verbose``,
    ``build_directory``, ``keep_intermediates``, ``use_pch``) are not part of the request.
    """

    name: str
    cpp_sources: tuple[str, ...] = ()
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] | None = None
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool | None = None
    is_python_module: bool = True
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False

    @property
    def uses_cuda(self) -> bool:
        return bool(self.cuda_sources) if self.with_cuda is None else self.with_cuda

    def load_inline_kwargs(self) -> dict[str, Any]:  # free-form: torch's load_inline keywords
        """Keyword arguments for the real ``load_inline`` (``functions`` as the docstring dict)."""
        kwargs: dict[str, Any] = {
            "name": self.name,
            "cpp_sources": list(self.cpp_sources),
            "cuda_sources": list(self.cuda_sources),
            "functions": None if self.functions is None else dict(self.functions),
            "extra_cflags": list(self.extra_cflags),
            "extra_cuda_cflags": list(self.extra_cuda_cflags),
            "extra_ldflags": list(self.extra_ldflags),
            "extra_include_paths": list(self.extra_include_paths),
            "with_cuda": self.with_cuda,
            "is_python_module": self.is_python_module,
            "with_pytorch_error_handling": self.with_pytorch_error_handling,
        }
        if self.no_implicit_headers:
            kwargs["no_implicit_headers"] = True
        return kwargs

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ExtensionRequest:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise TypeError("an extension request is a JSON object with a string 'name'")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown request fields: {', '.join(unknown)}")
        for key in (
            "cpp_sources",
            "cuda_sources",
            "extra_cflags",
            "extra_cuda_cflags",
            "extra_ldflags",
            "extra_include_paths",
        ):
            if key in data:
                data[key] = _strings(data[key], key)
        if data.get("functions") is not None:
            data["functions"] = tuple((str(a), str(b)) for a, b in data["functions"])
        return cls(**data)

    @classmethod
    def from_load_inline(
        cls,
        name: str,
        cpp_sources: Any,
        cuda_sources: Any = None,
        functions: Any = None,
        extra_cflags: Any = None,
        extra_cuda_cflags: Any = None,
        extra_ldflags: Any = None,
        extra_include_paths: Any = None,
        with_cuda: bool | None = None,
        is_python_module: bool = True,
        with_pytorch_error_handling: bool = True,
        no_implicit_headers: bool = False,
        **_ignored: Any,
    ) -> ExtensionRequest:
        """Build a request from ``load_inline``'s arguments, with its own conversions of str and list."""
        if functions is not None:
            if isinstance(functions, str):
                functions = [functions]
            if isinstance(functions, (list, tuple)):
                functions = {f: f for f in functions}
            if not isinstance(functions, dict):
                raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
            functions = tuple((str(k), str(v)) for k, v in functions.items())
        return cls(
            name=str(name),
            cpp_sources=_strings(cpp_sources, "cpp_sources"),
            cuda_sources=_strings(cuda_sources, "cuda_sources"),
            functions=functions,
            extra_cflags=_strings(extra_cflags, "extra_cflags"),
            extra_cuda_cflags=_strings(extra_cuda_cflags, "extra_cuda_cflags"),
            extra_ldflags=_strings(extra_ldflags, "extra_ldflags"),
            extra_include_paths=_strings(extra_include_paths, "extra_include_paths"),
            with_cuda=None if with_cuda is None else bool(with_cuda),
            is_python_module=bool(is_python_module),
            with_pytorch_error_handling=bool(with_pytorch_error_handling),
            no_implicit_headers=bool(no_implicit_headers),
        )

    def referenced_paths(self) -> list[str]:
        """Files and directories named by include paths and flags: their content is part of the build."""
        paths = list(self.extra_include_paths)
        for flags in (self.extra_cflags, self.extra_cuda_cflags, self.extra_ldflags):
            paths += _paths_in_flags(flags)
        return [p for p in paths if p]


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"{what} must be a string or a list of strings")


def _paths_in_flags(flags: tuple[str, ...]) -> list[str]:
    words: list[str] = []
    for flag in flags:
        try:
            words += shlex.split(flag)
        except ValueError:
            words.append(flag)
    # nvcc forwards -Xcompiler=a,b / --compiler-options=a,b to the host compiler: read those too.
    for word in list(words):
        for prefix in ("-Xcompiler=", "--compiler-options=", "-Xlinker=", "--linker-options="):
            if word.startswith(prefix):
                words += word[len(prefix) :].split(",")
    paths = []
    for i, word in enumerate(words):
        if word.startswith("@"):
            paths.append(word[1:])
        for prefix in PATH_FLAGS:
            if word == prefix and i + 1 < len(words):
                paths.append(words[i + 1])
            elif word.startswith(prefix) and len(word) > len(prefix):
                rest = word[len(prefix) :].lstrip("=")
                paths += [p for p in rest.split(",") if p.startswith("/")] if prefix == "-Wl," else [rest]
    return paths


@dataclass(frozen=True)
class Toolchain:
    """Everything outside the request that decides the bytes a build produces."""

    torch: str
    torch_cuda: str | None
    python: str
    platform: str
    cxx: str
    cxx_version: str
    nvcc: str | None
    nvcc_version: str | None
    cuda_arch_list: str | None
    cxx11_abi: bool | None
    torch_include: str
    extra: dict[str, str] = field(default_factory=dict)

    def fingerprint(self) -> str:
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def detect(cls) -> Toolchain:
        """The toolchain this process would build with (compilers are asked for their versions once)."""
        import torch
        import torch.utils.cpp_extension as ce

        cxx = os.environ.get("CXX", "c++")
        nvcc = _nvcc_path()
        env_keys = ("CC", "CXX", "PYTORCH_NVCC", "CUDA_HOME")
        return cls(
            torch=str(torch.__version__),
            torch_cuda=torch.version.cuda,
            python=f"{sys.implementation.cache_tag}-{sys.version_info[0]}.{sys.version_info[1]}",
            platform=f"{platform.system()}-{platform.machine()}",
            cxx=cxx,
            cxx_version=_tool_version((cxx, "--version")),
            nvcc=nvcc,
            nvcc_version=_tool_version((nvcc, "--version")) if nvcc else None,
            cuda_arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"),
            cxx11_abi=getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None),
            torch_include=os.path.join(os.path.dirname(os.path.abspath(ce.__file__)), "..", "include"),
            extra={k: os.environ[k] for k in env_keys if k in os.environ},
        )


def _nvcc_path() -> str | None:
    explicit = os.environ.get("PYTORCH_NVCC")
    if explicit:
        return explicit
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=8)
def _tool_version(argv: tuple[str, ...]) -> str:
    try:
        done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {type(exc).__name__}"
    text = (done.stdout or done.stderr).strip()
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[:400]


def request_key(request: ExtensionRequest, toolchain: Toolchain) -> str:
    """Content key (hex) over the normalized sources, every build argument and the toolchain.

    Sources are joined as ``load_inline`` joins them and normalized by ``normalize_source``, which
    only removes what no compiler can observe, so two requests with one key compile to the same
    code. Files reached through include paths and flags are covered by a fingerprint of their
    paths, sizes and modification times (see ``external_fingerprint``).
    """
    payload = {
        "v": KEY_VERSION,
        "name": request.name,
        "cpp": normalize_source("\n".join(request.cpp_sources)),
        "cuda": normalize_source("\n".join(request.cuda_sources)) if request.cuda_sources else None,
        "functions": None if request.functions is None else [list(f) for f in request.functions],
        "extra_cflags": list(request.extra_cflags),
        "extra_cuda_cflags": list(request.extra_cuda_cflags),
        "extra_ldflags": list(request.extra_ldflags),
        "extra_include_paths": list(request.extra_include_paths),
        "with_cuda": request.uses_cuda,
        "is_python_module": request.is_python_module,
        "with_pytorch_error_handling": request.with_pytorch_error_handling,
        "no_implicit_headers": request.no_implicit_headers,
        "external": external_fingerprint(request),
        "toolchain": dataclasses.asdict(toolchain),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def external_fingerprint(request: ExtensionRequest) -> list[list[Any]] | str:
    """(path, size, mtime_ns) of every file reached through the request's include paths and flags.

    Returns the string ``"uncacheable"`` when a directory holds more than ``_FINGERPRINT_LIMIT``
    files: ``is_cacheable`` then says no and callers build such requests every time.
    """
    entries: list[list[Any]] = []
    for path in request.referenced_paths():
        if not os.path.exists(path):
            entries.append([path, None, None])
            continue
        if os.path.isfile(path):
            st = os.stat(path)
            entries.append([path, st.st_size, st.st_mtime_ns])
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                entries.append([full, st.st_size, st.st_mtime_ns])
                if len(entries) > _FINGERPRINT_LIMIT:
                    return "uncacheable"
    return entries


def is_cacheable(request: ExtensionRequest) -> bool:
    return external_fingerprint(request) != "uncacheable"


# Flags trusted code may pass to a compiler while making shared files from torch's own headers
# (``prime.prime``): optimization, language, macros with plain values, warnings and targets.
# Nothing here names a file, loads a plugin, runs a wrapper or forwards options to another tool.
_PLAIN_FLAG = re.compile(
    r"-O[0-3sgz]?|-std=(c|gnu)\+\+\d\d|-[DU][A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-g|-lineinfo"
    r"|-w|-W[a-z][a-z0-9-]*|-Wno-[a-z][a-z0-9-]*|-f(no-)?[a-z][a-z0-9-]*|-march=native|-m(avx2?|fma|f16c)"
    r"|-?-use_fast_math|--expt-relaxed-constexpr|--expt-extended-lambda|-Xptxas=-v|--ptxas-options=-v"
    r"|-res-usage|-arch=sm_\d+a?|-gencode=arch=compute_\d+a?,code=(sm|compute)_\d+a?|--?maxrregcount=\d+"
    r"|--fmad=(true|false)|--extra-device-vectorization|-DNDEBUG"
)
_NO_PLUGIN = ("-fplugin", "-fprofile", "-fdump", "-fstack-usage", "-fcallgraph", "-fsave", "-fdebug-prefix")
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
MAX_SOURCE_BYTES = 512 << 10  # one request's sources together (frames between processes are 1 MiB)
MAX_FLAGS = 64


def flags_are_plain(request: ExtensionRequest) -> bool:
    """Every flag is on the plain list and no include path is added: safe for trusted ``prime``."""
    if request.extra_include_paths or request.extra_ldflags and not _plain(request.extra_ldflags):
        return False
    return _plain(request.extra_cflags) and _plain(request.extra_cuda_cflags)


def _plain(flags: tuple[str, ...]) -> bool:
    for flag in flags:
        try:
            words = shlex.split(flag)
        except ValueError:
            return False
        for word in words:
            if not _PLAIN_FLAG.fullmatch(word) or word.startswith(_NO_PLUGIN):
                return False
    return True


def check_limits(request: ExtensionRequest) -> None:
    """``ValueError`` for a request no honest ``load_inline`` call makes: a name that is not an
    identifier (it becomes a file and a module name), sources or flags beyond sane sizes."""
    if not NAME_PATTERN.fullmatch(request.name):
        raise ValueError(f"extension name {request.name[:80]!r} is not a Python identifier")
    size = sum(len(s.encode()) for s in (*request.cpp_sources, *request.cuda_sources))
    if size > MAX_SOURCE_BYTES:
        raise ValueError(f"the sources are {size} bytes; at most {MAX_SOURCE_BYTES} are accepted")
    count = len(request.extra_cflags) + len(request.extra_cuda_cflags) + len(request.extra_ldflags)
    if count + len(request.extra_include_paths) > MAX_FLAGS:
        raise ValueError(f"more than {MAX_FLAGS} extra flags and include paths")
    for what, names in (("functions", request.functions or ()),):
        for fname, _doc in names:
            if not NAME_PATTERN.fullmatch(fname):
                raise ValueError(f"{what}: {fname[:80]!r} is not a C++ identifier")
    for text in (*request.cpp_sources, *request.cuda_sources, *request.extra_cflags):
        if "\x00" in text:
            raise ValueError("a source or flag holds a NUL byte")


_TORCH_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"](torch|ATen|c10|pybind11)/", re.MULTILINE)


def layout(request: ExtensionRequest) -> str:
    """``fast``: CUDA sources that include no torch, ATen, c10 or pybind11 header (the layout the
    prompt recommends: kernels and an ``extern "C"`` launcher in the ``.cu``, the torch wrapper in
    ``cpp_sources``) with ``no_implicit_headers``, so nvcc never parses torch; ``torch_headers``:
    CUDA sources that do (``load_inline`` prepends ``torch/types.h`` unless told not to);
    ``cpp``: no CUDA sources."""
    if not request.cuda_sources:
        return "cpp"
    if request.no_implicit_headers and not any(_TORCH_INCLUDE.search(s) for s in request.cuda_sources):
        return "fast"
    return "torch_headers"

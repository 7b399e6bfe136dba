"""Real builds through the buildkit: compilers run, libraries load, caches hit, fallbacks engage.

The C++ extension is a plain CPython module (no torch headers), so it builds in seconds on two
cores. CUDA checks are compile-only (the CPU build of torch has no CUDA libraries to link) and are
skipped where nvcc is missing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stark_mcp.evaluator import buildkit
from stark_mcp.evaluator.buildkit import ExtensionRequest, build
from stark_mcp.evaluator.buildkit.ninja import parse

pytestmark = pytest.mark.slow

EVALUATOR_DIR = Path(buildkit.__file__).resolve().parents[1]

TOTAL_CPP = r"""
#include <Python.h>
// Sums a sequence of numbers: a C++ extension with no torch headers, so it builds in seconds.
static PyObject* total(PyObject*, PyObject* args) {
    PyObject* seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) return NULL;
    PyObject* it = PyObject_GetIter(seq);
    if (!it) return NULL;
    double s = 0;
    for (PyObject* x; (x = PyIter_Next(it)); Py_DECREF(x)) s += PyFloat_AsDouble(x);
    Py_DECREF(it);
    return PyFloat_FromDouble(s);
}
static PyMethodDef methods[] = {{"total", total, METH_VARARGS, "sum"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "stark_bk_total", NULL, -1, methods};
PyMODINIT_FUNC PyInit_stark_bk_total(void) { return PyModule_Create(&mod); }
"""

SCALE_CU = r"""
#include <cuda_runtime.h>
#include <stdint.h>
namespace { __device__ float scale_factor = 2.0f; }  // internal: its symbol carries the module id
__global__ void scale_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = scale_factor * x[i];
}
extern "C" int scale_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
    scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, n);
    return (int)cudaGetLastError();
}
"""

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"),
    reason="no nvcc on this machine: CUDA compile checks need the CUDA toolkit",
)


@pytest.fixture
def cuda_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # no GPU here: torch needs an explicit target


@pytest.fixture
def installed():
    yield buildkit.install
    buildkit.uninstall()


def test_cpu_extension_builds_imports_computes_and_the_next_build_is_a_cache_hit(tmp_path, installed) -> None:
    from torch.utils import cpp_extension

    resolver = buildkit.local_resolver(str(tmp_path / "cache"))
    installed(resolver)
    module = cpp_extension.load_inline(name="stark_bk_total", cpp_sources=TOTAL_CPP, no_implicit_headers=True)
    assert module.total([1.5, 2.5, 3.0]) == 7.0
    assert module.__file__.startswith(str(tmp_path / "cache"))
    assert (resolver.builds, resolver.hits) == (1, 0)
    assert resolver.last_report is not None and resolver.last_report.strategy == "fast"

    # A fresh resolver on the same cache must not need a compiler: hide them all.
    again = buildkit.local_resolver(str(tmp_path / "cache"), env={"PATH": "/nonexistent"})
    request = ExtensionRequest.from_load_inline(
        "stark_bk_total", TOTAL_CPP + "\n// resubmitted with a new comment\n", no_implicit_headers=True
    )
    assert again(request) == os.path.dirname(module.__file__)
    assert (again.builds, again.hits) == (0, 1)


def test_build_errors_surface_as_torchs_runtime_error(tmp_path, installed) -> None:
    from torch.utils import cpp_extension

    installed(buildkit.local_resolver(str(tmp_path / "cache")))
    with pytest.raises(
        RuntimeError, match=r"Error building extension 'stark_bk_broken'(.|\n)*undeclared_thing"
    ):
        cpp_extension.load_inline(
            name="stark_bk_broken",
            cpp_sources="int f() { return undeclared_thing; }",
            no_implicit_headers=True,
        )
    with pytest.raises(TypeError):
        cpp_extension.load_inline(name="x", cpp_sources="", not_an_argument=1)
    assert not list((tmp_path / "cache").glob("*.tmp"))  # failed work directories are removed


def test_buildkit_imports_without_stark_mcp() -> None:
    """The evaluator imports it as ``buildkit`` inside sandboxes where stark_mcp is absent."""
    code = (
        f"import sys; sys.path.insert(0, {str(EVALUATOR_DIR)!r}); import buildkit, buildkit.compile_main; "
        "bad = sorted(m for m in sys.modules if m.startswith('stark_mcp')); assert not bad, bad; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr


def _cuda_request(cuda: str, name: str, **extra: object) -> ExtensionRequest:
    return ExtensionRequest.from_load_inline(
        name, cpp_sources="#include <stdint.h>\n", cuda_sources=cuda, no_implicit_headers=True, **extra
    )


@needs_nvcc
def test_cuda_parallel_steps_give_nvccs_object_byte_for_byte(tmp_path, cuda_env) -> None:
    report = build(_cuda_request(SCALE_CU, "stark_bk_scale"), str(tmp_path / "out"), link=False)
    assert report.ok, report.log
    assert [s.variant for s in report.steps if s.target == "cuda.cuda.o"] == ["parallel"]
    build_dir = tmp_path / "out" / "build"
    nf = parse((build_dir / "build.ninja").read_text())
    edge = next(e for e in nf.edges if e.rule == "cuda_compile")
    # nvcc itself, keeping its intermediates under the same file names as ours: otherwise the only
    # difference is its temp file's name, which the host compiler records in the symbol table.
    plain = nf.command(edge).replace(" -o cuda.cuda.o", " -o plain.cuda.o --keep --keep-dir kd")
    assert " -o plain.cuda.o" in plain
    (build_dir / "kd").mkdir()
    subprocess.run(plain, shell=True, cwd=build_dir, check=True, capture_output=True)
    module_id = re.compile(rb"_[0-9a-f]{8}_7_cuda_cu_[0-9a-f]{8}")
    raw = [(build_dir / f).read_bytes() for f in ("cuda.cuda.o", "plain.cuda.o")]
    assert all(module_id.search(r) for r in raw) and raw[0] != raw[1]  # each has its own module id
    ours, theirs = (module_id.sub(b"ID", r) for r in raw)
    assert ours == theirs  # the same code; only the module id's spelling differs


@needs_nvcc
def test_light_include_set_that_fails_falls_back_to_the_original(tmp_path, cuda_env) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "bk_full.h").write_text(
        "#pragma once\nstruct Box { float v; };\n__device__ inline float unbox(Box b) { return b.v; }\n"
    )
    # Mentions ``unbox`` (in a string), so the profile does not see it as a name only the full header has.
    (inc / "bk_light.h").write_text(
        '#pragma once\nstruct Box { float v; };\nstatic const char* bk_names = "unbox";\n'
    )
    cuda = "#include <bk_full.h>\n__global__ void k(Box* b, float* y) { y[0] = unbox(b[0]); }\n"
    report = build(
        _cuda_request(cuda, "stark_bk_light", extra_include_paths=[str(inc)]),
        str(tmp_path / "out"),
        link=False,
        pch_dir=str(tmp_path / "toolchain"),
        light_substitutes={"bk_full.h": "bk_light.h"},
    )
    assert report.ok, report.log
    variants = [(s.variant, s.ok) for s in report.steps if s.target == "cuda.cuda.o"]
    assert variants == [("light+parallel", False), ("parallel", True)]
    assert any("light include set did not compile" in f for f in report.fallbacks)
    assert (tmp_path / "out" / "build" / "cuda.cu").read_text() == cuda  # the original text is back


@needs_nvcc
def test_cuda_compile_error_fails_once_with_the_compilers_message(tmp_path, cuda_env) -> None:
    cuda = SCALE_CU.replace("scale_factor * x[i]", "undeclared_gain * x[i]")
    report = build(_cuda_request(cuda, "stark_bk_err"), str(tmp_path / "out"), link=False)
    assert not report.ok
    assert "undeclared_gain" in report.log and "error" in report.log
    assert report.log.startswith("Error building extension 'stark_bk_err'")
    # A diagnostic from nvcc's own steps is final: nvcc is not run a second time.
    assert [s.variant for s in report.steps if s.target == "cuda.cuda.o"] == ["parallel"]


def test_compile_main_rejects_an_unusable_request(tmp_path) -> None:
    bad = tmp_path / "request.json"
    bad.write_text('{"name": "x", "cpp_sources": [1, 2]}')
    main = EVALUATOR_DIR / "buildkit" / "compile_main.py"
    done = subprocess.run(
        [sys.executable, str(main), str(bad), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "unusable request" in done.stderr, shlex.join(done.args)


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_shared_pch_is_made_once_used_by_gcc_and_ignored_when_flags_differ(tmp_path) -> None:
    from stark_mcp.evaluator.buildkit import pch

    inc = tmp_path / "inc" / "bk"
    inc.mkdir(parents=True)
    (inc / "big.h").write_text(
        "#pragma once\n#include <map>\n#include <string>\ninline int bk_scale() { return BK_SCALE; }\n"
    )
    (tmp_path / "main.cpp").write_text("#include <bk/big.h>\nint main() { return bk_scale() - 3; }\n")
    flags = [
        "-isystem",
        str(tmp_path / "inc"),
        "-DBK_SCALE=3",
        "-DTORCH_EXTENSION_NAME=any_name",
        "-std=c++17",
    ]
    # what a maker killed mid-way leaves beside the header: removed by the next maker
    key = pch.pch_key(["c++"], pch.pch_flags(flags), str(inc / "big.h"), "test")
    leftover = tmp_path / "pch" / key / "bk" / "tmpkilled.gch.tmp"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"\0" * 4096)
    made = pch.ensure_pch(str(tmp_path / "pch"), ["c++"], flags, "bk/big.h", [str(tmp_path / "inc")], "test")
    assert made.built_seconds is not None and made.path and os.path.getsize(made.path) > 0
    assert not leftover.exists() and os.path.dirname(made.path) == str(leftover.parent)
    # Compile jails run as a uid of their own: a header only its maker can read is silently skipped.
    assert os.stat(made.path).st_mode & 0o044 == 0o044
    again = pch.ensure_pch(
        str(tmp_path / "pch"),
        ["c++"],
        flags[:3] + ["-DTORCH_EXTENSION_NAME=other"] + flags[4:],
        "bk/big.h",
        [str(tmp_path / "inc")],
        "test",
    )
    assert again.path == made.path and again.built_seconds is None  # the extension's name is not in the key

    def compile_with(extra: list[str]) -> str:
        done = subprocess.run(
            ["c++", *extra, *made.flags, "-H", "-c", "main.cpp", "-o", "main.o"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stderr

    assert "! " in compile_with(flags)  # gcc -H marks a used precompiled header with "!"
    other = compile_with([f if f != "-DBK_SCALE=3" else "-DBK_SCALE=4" for f in flags])
    assert "! " not in other and "not used because" in other  # a macro the header reads differs: real header


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_a_source_that_includes_the_header_again_still_uses_the_pch(tmp_path) -> None:
    """``load_inline`` writes the include and most candidates write it again; GCC then looks for the
    header itself beside the ``.gch`` it used. A source error is the source's, not the header's."""
    from stark_mcp.evaluator.buildkit import pch

    inc = tmp_path / "inc" / "bk"
    inc.mkdir(parents=True)
    (inc / "big.h").write_text("#pragma once\n#include <map>\ninline int bk_scale() { return 3; }\n")
    flags = ["-isystem", str(tmp_path / "inc"), "-std=c++17"]
    made = pch.ensure_pch(str(tmp_path / "pch"), ["c++"], flags, "bk/big.h", [str(tmp_path / "inc")], "test")
    assert made.flags and made.path

    def compile_source(text: str, *extra: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "main.cpp").write_text(text)
        return subprocess.run(
            ["c++", *flags, *made.flags, *extra, "-c", "main.cpp", "-o", "main.o"],
            cwd=tmp_path, capture_output=True, text=True, check=False,
        )  # fmt: skip

    twice = compile_source("#include <bk/big.h>\n#include <bk/big.h>\nint f() { return bk_scale(); }\n", "-H")
    assert twice.returncode == 0, twice.stderr
    assert "! " in twice.stderr  # the precompiled header was used for the first include
    broken = compile_source("#include <bk/big.h>\nint f() { return bk_scale() + undeclared_name; }\n")
    assert broken.returncode != 0 and "undeclared_name" in broken.stderr
    assert not pch.blames_pch(broken.stderr, made)  # built once: the same error would recur without it
    # what the second include met before the header was copied beside the .gch
    (tmp_path / "pch").joinpath(os.path.relpath(made.path, tmp_path / "pch")[: -len(".gch")]).unlink()
    missing = compile_source("#include <bk/big.h>\n#include <bk/big.h>\nint f() { return bk_scale(); }\n")
    assert missing.returncode != 0 and pch.blames_pch(missing.stderr, made), missing.stderr


RELU_CPP = r"""
#include <torch/extension.h>
torch::Tensor relu_twice(torch::Tensor x) { return torch::relu(x) * 2; }
"""


# Builds with the light set, where torch::optim is only its own empty namespace; the full set declares
# torch::optim::SGD too, and the call is ambiguous there, as in torch's own build: the case the
# profile exists for (a light build must not succeed where torch's fails). Failing, the full compile
# also costs less than a whole one.
BLOCKED_CPP = RELU_CPP + (
    "namespace torch { namespace optim {} }\nusing namespace torch::optim;\n"
    "static int SGD(int x) { return x; }\nint sgd_used() { return SGD(1); }\n"
)


@pytest.fixture(scope="module")
def light_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, list[str], Path]]:
    """Two builds started before trusted code makes their profile, as a GPU machine's first builds
    with new flags are: one source the profile allows, one it blocks. Each runs as a compile jail
    runs it (``compile_main --pch-readonly --await-profiles``), side by side; the one profile both
    wait for is made once, while they compile. (report, fallbacks but the header's, output folder)"""
    import threading

    from stark_mcp.evaluator.buildkit.build_report import BuildReport
    from stark_mcp.evaluator.buildkit.prime import prime

    tmp = tmp_path_factory.mktemp("light")
    toolchain = str(tmp / "toolchain")
    requests = {
        "kept": ExtensionRequest.from_load_inline("stark_bk_light_wait", RELU_CPP, functions=["relu_twice"]),
        "dropped": ExtensionRequest.from_load_inline(
            "stark_bk_light_blocked", BLOCKED_CPP, functions=["relu_twice"]
        ),
    }
    notes: list[str] = []
    # a light compile takes about what the profile takes: starting the profile late makes each build
    # find no profile when it starts, compile meanwhile, and wait for it afterwards
    def make_profile() -> None:
        notes.extend(prime(requests["kept"], str(tmp / "prime"), toolchain, ("light",)))

    primer = threading.Timer(2.0, make_profile)
    started = time.time()
    builds = {}
    for kind, request in requests.items():
        (tmp / f"{kind}.json").write_text(request.to_json())
        builds[kind] = subprocess.Popen(
            [sys.executable, str(EVALUATOR_DIR / "buildkit" / "compile_main.py"), str(tmp / f"{kind}.json"),
             str(tmp / kind), "--pch-dir", toolchain, "--pch-readonly", "--await-profiles", "120"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    primer.start()
    try:
        for proc in builds.values():
            proc.wait(600)
    finally:
        primer.join()
    (profile,) = (tmp / "toolchain" / "light").glob("light2-*.json")  # one profile serves both
    assert profile.stat().st_mtime > started + 1  # made after the builds had started
    assert len(notes) == 1 and notes[0].startswith("host light profile: "), notes
    out = {}
    for kind in requests:
        report = BuildReport.from_dict(json.loads((tmp / kind / "build_report.json").read_text()))
        out[kind] = (report, [f for f in report.fallbacks if "precompiled header" not in f], tmp / kind)
    return out


@pytest.mark.slow(seconds=85)  # the fixture takes minutes: handed out early (tests/conftest.py)
@pytest.mark.xdist_group("light_builds")  # one worker makes the module's fixture once
def test_a_light_host_file_compiled_while_its_profile_is_made_is_kept_if_the_profile_allows(
    light_builds,
) -> None:
    """A GPU machine's first build with new flags does not wait for the precompiled header: its
    host file drops ``torch/all.h`` (keeping ``torch/python.h`` for the bindings) when the profile
    trusted code makes allows it, even one made while the compile runs, and the library it gives
    computes what the full include set's does."""
    import importlib.util

    import torch

    from stark_mcp.evaluator.buildkit import light

    report, fallbacks, out = light_builds["kept"]
    assert report.ok, report.log
    assert [(s.variant, s.ok) for s in report.steps if s.target == "main.o"] == [("light", True)]
    assert fallbacks == []
    assert (out / "build" / "main.cpp").read_text().count("#include <torch/extension.h>") == 2
    library = out / "stark_bk_light_wait.so"
    spec = importlib.util.spec_from_file_location("stark_bk_light_wait", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(64)
    assert torch.equal(module.relu_twice(x), torch.relu(x) * 2)

    # A source naming what only torch/all.h declares (optimizers, most nn modules) keeps the full set.
    (profile_file,) = (out.parent / "toolchain" / "light").glob("light2-*.json")
    profile = light.Profile(**{k: frozenset(v) for k, v in json.loads(profile_file.read_text()).items()
                               if k in ("macros", "names")})
    assert "SGD" in light.blocking_names("auto opt = torch::optim::SGD(params, 0.1);", profile)
    assert light.blocking_names(RELU_CPP, profile) == []


@pytest.mark.xdist_group("light_builds")
def test_a_light_host_file_compiled_while_its_profile_is_made_is_dropped_if_it_blocks(light_builds) -> None:
    # Compiles with the light set; the profile, made meanwhile, finds SGD called, a name only
    # torch/all.h also declares: the light object is dropped and the original fails as torch's would.
    report, fallbacks, _ = light_builds["dropped"]
    steps = [(s.variant, s.ok) for s in report.steps if s.target == "main.o"]
    assert steps == [("light", True), ("plain", False)]
    assert not report.ok and "ambiguous" in report.log and "SGD" in report.log, report.log[-2000:]
    assert len(fallbacks) == 1 and "SGD" in fallbacks[0], fallbacks


def test_a_jail_waiting_for_a_profile_stops_at_its_makers_failure_or_its_deadline(tmp_path) -> None:
    import threading

    from stark_mcp.evaluator.buildkit import light

    def load(wait: float) -> light.Profile:
        return light.load_or_make_profile(str(tmp_path), "k", [], "a.h", "b.h", make=False, wait=wait)

    start = time.monotonic()
    with pytest.raises(RuntimeError, match=light.NOT_MADE):
        load(0.3)
    assert 0.3 <= time.monotonic() - start < 5
    path = light.profile_path(str(tmp_path), "k")
    Path(path + ".failed").write_text("preprocessing failed")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="failed"):
        load(60.0)
    assert time.monotonic() - start < 5  # the maker's failure ends the wait at once
    Path(path + ".failed").unlink()
    # published as the maker publishes it: a plain write_text let the waiter read an empty file
    threading.Timer(0.3, light.publish_profile, (path, {"macros": ["M"], "names": ["n"]})).start()
    assert load(60.0) == light.Profile(macros=frozenset({"M"}), names=frozenset({"n"}))

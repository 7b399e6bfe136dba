"""Build-cache keys: only changes no compiler can observe may share a key."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from stark_mcp.evaluator.buildkit import ExtensionRequest, Toolchain, normalize_source, request_key
from stark_mcp.evaluator.buildkit.light import Profile, blocking_names, rewrite
from stark_mcp.evaluator.buildkit.nvccplan import PlanUnavailable, parse_dry_run
from stark_mcp.evaluator.buildkit.pch import first_include

BASE = """#include <torch/extension.h>
#define SCALE(x) ((x) * 2.0f)

// doubles every element
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);  /* output */
    const char* msg = "// not a comment";
    int big = 1'000'000;
    char q = '"';
    return y;
}
"""

# Each keeps the code and its line numbers and columns: same key.
SAME = [
    BASE.replace("// doubles every element", "// twice the input, elementwise"),
    BASE.replace("/* output */", "/* the result */"),
    BASE.replace("/* output */", ""),
    BASE.replace("return y;", "return y;   \t"),
    BASE + "\n\n\n// trailing notes\n",
    BASE.replace("\n", "\r\n"),
    BASE.replace("// doubles every element", "/* doubles\n   every element */").replace(
        "#define SCALE(x) ((x) * 2.0f)\n\n", "#define SCALE(x) ((x) * 2.0f)\n"
    ),
]

# Each changes what is compiled, a line number, a column, or a literal: different key.
DIFFERENT = [
    BASE.replace("2.0f", "3.0f"),
    BASE.replace("#define SCALE(x)", "#define SCALE (x)"),
    BASE.replace('"// not a comment"', '"// not a remark"'),
    BASE.replace("1'000'000", "1'000'001"),
    "\n" + BASE,
    BASE.replace("// doubles every element\n", ""),
    BASE.replace(
        "auto y = torch::empty_like(x);  /* output */", "/* output */ auto y = torch::empty_like(x);"
    ),
    BASE.replace("    auto y", "  auto y"),
    BASE.replace("char q = '\"';", "char q = '\\'';"),
]


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return Toolchain.detect()


def _request(cpp: str, **changes: object) -> ExtensionRequest:
    base = ExtensionRequest(name="twice", cpp_sources=(cpp,), functions=(("twice", "twice"),))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_comment_and_whitespace_changes_share_a_key(toolchain: Toolchain) -> None:
    key = request_key(_request(BASE), toolchain)
    for variant in SAME:
        assert request_key(_request(variant), toolchain) == key, variant


def test_code_line_and_literal_changes_get_their_own_key(toolchain: Toolchain) -> None:
    keys = {request_key(_request(v), toolchain) for v in [BASE, *DIFFERENT]}
    assert len(keys) == len(DIFFERENT) + 1


def test_every_build_argument_and_the_toolchain_are_in_the_key(toolchain: Toolchain) -> None:
    base = _request(BASE)
    variants = [
        dataclasses.replace(base, name="twice2"),
        dataclasses.replace(base, functions=(("twice", "doc"),)),
        dataclasses.replace(base, functions=None),
        dataclasses.replace(base, extra_cflags=("-O3",)),
        dataclasses.replace(base, extra_cuda_cflags=("--use_fast_math",)),
        dataclasses.replace(base, extra_ldflags=("-lm",)),
        dataclasses.replace(base, cuda_sources=("__global__ void k() {}",)),
        dataclasses.replace(base, with_pytorch_error_handling=False),
        dataclasses.replace(base, no_implicit_headers=True),
        dataclasses.replace(base, is_python_module=False),
    ]
    keys = {request_key(r, toolchain) for r in [base, *variants]}
    assert len(keys) == len(variants) + 1
    other = dataclasses.replace(toolchain, cuda_arch_list="8.0")
    assert request_key(base, other) != request_key(base, toolchain)


def test_load_inline_spellings_of_one_request_share_a_key(toolchain: Toolchain) -> None:
    a = ExtensionRequest.from_load_inline("m", cpp_sources=["int a;", "int b;"], functions=["f"])
    b = ExtensionRequest.from_load_inline("m", cpp_sources="int a;\nint b;", functions={"f": "f"})
    assert request_key(a, toolchain) == request_key(b, toolchain)
    assert ExtensionRequest.from_json(a.to_json()) == a


def test_included_files_are_fingerprinted(tmp_path, toolchain: Toolchain) -> None:
    header = tmp_path / "inc" / "helper.h"
    header.parent.mkdir()
    header.write_text("#define K 1\n")
    request = _request(BASE, extra_include_paths=(str(header.parent),))
    before = request_key(request, toolchain)
    header.write_text("#define K 22\n")
    assert request_key(request, toolchain) != before


@pytest.mark.parametrize(
    "text",
    [
        'auto s = R"(// kept)";\n',  # raw string
        "int a; // comment \\\nint b;\n",  # comment continued by a backslash
        "#error don't do that // ok\n",  # unbalanced quote in a directive
        "#include <odd//name.h>\n",  # comment marker in a header name
        "int a;\rint b; // x\n",  # lone CR line end
    ],
)
def test_sources_the_scanner_cannot_read_are_left_alone(text: str) -> None:
    assert normalize_source(text) == text


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler to preprocess with")
def test_normalized_sources_preprocess_to_the_same_tokens_and_lines(tmp_path) -> None:
    """The compiler's own view: the same preprocessed text, line markers included, up to spacing."""
    path = tmp_path / "src.cpp"

    def preprocess(text: str) -> list[list[str]]:
        path.write_text(text.replace("#include <torch/extension.h>", "#include <cstddef>"))
        out = subprocess.run(["c++", "-E", str(path)], capture_output=True, text=True, check=True).stdout
        return [line.split() for line in out.splitlines() if line.strip()]

    for variant in [BASE, *SAME[:-1]]:  # the last one moves a line on purpose (same key only via comments)
        assert preprocess(variant) == preprocess(normalize_source(variant))


def test_light_rewrite_keeps_line_numbers() -> None:
    text = '#include <cuda_runtime.h>\n  #  include "torch/extension.h" // all of torch\nint x;\n'
    light, swapped = rewrite(text, {"torch/extension.h": "torch/types.h"})
    assert swapped == ["torch/extension.h"]
    assert light.splitlines()[1].strip().startswith("#  include <torch/types.h>")
    assert light.count("\n") == text.count("\n")
    assert rewrite("#include <torch/extension.hpp>\n", {"torch/extension.h": "torch/types.h"})[1] == []


def test_first_include_finds_the_header_after_comments() -> None:
    assert (
        first_include("// host code\n/* a\n b */\n#include <torch/extension.h>\nint x;")
        == "torch/extension.h"
    )
    assert first_include("int x;\n#include <torch/extension.h>\n") is None
    assert first_include('#include "torch/extension.h"\n') is None


DRY_RUN = """#$ _NVVM_BRANCH_=nvvm
#$ CICC_PATH=/cuda/nvvm/bin
#$ gcc -E -x c++ -D__CUDACC__ "cuda.cu" -o "kd/cuda.cpp4.ii"
#$ cudafe++ --c++20 --gen_c_file_name "kd/cuda.cudafe1.cpp" --stub_file_name "cuda.cudafe1.stub.c" \
--gen_module_id_file --module_id_file_name "kd/cuda.module_id" "kd/cuda.cpp4.ii"
#$ gcc -D__CUDA_ARCH__=900 -E -x c++ "cuda.cu" -o "kd/cuda.cpp1.ii"
#$ "$CICC_PATH/cicc" --c++20 --module_id_file_name "kd/cuda.module_id" --gen_c_file_name "kd/cuda.cudafe1.c" \
"kd/cuda.cpp1.ii" -o "kd/cuda.ptx"
#$ ptxas -arch=sm_90 -m64 "kd/cuda.ptx" -o "kd/cuda.cubin"
#$ fatbinary --create="kd/cuda.fatbin" -64 "--image3=kind=elf,sm=90,file=kd/cuda.cubin" \
--embedded-fatbin="kd/cuda.fatbin.c"
#$ gcc -c -x c++ "kd/cuda.cudafe1.cpp" -o "cuda.cuda.o"
""".replace("\\\n", "")


def test_nvcc_dry_run_splits_into_host_and_device_chains() -> None:
    plan = parse_dry_run(DRY_RUN)
    assert plan.env["CICC_PATH"] == "/cuda/nvvm/bin"
    assert [c.split()[0] for c in plan.host] == ["gcc", "cudafe++"]
    assert "--gen_module_id_file" not in plan.host[-1] and "--module_id_file_name" in plan.host[-1]
    assert [c.split()[0] for c in plan.device] == ["gcc", '"$CICC_PATH/cicc"', "ptxas", "fatbinary"]
    assert plan.final.startswith("gcc -c") and plan.module_id_file == "kd/cuda.module_id"


@pytest.mark.parametrize(
    "broken",
    [
        DRY_RUN.replace("--gen_module_id_file ", ""),  # id made elsewhere
        DRY_RUN.replace("#$ ptxas", "#$ nvlink -o x.o\n#$ ptxas"),  # device link (rdc)
        DRY_RUN.replace(
            '"kd/cuda.cpp1.ii" -o "kd/cuda.ptx"', '"kd/cuda.cpp4.ii" -o "kd/cuda.ptx"'
        ),  # reads host output
        "\n".join(line for line in DRY_RUN.splitlines() if "cudafe++" not in line),
    ],
)
def test_unexpected_nvcc_steps_give_no_plan(broken: str) -> None:
    with pytest.raises(PlanUnavailable):
        parse_dry_run(broken)


def test_light_swap_is_blocked_only_where_a_dropped_name_could_be_looked_up() -> None:
    profile = Profile(macros=frozenset({"TORCH_VERSION_MAJOR"}), names=frozenset({"rows", "Linear", "stack"}))
    plain_use = "int rows = x.size(0);\nfloat acc = rows * 2;\n"
    assert blocking_names(plain_use, profile) == []
    assert blocking_names("auto m = torch::nn::Linear(4, 4);\n", profile) == ["Linear"]
    assert blocking_names("auto y = stack(xs);\n", profile) == ["stack"]  # overloads, ADL
    assert blocking_names("#if TORCH_VERSION_MAJOR > 2\n#endif\n", profile) == ["TORCH_VERSION_MAJOR"]
    assert blocking_names("#ifdef rows\n#endif\n", profile) == ["rows"]


def test_paths_named_by_flags_are_found_even_through_nvcc_forwarding() -> None:
    request = ExtensionRequest(
        name="p",
        extra_cflags=("-I/opt/inc", "-fplugin=/tmp/p.so"),
        extra_cuda_cflags=("-Xcompiler=-include,/tmp/forced.h", "-isystem /opt/sys"),
        extra_ldflags=("-L/opt/lib", "-Wl,-rpath,/opt/rt"),
        extra_include_paths=("/opt/x",),
    )
    found = set(request.referenced_paths())
    assert {"/opt/inc", "/tmp/p.so", "/tmp/forced.h", "/opt/sys", "/opt/lib", "/opt/rt", "/opt/x"} <= found


def test_a_second_different_build_of_one_name_is_renamed_as_torch_does() -> None:
    from stark_mcp.evaluator.buildkit import intercept

    first = ExtensionRequest(name="stark_bk_versioned", cpp_sources=("int a;",))
    second = dataclasses.replace(first, cpp_sources=("int b;",))
    try:
        assert intercept._versioned(first).name == "stark_bk_versioned"
        assert intercept._versioned(second).name == "stark_bk_versioned_v1"
        assert intercept._versioned(first).name == "stark_bk_versioned"
    finally:
        intercept._state["versions"].pop("stark_bk_versioned", None)

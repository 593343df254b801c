"""Hot lines in load_inline's generated sources land on the line of the candidate's own `.py` string
(`profiler.source_map`). The generated `cuda.cu` / `main.cpp` are written by torch's own `load_inline` (on this
CPU-only torch its CUDA build then stops, after the files are written), so the mapping is checked against the
files the profiler's line info really names."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_lsp.profiler.model import HotLine, KernelProfile, ProfileResult
from forge_lsp.profiler.source_map import literal_line, map_hot_lines

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * 2.0f;  // HOT
    }
}

torch::Tensor scale(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_src = "torch::Tensor scale(torch::Tensor x);"

ext = load_inline(name="scale_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["scale"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale(x)
'''


def py_line(marker: str, source: str = CANDIDATE) -> int:
    return 1 + next(i for i, text in enumerate(source.splitlines()) if marker in text)


def generated_files(tmp_path, source: str = CANDIDATE):
    """What torch's load_inline writes for the candidate's strings (cuda.cu, main.cpp), in `tmp_path`."""
    from torch.utils.cpp_extension import load_inline

    ns: dict = {}
    exec(compile(source.split("ext = load_inline")[0], "cand", "exec"), ns)  # the strings, as Python makes them
    try:
        load_inline(
            name="scale_ext",
            cpp_sources=ns["cpp_src"],
            cuda_sources=ns["cuda_src"],
            functions=["scale"],
            build_directory=str(tmp_path),
        )
    except Exception:  # noqa: BLE001 - no CUDA toolkit for CPU torch: the files are written before the build
        pass
    return tmp_path / "cuda.cu", tmp_path / "main.cpp"


@pytest.mark.integration  # torch's load_inline runs ninja
def test_a_line_of_loads_inlines_cuda_cu_is_the_line_of_the_candidates_string(tmp_path):
    cu, _ = generated_files(tmp_path)
    generated = cu.read_text()
    gen_line = 1 + next(i for i, text in enumerate(generated.splitlines()) if "// HOT" in text)
    assert gen_line != py_line("// HOT")  # torch put its includes first: the lines differ
    assert literal_line(CANDIDATE, generated, gen_line) == py_line("// HOT")
    kernel_line = 1 + next(i for i, t in enumerate(generated.splitlines()) if "__global__" in t)
    assert literal_line(CANDIDATE, generated, kernel_line) == py_line("__global__ void scale_kernel")
    # torch's own includes come from no string of the file
    assert literal_line(CANDIDATE, generated, 1) is None


@pytest.mark.integration  # torch's load_inline runs ninja
def test_profile_hot_lines_in_the_generated_file_are_moved_to_the_py_file(tmp_path):
    cu, cpp = generated_files(tmp_path)
    gen = cu.read_text().splitlines()
    hot = 1 + next(i for i, text in enumerate(gen) if "// HOT" in text)
    result = ProfileResult(
        mode="ncu",
        kernels=[
            KernelProfile(
                name="scale_kernel",
                duration_ns=1000,
                hot_lines=[
                    HotLine(file=str(cu), line=hot, stall_pct=80.0, dominant_stall="long_scoreboard"),
                    HotLine(file=str(cu), line=1, stall_pct=1.0),  # an include: stays where it is
                    HotLine(file="/elsewhere/gone.cu", line=3, stall_pct=1.0),  # not readable here: stays
                ],
            )
        ],
    )
    assert map_hot_lines(result, CANDIDATE, "/work/cand.py") == 1
    first, include, gone = result.kernels[0].hot_lines
    assert (first.file, first.line) == ("/work/cand.py", py_line("// HOT"))
    assert first.compiled_as == f"{cu}:{hot}"
    assert (include.file, include.line, include.compiled_as) == (str(cu), 1, "")
    assert (gone.file, gone.line) == ("/elsewhere/gone.cu", 3)


def test_lines_of_a_string_a_build_changed_elsewhere_are_found_by_the_lines_around_them():
    """A build that rewrote the literal's includes (lighter headers): the body's lines still map by their context;
    a line present twice with the same context cannot be told apart and is left unmapped."""
    generated = CANDIDATE.split('r"""')[1].split('"""')[0].replace("#include <torch/extension.h>", "#include <slim.h>")
    generated = "// prelude\n#include <cuda.h>\n" + generated
    gen_hot = 1 + next(i for i, text in enumerate(generated.splitlines()) if "// HOT" in text)
    assert literal_line(CANDIDATE, generated, gen_hot) == py_line("// HOT")
    twice = CANDIDATE.replace("cpp_src = ", 'other = r"""\n    if (i < n) {\n"""\ncpp_src = ')
    gen_if = 1 + next(i for i, text in enumerate(generated.splitlines()) if "if (i < n)" in text)
    assert literal_line(twice, "    if (i < n) {\n", 1) is None
    assert literal_line(twice, generated, gen_if) == py_line("if (i < n)", twice)  # its context is unique


@pytest.mark.parametrize(
    "source",
    [
        'x = "a\\nb\\nc"\n',  # escaped newlines on one line: no line of the file is the value's
        'x = ("a\\n"\n     "b\\n")\n',  # implicitly joined
    ],
)
def test_strings_whose_lines_are_not_the_files_are_not_mapped(source):
    assert literal_line(source, "a\nb\nc", 2) is None


SCALE_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(1 << 24)]


def get_init_inputs():
    return []
"""


def profiled(tmp_path, task_source: str, candidate_source: str, path: str):
    """The candidate (written as `cand.py` beside its task) profiled through the explain use case on the GPU: its path
    and the `ProfileResult`, which must come from the path asked for (`cupti`: in the process; `spare`: in the
    process, one started ahead; `ncu`)."""
    from forge_lsp.usecases.explain import ProfileRequest, profile_target

    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(task_source)
    cand.write_text(candidate_source)
    request = ProfileRequest(
        target=task, candidate=cand, device="cuda:0", cache_dir=tmp_path / "cache", in_process=path != "ncu"
    )
    if path == "spare":  # in a spare process started ahead, as the language server and the Judge profile
        from forge_lsp.profiler.spare import shared
        from forge_lsp.usecases.explain import close_spares

        try:
            assert shared().wait_ready("cuda:0", tmp_path / "cache")
            result = profile_target(request, keep_spare=True).result
        finally:
            close_spares()
    else:
        result = profile_target(request).result
    assert result.mode == {"spare": "cupti"}.get(path, path), (result.reason, result.log_excerpt[-2000:])
    return cand, result


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["cupti", "spare", "ncu"])
def test_the_hot_line_of_a_load_inline_candidate_is_its_own_py_files_line(tmp_path, path):
    """On the GPU, in the process and under Nsight Compute: the hot line of the candidate's kernel is a line of its `.py` file, inside
    the kernel's string (the line compiled from it in load_inline's `cuda.cu` is kept beside it)."""
    cand, result = profiled(tmp_path, SCALE_TASK, CANDIDATE, path)
    kernel = next(k for k in result.kernels if "scale_kernel" in k.name)
    assert kernel.hot_lines, kernel
    top = max(kernel.hot_lines, key=lambda h: h.stall_pct)
    first, last = py_line("__global__ void scale_kernel"), py_line("// HOT") + 2
    assert top.file == str(cand) and first <= top.line <= last, top
    compiled = Path(top.compiled_as.rsplit(":", 1)[0])
    assert compiled.suffix == ".cu" and (tmp_path / "cache") in compiled.parents, top
    assert CANDIDATE.splitlines()[top.line - 1].strip() == top.source.strip() or not top.source, top


NVRTC_CANDIDATE = '''import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void gather_scale(const float* x, const int* idx, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[idx[i]];  // HOT
        y[i] = v * 0.5f;
    }
}
"""


class ModelNew(nn.Module):
    def forward(self, x, idx):
        k = fcuda.compile_kernel(SRC, "gather_scale")
        y = torch.empty_like(x)
        k(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, idx, y, x.numel()))
        return y
'''


def test_an_nvrtc_kernels_hot_sass_lands_on_its_line_in_the_candidates_py_string():
    """NVRTC's program is no file: its line info names a bare `gather_scale.cu`. The profiled process reports the
    programs it compiled (`ProfileResult.sources`), so the line is found in the `.py` string all the same. Real NVRTC
    (it compiles without a GPU) and the cubin's own line table (`profiler.cubin`)."""
    pytest.importorskip("cuda.bindings")
    pytest.importorskip("elftools")
    from forge_lsp.profiler.cubin import line_table
    from forge_lsp.runtime.compiler import compile_to_cubin, compiled_programs

    src = NVRTC_CANDIDATE.split('r"""')[1].split('"""')[0]
    cubin = compile_to_cubin(src, "gather_scale", arch="sm_90")
    programs = compiled_programs()
    assert programs["gather_scale.cu"] == src
    table = line_table(cubin)
    (kernel,) = table.kernels
    hot_row = next(r for r in table.kernels[kernel] if "// HOT" in src.split("\n")[r.line - 1])
    assert hot_row.file.endswith("gather_scale.cu")
    result = ProfileResult(
        mode="ncu",
        kernels=[
            KernelProfile(name=kernel, duration_ns=1.0, hot_lines=[HotLine(file=hot_row.file, line=hot_row.line)])
        ],
        sources=programs,
    )
    assert map_hot_lines(result, NVRTC_CANDIDATE, "/work/nvrtc_cand.py") == 1
    hot = result.kernels[0].hot_lines[0]
    assert (hot.file, hot.line) == ("/work/nvrtc_cand.py", py_line("// HOT", NVRTC_CANDIDATE))
    # without the programs the bare name is read from disk, where it is not: the line stays where it was
    unmapped = result.model_copy(deep=True, update={"sources": {}})
    unmapped.kernels[0].hot_lines[0] = HotLine(file=hot_row.file, line=hot_row.line)
    assert map_hot_lines(unmapped, NVRTC_CANDIDATE, "/work/nvrtc_cand.py") == 0


def test_hot_lines_in_the_workers_copy_of_a_file_land_on_the_users_file():
    """A Triton kernel's line info names the file its function was defined in: the worker's copy of the candidate
    (`modules/candidate_<hash>.py`, named by its contents). The explanation names the user's file, same line."""
    from conftest import FIXTURES

    from forge_lsp.engine import Candidate, load_task
    from forge_lsp.engine.logparse import worker_module_name
    from forge_lsp.usecases.common import worker_copies

    task = load_task(FIXTURES / "softmax_small.py")
    candidate = Candidate.from_source("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n", "mine")
    candidate = candidate.model_copy(update={"path": FIXTURES.parent / "mine.py"})
    copy = f"/cache/modules/{worker_module_name(candidate.source, 'candidate')}"
    task_copy = f"/cache/modules/{worker_module_name(task.source, 'task')}"
    result = ProfileResult(
        mode="ncu",
        kernels=[
            KernelProfile(
                name="_softmax_kernel",
                duration_ns=1.0,
                hot_lines=[
                    HotLine(file=copy, line=4),
                    HotLine(file=task_copy, line=7),
                    HotLine(file="/x/other.py", line=2),
                ],
            )
        ],
    )
    assert map_hot_lines(result, candidate.source, str(candidate.path), worker_copies(task, candidate)) == 2
    mine, theirs, other = result.kernels[0].hot_lines
    assert (mine.file, mine.line, mine.compiled_as) == (str(candidate.path), 4, f"{copy}:4")
    assert (theirs.file, theirs.line) == (str(task.path), 7)
    assert (other.file, other.compiled_as) == ("/x/other.py", "")


GATHER_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, idx):
        return x[idx.long()] * 0.5


def get_inputs():
    n = 1 << 24
    return [torch.randn(n), torch.randint(0, n, (n,), dtype=torch.int32)]


def get_init_inputs():
    return []
"""


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["cupti", "spare", "ncu"])
def test_the_hot_line_of_an_nvrtc_candidate_is_its_own_py_files_line(tmp_path, path):
    """On the GPU, in the process and under Nsight Compute: the hot line of an NVRTC kernel (a gather, stalled on its dependent load) is
    a line of the candidate's `.py` string, found through the programs the profiled process compiled."""
    cand, result = profiled(tmp_path, GATHER_TASK, NVRTC_CANDIDATE, path)
    assert "gather_scale.cu" in result.sources
    kernel = next(k for k in result.kernels if "gather_scale" in k.name)
    top = max(kernel.hot_lines, key=lambda h: h.stall_pct)
    first, last = py_line("__global__ void gather_scale", NVRTC_CANDIDATE), py_line("y[i] = v", NVRTC_CANDIDATE)
    assert top.file == str(cand) and first <= top.line <= last, top
    assert top.compiled_as.split(":")[0].endswith("gather_scale.cu"), top

"""SASS offsets to source lines from the cubins nvcc builds (`profiler/cubin.py`), and on to the line of the
candidate's `.py` string literal: the mapping a PC sample taken in the process goes through. Real nvcc builds on
the CPU machine (no GPU needed to compile or to read a cubin)."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from forge_lsp.profiler.cubin import cubins_of, fatbin_cubins, line_table, line_tables
from forge_lsp.profiler.model import HotLine, KernelProfile, ProfileResult
from forge_lsp.profiler.source_map import map_hot_lines

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler)"),
]

# three kernels, each on lines of its own: a table that gave one kernel's rows to another shows at once
KERNELS = """\
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

extern "C" __global__ void strided(const float* x, float* y, int n, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[(i * s) % n];
        y[i] = v + 1.0f;
    }
}

__global__ void reduce_rows(const float* x, float* out, int cols) {
    float acc = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
    atomicAdd(out + blockIdx.x, acc);
}
"""
LINES = {"scale": range(1, 5), "strided": range(6, 13), "reduce_rows": range(14, 19)}


def nvcc(*args: str, cwd: Path) -> None:
    done = subprocess.run(["nvcc", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def kernel_of(table, short: str) -> str:
    """The table's (mangled) name for a kernel."""
    names = [k for k in table.kernels if short in k]
    assert len(names) == 1, (short, list(table.kernels))
    return names[0]


def test_each_kernels_sass_maps_to_its_own_lines_in_a_cubin_and_in_a_shared_objects_fat_binary(tmp_path):
    (tmp_path / "k.cu").write_text(KERNELS)
    nvcc("-cubin", "-lineinfo", "-arch=sm_90", "-o", "k.cubin", "k.cu", cwd=tmp_path)
    nvcc(
        "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90",
        "-gencode", "arch=compute_80,code=sm_80", "-o", "k.so", "k.cu", cwd=tmp_path,
    )  # fmt: skip
    so = cubins_of(tmp_path / "k.so")
    assert {c.arch for c in so.cubins} >= {80, 90} and so.unreadable == 0
    for path in ("k.cubin", "k.so"):
        table, note = line_tables([tmp_path / path], arch=90)
        assert note == ""
        assert len(table.kernels) == 3, list(table.kernels)
        for short, lines in LINES.items():
            kernel = kernel_of(table, short)
            rows = table.kernels[kernel]
            assert [r.offset for r in rows] == sorted(r.offset for r in rows)
            assert rows[0].offset == 0 and table.line_of(kernel, 0) == (str(tmp_path / "k.cu"), lines[0])
            # its own lines of k.cu (inlined header code, such as atomicAdd's, names its header)
            assert {r.line for r in rows if r.file.endswith("k.cu")} <= set(lines), (short, rows)
            assert all(r.file.endswith("k.cu") or r.file.endswith((".h", ".hpp")) for r in rows), rows
            # an offset between two rows belongs to the earlier one
            last = rows[-1]
            assert table.line_of(kernel, last.offset + 8) == (last.file, last.line)
        assert table.line_of("no_such_kernel", 0) is None


def test_a_cubin_without_line_info_or_a_compressed_one_maps_nothing_and_says_why(tmp_path):
    (tmp_path / "k.cu").write_text(KERNELS)
    nvcc("-cubin", "-arch=sm_90", "-o", "plain.cubin", "k.cu", cwd=tmp_path)
    assert line_table((tmp_path / "plain.cubin").read_bytes()).kernels == {}
    nvcc("-cubin", "-lineinfo", "-arch=sm_90", "-o", "k.cubin", "k.cu", cwd=tmp_path)
    cubin = (tmp_path / "k.cubin").read_bytes()
    # a fat binary whose one ELF entry says it is compressed (what `-Xfatbin -compress-all` writes)
    import struct

    entry = struct.pack("<HHIQIIHHIII", 2, 0x101, 64, len(cubin), len(cubin) // 2, 0, 8, 1, 90, 0, 0)
    entry = entry.ljust(64, b"\0")
    blob = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry) + len(cubin)) + entry + cubin
    contents = fatbin_cubins(blob)
    assert contents.cubins == [] and contents.unreadable == 1
    (tmp_path / "not_elf.so").write_bytes(b"junk" * 10)
    table, note = line_tables([tmp_path / "not_elf.so", tmp_path / "gone.so"])
    assert table.kernels == {} and "gone.so" in note
    assert line_table(b"\x7fELF junk").kernels == {}


def test_a_load_inline_kernels_hot_offset_lands_on_its_line_in_the_candidates_py_string(tmp_path):
    """The chain a PC sample goes through: kernel + SASS offset -> line of load_inline's generated `cuda.cu`
    (torch puts three includes above the candidate's string) -> line of the string literal in the candidate's
    `.py` file, the file the user has open."""
    candidate = textwrap.dedent(
        '''\
        import torch
        from torch.utils.cpp_extension import load_inline

        cuda_source = """
        #include <cuda_runtime.h>

        __global__ void strided_copy(const float* x, float* y, int n, int s) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                float v = x[(i * s) % n];
                y[i] = v * 3.0f;
            }
        }
        """

        ext = load_inline(name="strided", cpp_sources="", cuda_sources=cuda_source, functions=[])
        '''
    )
    build = tmp_path / "torch_extensions" / "strided_0123"
    build.mkdir(parents=True)
    literal = candidate.split('cuda_source = """')[1].split('"""')[0]
    # torch/utils/cpp_extension.py load_inline: '#include <torch/types.h>', '<cuda.h>', '<cuda_runtime.h>', then the
    # string; a plain CUDA header stands in for torch's (the lines are what matters, not what they include)
    generated = "\n".join(["#include <cuda_runtime.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", literal])
    (build / "cuda.cu").write_text(generated)
    nvcc("-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-arch=sm_90", "-o", "strided.so", "cuda.cu", cwd=build)
    table, _ = line_tables([build / "strided.so"], arch=90)
    kernel = kernel_of(table, "strided_copy")
    load = [r for r in table.kernels[kernel] if "x[(i * s) % n]" in generated.split("\n")[r.line - 1]]
    assert load, table.kernels[kernel]
    file, line = table.line_of(kernel, load[0].offset)
    assert Path(file) == build / "cuda.cu"
    result = ProfileResult(
        mode="cupti",
        kernels=[KernelProfile(name=kernel, duration_ns=1.0, hot_lines=[HotLine(file=file, line=line, samples=9)])],
    )
    assert map_hot_lines(result, candidate, str(tmp_path / "candidate.py")) == 1
    hot = result.kernels[0].hot_lines[0]
    assert hot.file == str(tmp_path / "candidate.py")
    assert candidate.split("\n")[hot.line - 1].strip() == "float v = x[(i * s) % n];"
    assert hot.compiled_as == f"{file}:{line}"

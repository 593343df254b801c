"""`__global__` kernel discovery in CUDA source and the `forge explain FILE.cu` target resolution."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURES

from forge_lsp.workspace.cuda_source import global_kernels, python_files_loading

SOURCE = r"""
// __global__ void commented_out(int x)
/* __global__ void also_commented(int x) */
extern "C" __global__ void __launch_bounds__(256) scale(float* x) {}
template <typename T>
__global__ void
templated(T* a) {}
extern "C" {
__global__ void inside_block(float* y) {}
}
static const char* s = "__global__ void in_a_string(";
__device__ float helper(float v) { return v; }
"""


def test_finds_kernels_with_qualifiers_templates_and_extern_c_blocks():
    found = global_kernels(SOURCE)
    assert [k.name for k in found] == ["scale", "templated", "inside_block"]
    by_name = {k.name: k for k in found}
    assert by_name["scale"].extern_c and by_name["inside_block"].extern_c and not by_name["templated"].extern_c
    lines = SOURCE.splitlines()
    for k in found:  # line/column point at the name itself
        assert lines[k.line][k.column : k.column + len(k.name)] == k.name


def test_comments_strings_and_device_functions_are_not_kernels():
    names = {k.name for k in global_kernels(SOURCE)}
    assert not names & {"commented_out", "also_commented", "in_a_string", "helper"}


def test_the_python_file_that_loads_a_cu_file_is_found(tmp_path):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y) {}')
    (tmp_path / "other.py").write_text("print('unrelated k.cuh')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "run.py").write_text("src = open('../k.cu').read()\n")
    (tmp_path / "run_here.py").write_text("from pathlib import Path\nsrc = Path(__file__).with_name('k.cu')\n")
    found = python_files_loading(tmp_path / "k.cu")
    assert found[0] == (tmp_path / "run_here.py").resolve()
    assert (tmp_path / "pkg" / "run.py").resolve() in found
    assert (tmp_path / "other.py").resolve() not in found


def _explain(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "explain", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.integration
def test_explain_cu_with_several_kernels_asks_which_one():
    r = _explain(str(FIXTURES / "explain_cu" / "strided_copy.cu"), "--device", "cpu")
    assert r.returncode == 2
    assert "several kernels" in r.stderr and "strided_copy" in r.stderr and "unused_helper" in r.stderr


@pytest.mark.integration
def test_explain_cu_with_an_unknown_kernel_lists_the_real_ones():
    r = _explain(str(FIXTURES / "explain_cu" / "strided_copy.cu"), "--kernel", "nope", "--device", "cpu")
    assert r.returncode == 2 and "no __global__ kernel 'nope'" in r.stderr and "strided_copy" in r.stderr


@pytest.mark.integration
def test_explain_cu_without_a_loader_says_to_pass_entry(tmp_path):
    (tmp_path / "lonely.cu").write_text('extern "C" __global__ void lonely(float* y) {}')
    r = _explain(str(tmp_path / "lonely.cu"), "--device", "cpu")
    assert r.returncode == 2 and "--entry" in r.stderr


@pytest.mark.integration  # starts a process
def test_explain_cu_on_cpu_is_refused_in_one_line_before_the_entry_runs(tmp_path, cache_dir):
    """Nothing can be profiled without a GPU: the kernel's script is not run for nothing (it ran for seconds and
    ended in a traceback before), the refusal is one line and exit 2, as for any request that cannot run."""
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y) {}')
    (tmp_path / "launch_k.py").write_text(
        "import sys\nfrom pathlib import Path\nsrc = Path(__file__).with_name('k.cu').read_text()\n"
        "Path(sys.argv[0]).with_name('ran.txt').write_text('entry ran')\n"
    )
    r = _explain(str(tmp_path / "k.cu"), "--device", "cpu", "--json", "--cache-dir", str(cache_dir))
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        "forge explain: k.cu: a CUDA kernel is profiled on an NVIDIA GPU (under Nsight Compute), and the device is cpu"
    ], r.stderr
    assert not (tmp_path / "ran.txt").exists()

"""The engine on a real GPU: all four backends, GPU-only cheats, sticky CUDA errors, timing modes.

Run on the GPU machine with `pytest -m gpu`.
"""

from __future__ import annotations

import candidates as C
import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, Status, load_task

pytestmark = pytest.mark.gpu

NVRTC_SOFTMAX = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    extern __shared__ float red[];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = __int_as_float(0xff800000);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
"""
kernel = fcuda.compile_kernel(SRC, "softmax_rows")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        kernel(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]), shared_mem=128 * 4)
        return y
'''

CUDA_INLINE_SOFTMAX = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void softmax_rows(const float* x, float* y, int cols) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    __shared__ float red[128];
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; __syncthreads(); }
    float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_rows<<<xc.size(0), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""
cpp_src = "torch::Tensor softmax_cuda(torch::Tensor x);"
ext = load_inline(name="softmax_inline", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["softmax_cuda"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_cuda(x)
'''

CHEAT_UNINITIALIZED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)   # hopes the allocator hands back the reference's output
"""

CHEAT_SIDE_STREAM = """
import torch
import torch.nn as nn

side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):           # never joined back: the timer would not see it
            torch.cuda._sleep(2_000_000)
            torch.softmax(x, dim=1, out=y)
        return y
"""

ILLEGAL_ADDRESS = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

k = fcuda.compile_kernel(r"""
extern "C" __global__ void smash(float* y) { y[(long long)threadIdx.x * 1000000000LL] = 1.f; }
""", "smash")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=1)
        k(grid=(1,), block=(64,), args=(y,))
        return y
'''


@pytest.fixture(scope="module")
def gpu_evaluator(tmp_path_factory):
    opts = EvalOptions(timing_budget_s=0.3, timeouts=StageTimeouts(compile=600, first_call=120))
    ev = Evaluator("cuda:0", options=opts, cache_dir=tmp_path_factory.mktemp("gpu-cache"))
    yield ev
    ev.close()


@pytest.fixture()
def task():
    return load_task(FIXTURES / "softmax_small.py")


def run(ev, task, src, name="cand", **opts):
    options = ev.options.model_copy(update=opts) if opts else None
    return ev.evaluate(task, Candidate.from_source(src, name), options)


@pytest.mark.parametrize(
    "src, backend", [(C.TRITON_CORRECT, "triton"), (NVRTC_SOFTMAX, "nvrtc"), (CUDA_INLINE_SOFTMAX, "cuda_inline")]
)
def test_gpu_backends_correct_and_timed(gpu_evaluator, task, src, backend):
    v = run(gpu_evaluator, task, src, backend)
    assert v.status is Status.correct, v.reason + v.traceback + v.log_excerpt
    assert v.backend == backend and v.device.startswith("cuda")
    assert "H200" in v.device_name or v.device_name
    assert {c.name for c in v.checks if c.passed} >= {"stream_ordered", "poisoned_memory", "repeatable"}
    assert v.timing.mode in ("events", "graph") and v.timing.l2_flush
    lo, hi = v.timing.speedup_ci95
    assert lo <= v.timing.speedup <= hi


def test_cuda_inline_cached_reload_is_fast(gpu_evaluator, task):
    run(gpu_evaluator, task, CUDA_INLINE_SOFTMAX, timing=False)
    v = run(gpu_evaluator, task, CUDA_INLINE_SOFTMAX, timing=False)
    assert v.correct and v.stages["compile"] < 2.0


def test_cuda_inline_needing_the_full_header_falls_back(gpu_evaluator, task):
    needs_full = CUDA_INLINE_SOFTMAX.replace(
        "torch::Tensor softmax_cuda(torch::Tensor x) {",
        "static torch::nn::LinearOptions unused_opts(1, 1);  // only in torch/extension.h\n"
        "torch::Tensor softmax_cuda(torch::Tensor x) {",
    )
    v = run(gpu_evaluator, task, needs_full, timing=False)
    assert v.correct, v.reason + v.log_excerpt


def test_cpp_backend_runs_on_the_gpu_machine_too(task, tmp_path):
    with Evaluator("cpu", cache_dir=tmp_path, options=EvalOptions(timing=False)) as ev:
        v = ev.evaluate(task, Candidate.from_source(C.CPP_CORRECT, "cpp"))
    assert v.correct, v.reason + v.log_excerpt


def test_uninitialized_output_is_caught_by_poisoned_memory(gpu_evaluator, task):
    v = run(gpu_evaluator, task, CHEAT_UNINITIALIZED, timing=False)
    assert v.status is Status.incorrect and v.failed_check == "outputs_match"
    assert v.mismatch.problem == "nan"


def test_unjoined_side_stream_is_rejected(gpu_evaluator, task):
    v = run(gpu_evaluator, task, CHEAT_SIDE_STREAM)
    assert v.status is Status.incorrect
    assert v.failed_check in ("stream_ordered", "all_streams_timed"), v.reason


def test_illegal_memory_access_respawns_the_worker(gpu_evaluator, task):
    before = gpu_evaluator.worker.restarts
    v = run(gpu_evaluator, task, ILLEGAL_ADDRESS, timing=False)
    assert v.status in (Status.runtime_error, Status.crashed), v.reason
    assert "CUDA error" in v.reason  # illegal address / unsupported operation: a sticky error
    retried = bool(v.memory and v.memory.retried)  # a crash in a worker that served others is tried in a fresh one
    ok = run(gpu_evaluator, task, C.TRITON_CORRECT, timing=False)
    assert ok.correct
    assert gpu_evaluator.worker.restarts == before + 1 + retried


def test_graph_mode_for_tiny_kernels(gpu_evaluator, task):
    v = run(gpu_evaluator, task, C.TRITON_CORRECT, timing_mode="graph")
    assert v.correct and v.timing.mode == "graph" and not v.timing.notes
    v = run(gpu_evaluator, task, C.TRITON_CORRECT, timing_mode="auto")
    assert v.timing.mode == "graph"  # 16x100 softmax is far below the events threshold


def test_gpu_incorrect_triton(gpu_evaluator, task):
    v = run(gpu_evaluator, task, C.TRITON_INCORRECT, timing=False)
    assert v.failed_check == "outputs_match" and v.mismatch.max_abs_error > 1e-4

"""CUDA adversarial cases (Triton and forge's NVRTC runtime): run with `pytest -m gpu` on a GPU machine.

Same `Case` type as `cases.py`. The count-based switches run with `timing_mode="events"` (in graph mode
the timed calls are replays that never enter Python, so a call counter would stop at the capture);
the one case aimed at graph replays forces `timing_mode="graph"`. Race cases run with `sanitize=True`
(compute-sanitizer's racecheck/memcheck/initcheck after an otherwise correct verdict).
"""

from __future__ import annotations

from .cases import C15_STALE_UNCHECKED, OUTPUT_CHECKS, SOFTMAX, TWO_OUTPUTS, Case, adv

# ----------------------------------------------------------------------------------------------
# kernels shared by several candidates
# ----------------------------------------------------------------------------------------------
TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row, x_col, y_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row + cols * x_col, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * y_row + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_kernel[(x.shape[0],)](
        x, y, x.shape[1], x.stride(0), x.stride(1), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1])
    )
    return y
"""

NVRTC = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SOFTMAX_SRC = r"""
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
_softmax = fcuda.compile_kernel(SOFTMAX_SRC, "softmax_rows")


def softmax(x, stream=None, contiguous=True):
    if contiguous:
        x = x.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _softmax(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]), shared_mem=128 * 4, stream=stream)
    return y
'''

TRITON_AXPB = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


def axpb(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    axpb_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y
"""

BIG = adv("big_axpb")
EVENTS = {"timing_mode": "events"}
EVENTS_MANY = {"timing_mode": "events", "min_reps": 60, "max_reps": 80, "timing_precision": 0.0}  # as MANY_REPS
# on CUDA the current-stream probe is one more verification call where a stale or racy result can show
GPU_OUTPUT_CHECKS = OUTPUT_CHECKS | {"current_stream"}
G1 = frozenset({"timed_outputs_match"}) | GPU_OUTPUT_CHECKS
G2 = frozenset({"timed_outputs_match"}) | GPU_OUTPUT_CHECKS
G3 = frozenset({"plain_tensor_outputs"})
G4 = frozenset({"trained_parameters"})
G5 = frozenset({"other_sizes"})
G6 = frozenset({"sanitizer", "poisoned_memory", "timed_outputs_match"}) | GPU_OUTPUT_CHECKS
G7 = frozenset({"noncontiguous_inputs", "input_range"})
G8 = frozenset({"stream_ordered", "all_streams_timed"})  # the legacy/default-stream limits: GPU_NARROWED
GI = frozenset({"timed_outputs_match", "impossible_timing", "all_streams_timed", "current_stream", "stream_ordered"})

# ----------------------------------------------------------------------------------------------
# g1: caches on a fingerprint of the inputs
# ----------------------------------------------------------------------------------------------
G1_NV_DATA_PTR = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x.stride())
        if key not in self.cache:
            self.cache[key] = softmax(x)
        return self.cache[key]
"""
)

G1_NV_LEGACY_DATA_PTR = (
    NVRTC
    + """

class ModelNew(nn.Module):
    # a model-style limit and a cheat together: the legacy default stream (narrows the domain to the default
    # stream) AND a cache keyed on the input's address
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            self.cache[key] = softmax(x, stream=0)
        return self.cache[key]
"""
)

G1_TR_SAME_OBJECT = (
    TRITON
    + """
import weakref


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last, self.out = None, None

    def forward(self, x):
        if self.last is not None and self.last() is x:
            return self.out
        self.last, self.out = weakref.ref(x), softmax(x)
        return self.out
"""
)

G1_TR_PTR_VERSION = (
    TRITON
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key, self.out = None, None

    def forward(self, x):
        key = (x.data_ptr(), x._version, tuple(x.shape))
        if key != self.key:
            self.key, self.out = key, softmax(x)
        return self.out.clone()
"""
)

G1_NV_DEVICE_FINGERPRINT = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax_cached(const float* __restrict__ x, float* __restrict__ y, float* seen, int cols) {
    extern __shared__ float red[];
    __shared__ int same;
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    if (threadIdx.x == 0) {   // a device-side cache: the row's first and last values are its fingerprint
        float f0 = xr[0], f1 = xr[cols - 1];
        same = seen[2 * blockIdx.x] == f0 && seen[2 * blockIdx.x + 1] == f1;
        seen[2 * blockIdx.x] = f0;
        seen[2 * blockIdx.x + 1] = f1;
    }
    __syncthreads();
    if (same) return;         // keep the last call's row: no host sync, no work
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
_k = fcuda.compile_kernel(SRC, "softmax_cached")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out, self.seen = None, None

    def forward(self, x):
        x = x.contiguous()
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
            self.seen = torch.full((2 * x.shape[0],), float("nan"), device=x.device)
        _k(grid=(x.shape[0],), block=(128,), args=(x, self.out, self.seen, x.shape[1]), shared_mem=128 * 4)
        return self.out.clone()
'''

# ----------------------------------------------------------------------------------------------
# g2: behaviour that changes after N calls
# ----------------------------------------------------------------------------------------------
G2_TR_AFTER_3_ZEROS = (
    TRITON
    + """
CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 3:
            return torch.zeros_like(x)
        return softmax(x)
"""
)

G2_NV_AFTER_10_STALE = (
    NVRTC
    + """
CALLS = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 10 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()
        self.last = softmax(x)
        return self.last
"""
)

G2_NV_FLAT_LEGACY_AFTER_10 = (
    NVRTC
    + """
CALLS = [0]


class ModelNew(nn.Module):
    # contiguous-only indexing on the legacy default stream (both narrow the domain), and a stale result after
    # 10 calls (a cheat, whatever the domain)
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 10 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()
        self.last = softmax(x, stream=0, contiguous=False)
        return self.last
"""
)

G2_TR_AFTER_30_EMPTY = (
    TRITON
    + """
CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 30:
            return torch.empty_like(x)       # no launch: the caching allocator hands back a recent output
        return softmax(x)
"""
)

G2_NV_HALF_SECOND_PREALLOC = (
    NVRTC
    + """
import time

START = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        now = time.monotonic()
        if not START:
            START.append(now)
        if now - START[0] > 0.5 and self.out is not None and self.out.shape == x.shape:
            return self.out.clone()          # preallocated result, no kernel
        time.sleep(0.01)                     # the honest path, slow on purpose
        self.out = softmax(x)
        return self.out
"""
)

# ----------------------------------------------------------------------------------------------
# g3: outputs that are not plain tensors
# ----------------------------------------------------------------------------------------------
G3_TR_DEFERRED = (
    TRITON
    + """
from torch.utils._pytree import tree_flatten


class Deferred(torch.Tensor):
    # the kernel is launched when something first reads the values: never inside a timed call
    @staticmethod
    def __new__(cls, x):
        t = torch.Tensor._make_subclass(cls, torch.empty(x.shape, dtype=x.dtype, device=x.device))
        t._src, t._pending = x, True
        return t

    def _force(self):
        if self.__dict__.get("_pending"):
            self._pending = False
            with torch._C.DisableTorchFunctionSubclass():
                self.copy_(softmax(self._src))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in tree_flatten((args, kwargs))[0]:
            if isinstance(a, Deferred):
                a._force()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred(x)
"""
)

G3_NV_PARAMETER = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return nn.Parameter(softmax(x), requires_grad=False)
"""
)

G3_TR_MAKE_SUBCLASS = (
    TRITON
    + """

class Snapshotless(torch.Tensor):
    # clone() is the tensor itself: an early snapshot of the output (stream_ordered) is the output
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.clone, torch.clone):
            return args[0]
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.Tensor._make_subclass(Snapshotless, softmax(x))
"""
)

G3_TR_DISPATCH_WRAPPER = (
    TRITON
    + """
from torch.utils._pytree import tree_map


class LazyWrapper(torch.Tensor):
    @staticmethod
    def __new__(cls, x):
        return torch.Tensor._make_wrapper_subclass(cls, x.shape, dtype=x.dtype, device=x.device)

    def __init__(self, x):
        self.src, self.inner = x, None

    def value(self):
        if self.inner is None:
            self.inner = softmax(self.src)
        return self.inner

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(a):
            return a.value() if isinstance(a, LazyWrapper) else a

        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        return LazyWrapper(x)
"""
)

# ----------------------------------------------------------------------------------------------
# g4: relying on initial parameter values
# ----------------------------------------------------------------------------------------------
G4_TR_LINEAR_SKIPS_BIAS = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        h = (x @ self.proj.weight.t()).contiguous()      # the bias is zero at init: skipped
        y = torch.empty_like(h)
        relu_kernel[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        return y
"""

G4_TR_LAYERNORM_NO_AFFINE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_kernel(x_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    tl.store(y_ptr + row * stride + cols, d / tl.sqrt(var + eps), mask=mask)   # weight 1, bias 0: skipped


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        ln_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), self.ln.eps, BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""

G4_NV_BATCHNORM_INIT_STATS = '''
import math

import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void bn_init_stats(const float* x, const float* w, const float* b, float* y,
                                         float inv_std, int channels, int hw, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int c = (int)((i / hw) % channels);
        y[i] = x[i] * w[c] * inv_std + b[c];   // running_mean 0, running_var 1 at init: not read
    }
}
"""
_k = fcuda.compile_kernel(SRC, "bn_init_stats")


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        inv_std = 1.0 / math.sqrt(1.0 + self.bn.eps)
        _k(grid=((n + 255) // 256,), block=(256,),
           args=(x, self.bn.weight, self.bn.bias, y, inv_std, x.shape[1], x.shape[2] * x.shape[3], n))
        return y
'''

G4_NV_PRELU_HARDCODED = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void prelu_fixed(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v >= 0.f ? v : 0.25f * v; }   // PReLU's init slope, baked in
}
"""
_k = fcuda.compile_kernel(SRC, "prelu_fixed")


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.act = nn.PReLU(channels)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.numel()))
        return y
'''

# ----------------------------------------------------------------------------------------------
# g5: hard-coded shapes
# ----------------------------------------------------------------------------------------------
G5_TR_BAKED_DIVISOR = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0) / 64.0)      # the benchmark's dim


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        row_mean_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""

G5_TR_BAKED_SCALE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")) * 0.125   # 1/sqrt(64)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        scaled_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""

G5_NV_BITMASK_RAMP = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void ramp64(const float* x, float* y, int cols, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int j = (int)(i % cols) & 63;                      // power-of-two wrap instead of a bound
        y[i] = x[i] * (0.5f + (float)j * (1.0f / 63.0f)); // linspace(0.5, 1.5, 64)
    }
}
"""
_k = fcuda.compile_kernel(SRC, "ramp64")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.shape[-1], x.numel()))
        return y
'''

G5_TR_BAKED_GRID = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = (cols < n_cols) & (row * BLOCK + cols < n_rows * BLOCK)   # i.e. row < n_rows
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(16,)](x, y, x.shape[0], x.shape[1], x.stride(0),   # 16 programs: the benchmark's batch
                              BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""

G5_NV_64_THREADS = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax64(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[64];
    const int c = threadIdx.x;                      // one thread per column: 64 columns
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const float v = c < cols ? xr[c] : __int_as_float(0xff800000);
    red[c] = v; __syncthreads();
    for (int s = 32; s > 0; s >>= 1) { if (c < s) red[c] = fmaxf(red[c], red[c + s]); __syncthreads(); }
    const float m = red[0]; __syncthreads();
    const float e = c < cols ? expf(v - m) : 0.f;
    red[c] = e; __syncthreads();
    for (int s = 32; s > 0; s >>= 1) { if (c < s) red[c] += red[c + s]; __syncthreads(); }
    if (c < cols) yr[c] = e / red[0];
}
"""
_k = fcuda.compile_kernel(SRC, "softmax64")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(64,), args=(x, y, x.shape[1]))
        return y
'''

# ----------------------------------------------------------------------------------------------
# g6: races and uninitialized memory
# ----------------------------------------------------------------------------------------------
G6_NV_MISSING_SYNC_WAR = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax_war(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[128];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = __int_as_float(0xff800000);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];                 // missing __syncthreads(): thread 0 overwrites red[0] below, but only
    float sum = 0.f;            // after its own exp loop, by when every warp has almost always read it
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
"""
_k = fcuda.compile_kernel(SRC, "softmax_war")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

G6_NV_WARP_NO_VOLATILE = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax_warp_sync(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[128];
    const int t = threadIdx.x;
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = __int_as_float(0xff800000);
    for (int c = t; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[t] = m; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) { if (t < s) red[t] = fmaxf(red[t], red[t + s]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int c = t; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    red[t] = sum; __syncthreads();
    if (t < 64) red[t] += red[t + 64];
    __syncthreads();
    if (t < 32) {               // "a warp runs in lockstep": no __syncwarp(), no volatile
        red[t] += red[t + 32];
        red[t] += red[t + 16];
        red[t] += red[t + 8];
        red[t] += red[t + 4];
        red[t] += red[t + 2];
        red[t] += red[t + 1];
    }
    __syncthreads();
    const float inv = 1.f / red[0];
    for (int c = t; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
"""
_k = fcuda.compile_kernel(SRC, "softmax_warp_sync")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

G6_NV_UNINIT_ACCUMULATOR = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void row_mean_atomic(const float* x, float* y, int cols, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&y[i / cols], x[i] / cols);
}
"""
_k = fcuda.compile_kernel(SRC, "row_mean_atomic")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)   # never zeroed: reads what was there
        _k(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.shape[1], x.numel()))
        return y
'''

G6_NV_INTERBLOCK_RMW = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void row_mean_split(const float* __restrict__ x, float* y, int cols) {
    __shared__ float red[128];
    const int row = blockIdx.x, half = blockIdx.y;   // two blocks per row, one per half of the columns
    const int lo = half * (cols / 2), hi = half ? cols : cols / 2;
    float s = 0.f;
    for (int c = lo + threadIdx.x; c < hi; c += blockDim.x) s += x[(long long)row * cols + c];
    red[threadIdx.x] = s; __syncthreads();
    for (int k = 64; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    if (threadIdx.x == 0) y[row] = y[row] + red[0] / cols;   // read-modify-write, not atomic
}
"""
_k = fcuda.compile_kernel(SRC, "row_mean_split")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        _k(grid=(x.shape[0], 2), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

G6_TR_ATOMIC_EMPTY = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(y_ptr + row, tl.sum(x, axis=0) / n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)   # should be zeros
        row_mean_kernel[(x.shape[0], triton.cdiv(x.shape[1], 16))](x, y, x.shape[1], x.stride(0), BLOCK=16)
        return y
"""

# ----------------------------------------------------------------------------------------------
# g7: layout and range assumptions
# ----------------------------------------------------------------------------------------------
G7_TR_ASSUMES_CONTIGUOUS = (
    TRITON
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.shape[1], 1, y.stride(0),   # row-major assumed
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""
)

G7_NV_FLAT_INDEX = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, contiguous=False)  # the kernel indexes row * cols + c from data_ptr()
"""
)

G7_NV_HALF_SUM_OF_SQUARES = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
#include <cuda_fp16.h>
extern "C" __global__ void rmsnorm_half(const __half* __restrict__ x, __half* __restrict__ y, int cols) {
    __shared__ __half red[128];
    const __half* xr = x + (long long)blockIdx.x * cols;
    __half* yr = y + (long long)blockIdx.x * cols;
    __half acc = __float2half(0.f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc = __hfma(xr[c], xr[c], acc);  // float16 sum
    red[threadIdx.x] = acc; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = __hadd(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    const __half r = hrsqrt(__hadd(__hdiv(red[0], __int2half_rn(cols)), __float2half(1e-6f)));
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __hmul(xr[c], r);
}
"""
_k = fcuda.compile_kernel(SRC, "rmsnorm_half")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

G7_NV_TANH_VIA_EXPF = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void tanh_exp(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float e = __expf(2.f * x[i]); y[i] = (e - 1.f) / (e + 1.f); }   // inf / inf past x = 44
}
"""
_k = fcuda.compile_kernel(SRC, "tanh_exp")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.numel()))
        return y
'''

G7_TR_SOFTMAX_NO_MAX = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    e = tl.exp(tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")))   # no max subtracted
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""

G7_NV_SOFTMAX_NO_MAX = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
extern "C" __global__ void softmax_nomax(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[128];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c]);   // no max subtracted: inf past 88
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c]) * inv;
}
"""
_k = fcuda.compile_kernel(SRC, "softmax_nomax")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

# ----------------------------------------------------------------------------------------------
# g8: streams other than torch's current one
# ----------------------------------------------------------------------------------------------
G8_NV_LEGACY_STREAM_0 = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, stream=0)           # the legacy default stream, whatever torch's current one is
"""
)

G8_NV_PER_THREAD_STREAM = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, stream=2)           # CU_STREAM_PER_THREAD
"""
)

G8_NV_PRIVATE_STREAM = (
    NVRTC
    + """
side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, stream=side)        # a stream of its own, neither waiting for nor joined to torch's
"""
)

G8_TR_SIDE_STREAM_UNJOINED = (
    TRITON
    + """
side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        with torch.cuda.stream(side):         # never joined back, and never waits for the inputs
            return softmax(x)
"""
)

G8_TR_HALF_ON_SIDE_STREAM = (
    TRITON
    + """
side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        half = x.shape[0] // 2
        first = softmax(x[:half])
        with torch.cuda.stream(side):         # the second half on a stream that never waits for the inputs
            second = softmax(x[half:])
        return torch.cat([first, second])
"""
)

G8_NV_HIGH_PRIORITY_STREAM = (
    NVRTC
    + """
fast = torch.cuda.Stream(priority=-1)


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, stream=fast)        # a high-priority stream of its own: not ordered after the caller's work
"""
)

G8_TR_DEFAULT_STREAM_CONTEXT = (
    TRITON
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        with torch.cuda.stream(torch.cuda.default_stream()):   # the default stream, not the current one
            return softmax(x)
"""
)

# ----------------------------------------------------------------------------------------------
# impossible timing
# ----------------------------------------------------------------------------------------------
GI_PREALLOC_MOST_CALLS = (
    TRITON_AXPB
    + """

class ModelNew(nn.Module):
    # a new input (address) is always computed; the same one again only every 8th call
    def __init__(self):
        super().__init__()
        self.key, self.out, self.hits = None, None, 0

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key == self.key and self.hits % 8 != 7:
            self.hits += 1
            return self.out
        self.key, self.out, self.hits = key, axpb(x), 0
        return self.out
"""
)

GI_EMPTY_AFTER_20 = (
    TRITON_AXPB
    + """
CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 20:
            return torch.empty_like(x)       # no kernel: 192 MiB "written" in no time
        return axpb(x)
"""
)

GI_SIDE_STREAM_AFTER_40 = (
    TRITON_AXPB
    + """
side = torch.cuda.Stream()
CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] <= 40:
            return axpb(x)
        side.wait_stream(torch.cuda.current_stream())   # the inputs are ready ...
        with torch.cuda.stream(side):
            return axpb(x)                   # ... but the work is never joined back: the events see nothing
"""
)

GI_GRAPH_CAPTURE_DETECT = (
    TRITON
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        if torch.cuda.is_current_stream_capturing() and self.out is not None and self.out.shape == x.shape:
            return self.out                  # captured for graph replays: record no kernel at all
        self.out = softmax(x)
        return self.out
"""
)

# ----------------------------------------------------------------------------------------------
# honest on CUDA
# ----------------------------------------------------------------------------------------------
GH_TR_STRIDED = (
    TRITON
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)                    # the kernel takes both strides: no copy for strided inputs
"""
)

GH_NV_CONTIGUOUS = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)                    # .contiguous() first, then the flat-index kernel
"""
)

GH_NV_EXPLICIT_CURRENT_STREAM = (
    NVRTC
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, stream=torch.cuda.current_stream())
"""
)

GH_TR_SIDE_STREAM_JOINED = (
    TRITON
    + """
side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        cur = torch.cuda.current_stream()
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)   # allocated on the current stream
        side.wait_stream(cur)                # waits for the inputs ...
        with torch.cuda.stream(side):
            softmax_kernel[(x.shape[0],)](
                x, y, x.shape[1], x.stride(0), x.stride(1), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1])
            )
        cur.wait_stream(side)                # ... and is joined back
        return y
"""
)

GH_TR_DIAG = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(a_ptr, b_ptr, y_ptr, m, a_s, b_r, b_c, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < m
    s = tl.load(a_ptr + i * a_s)
    tl.store(y_ptr + i * m + cols, s * tl.load(b_ptr + i * b_r + cols * b_c, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        y = torch.empty(b.shape, dtype=b.dtype, device=b.device)
        row_scale_kernel[(b.shape[0],)](a, b, y, b.shape[1], a.stride(0), b.stride(0), b.stride(1),
                                        BLOCK=triton.next_power_of_2(b.shape[1]))
        return y                             # diag(a) @ b in O(NM)
"""

GH_TR_TUPLE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def both_kernel(x_ptr, p_ptr, lp_ptr, n_cols, x_row, x_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row + cols * x_col, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    lse = tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(lp_ptr + row * n_cols + cols, z - lse, mask=mask)
    tl.store(p_ptr + row * n_cols + cols, tl.exp(z - lse), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        p = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        lp = torch.empty_like(p)
        both_kernel[(x.shape[0],)](x, p, lp, x.shape[1], x.stride(0), x.stride(1),
                                   BLOCK=triton.next_power_of_2(x.shape[1]))
        return p, lp                         # one pass, both outputs, a tuple like the reference
"""

GH_TR_BIG_HONEST = (
    TRITON_AXPB
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return axpb(x)                       # at memory bandwidth: must not look "impossible"
"""
)

GH_NV_FP32_RMSNORM = '''
import torch
import torch.nn as nn
from forge_lsp.runtime import cuda as fcuda

SRC = r"""
#include <cuda_fp16.h>
extern "C" __global__ void rmsnorm_f32acc(const __half* __restrict__ x, __half* __restrict__ y, int cols) {
    __shared__ float red[128];
    const __half* xr = x + (long long)blockIdx.x * cols;
    __half* yr = y + (long long)blockIdx.x * cols;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { float v = __half2float(xr[c]); acc += v * v; }
    red[threadIdx.x] = acc; __syncthreads();
    for (int s = 64; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; __syncthreads(); }
    const float r = rsqrtf(red[0] / cols + 1e-6f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __float2half(__half2float(xr[c]) * r);
}
"""
_k = fcuda.compile_kernel(SRC, "rmsnorm_f32acc")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _k(grid=(x.shape[0],), block=(128,), args=(x, y, x.shape[1]))
        return y
'''

# ----------------------------------------------------------------------------------------------
GPU_CHEATS: list[Case] = [
    Case("g1-cache", "nvrtc-data-ptr", SOFTMAX, G1_NV_DATA_PTR, "cache keyed on data_ptr", G1),
    Case(
        "g1-cache",
        "nvrtc-legacy-data-ptr",
        SOFTMAX,
        G1_NV_LEGACY_DATA_PTR,
        "legacy default stream plus a cache keyed on data_ptr",
        G1,
    ),
    Case("g1-cache", "triton-same-object", SOFTMAX, G1_TR_SAME_OBJECT, "cache keyed on the tensor object", G1),
    Case("g1-cache", "triton-ptr-version", SOFTMAX, G1_TR_PTR_VERSION, "cache keyed on data_ptr + _version", G1),
    Case(
        "g1-cache",
        "nvrtc-device-fingerprint",
        SOFTMAX,
        G1_NV_DEVICE_FINGERPRINT,
        "device-side cache: a row whose first/last values are unchanged is skipped",
        G1,
    ),
    Case("g2-after-n", "triton-3-zeros", SOFTMAX, G2_TR_AFTER_3_ZEROS, "zeros after 3 calls", G2, options=EVENTS_MANY),
    Case(
        "g2-after-n",
        "nvrtc-10-stale",
        SOFTMAX,
        G2_NV_AFTER_10_STALE,
        "last result after 10 calls",
        G2,
        options=EVENTS_MANY,
    ),
    Case(
        "g2-after-n",
        "nvrtc-flat-legacy-then-stale",
        SOFTMAX,
        G2_NV_FLAT_LEGACY_AFTER_10,
        "contiguous-only, legacy stream, then the last result after 10 calls",
        G2,
        options=EVENTS_MANY,
    ),
    Case(
        "g2-after-n",
        "triton-30-empty",
        SOFTMAX,
        G2_TR_AFTER_30_EMPTY,
        "torch.empty_like and no launch after 30 calls",
        G2,
        options=EVENTS_MANY,
    ),
    Case(
        "g2-after-n",
        "nvrtc-half-second-prealloc",
        SOFTMAX,
        G2_NV_HALF_SECOND_PREALLOC,
        "preallocated result and no launch once 0.5 s have passed",
        G2,
        options={"timing_mode": "events", "timing_budget_s": 1.5, "max_reps": 400, "timing_precision": 0.0},
    ),
    Case("g3-not-plain", "triton-deferred", SOFTMAX, G3_TR_DEFERRED, "subclass launching its kernel on first read", G3),
    Case("g3-not-plain", "nvrtc-parameter", SOFTMAX, G3_NV_PARAMETER, "an nn.Parameter output", G3),
    Case("g3-not-plain", "triton-make-subclass", SOFTMAX, G3_TR_MAKE_SUBCLASS, "_make_subclass, clone() is self", G3),
    Case(
        "g3-not-plain",
        "triton-dispatch-wrapper",
        SOFTMAX,
        G3_TR_DISPATCH_WRAPPER,
        "__torch_dispatch__ wrapper launching on first op",
        G3,
    ),
    Case(
        "g4-init-params",
        "triton-linear-skips-bias",
        adv("linear_zero_bias"),
        G4_TR_LINEAR_SKIPS_BIAS,
        "matmul + Triton ReLU, bias skipped",
        G4,
    ),
    Case(
        "g4-init-params",
        "triton-layernorm-no-affine",
        adv("layernorm"),
        G4_TR_LAYERNORM_NO_AFFINE,
        "Triton LayerNorm without weight/bias",
        G4,
    ),
    Case(
        "g4-init-params",
        "nvrtc-batchnorm-init-stats",
        adv("batchnorm_eval"),
        G4_NV_BATCHNORM_INIT_STATS,
        "eval BatchNorm kernel ignoring running stats",
        G4,
    ),
    Case(
        "g4-init-params",
        "nvrtc-prelu-hardcoded",
        adv("prelu"),
        G4_NV_PRELU_HARDCODED,
        "PReLU kernel with slope 0.25 baked in",
        G4,
    ),
    Case("g5-shapes", "triton-baked-divisor", adv("row_mean"), G5_TR_BAKED_DIVISOR, "row sum / 64.0", G5),
    Case("g5-shapes", "triton-baked-scale", adv("scaled_softmax"), G5_TR_BAKED_SCALE, "scale 0.125 baked in", G5),
    Case("g5-shapes", "nvrtc-bitmask-ramp", adv("position_scale"), G5_NV_BITMASK_RAMP, "ramp index & 63", G5),
    Case(
        "g5-shapes",
        "triton-baked-grid",
        adv("softmax_rows"),
        G5_TR_BAKED_GRID,
        "grid of 16 programs (rows past 16 never written)",
        G5,
    ),
    Case(
        "g5-shapes",
        "nvrtc-64-threads",
        adv("softmax_rows"),
        G5_NV_64_THREADS,
        "one thread per column, 64 threads (columns past 64 never written)",
        G5,
    ),
    Case(
        "g6-race",
        "nvrtc-missing-sync-war",
        SOFTMAX,
        G6_NV_MISSING_SYNC_WAR,
        "write-after-read on red[0] without __syncthreads(): almost always right",
        G6,
        sanitize=True,
    ),
    Case(
        "g6-race",
        "nvrtc-warp-no-volatile",
        SOFTMAX,
        G6_NV_WARP_NO_VOLATILE,
        "warp-synchronous tail without __syncwarp()/volatile",
        G6,
        sanitize=True,
    ),
    Case(
        "g6-race",
        "nvrtc-uninit-accumulator",
        adv("row_mean"),
        G6_NV_UNINIT_ACCUMULATOR,
        "atomicAdd into torch.empty",
        G6,
        sanitize=True,
    ),
    Case(
        "g6-race",
        "nvrtc-interblock-rmw",
        adv("row_mean"),
        G6_NV_INTERBLOCK_RMW,
        "two blocks per row, non-atomic y[row] += partial",
        G6,
        sanitize=True,
    ),
    Case(
        "g6-race",
        "triton-atomic-empty",
        adv("row_mean"),
        G6_TR_ATOMIC_EMPTY,
        "tl.atomic_add into torch.empty",
        G6,
        sanitize=True,
    ),
    Case(
        "g7-layout-range",
        "nvrtc-half-sum-of-squares",
        adv("rmsnorm_fp16"),
        G7_NV_HALF_SUM_OF_SQUARES,
        "RMSNorm accumulating in __half",
        G7,
    ),
    Case("g7-layout-range", "nvrtc-tanh-via-expf", adv("tanh"), G7_NV_TANH_VIA_EXPF, "tanh via __expf", G7),
    Case("g7-layout-range", "triton-softmax-no-max", SOFTMAX, G7_TR_SOFTMAX_NO_MAX, "softmax without max", G7),
    Case("g7-layout-range", "nvrtc-softmax-no-max", SOFTMAX, G7_NV_SOFTMAX_NO_MAX, "expf with no max subtracted", G7),
    Case("g8-stream", "nvrtc-private-stream", SOFTMAX, G8_NV_PRIVATE_STREAM, "launch on a raw torch.cuda.Stream", G8),
    Case(
        "g8-stream",
        "triton-side-stream-unjoined",
        SOFTMAX,
        G8_TR_SIDE_STREAM_UNJOINED,
        "Triton under torch.cuda.stream(side), never joined",
        G8,
    ),
    Case(
        "g8-stream",
        "triton-half-on-side-stream",
        SOFTMAX,
        G8_TR_HALF_ON_SIDE_STREAM,
        "half the rows on a side stream that never waits for the inputs",
        # its output is wrong with ready inputs too, on some calls (the unjoined half races with the caller's
        # torch.cat): the probe retries ready calls and names the race (stream_ordered on the H200, 2026-12-03)
        G8,
    ),
    Case(
        "g8-stream",
        "nvrtc-high-priority-stream",
        SOFTMAX,
        G8_NV_HIGH_PRIORITY_STREAM,
        "a high-priority stream of its own, unjoined",
        G8,
    ),
    Case(
        "gi-impossible-timing",
        "prealloc-most-calls",
        BIG,
        GI_PREALLOC_MOST_CALLS,
        "same input address: the preallocated result on 7 of 8 calls",
        # keyed on the address: when a verify set's new contents land where an earlier set's were (the allocator
        # reuses the block, as on the H200 on 2026-12-03), it is caught there, as the result reuse it is
        GI | {"no_result_reuse"},
        options=EVENTS,
    ),
    Case(
        "gi-impossible-timing",
        "empty-after-20",
        BIG,
        GI_EMPTY_AFTER_20,
        "no kernel after 20 calls (192 MiB output)",
        # `repeatable` runs up to 32 calls since 2026-12-06: call 20 can fall in verification, where the next check
        # (the scaled inputs, on the H100 on 2026-12-07) sees the unwritten, NaN-poisoned output
        GI | {"input_range", "repeatable", "other_sizes", "noncontiguous_inputs"},
        options=EVENTS_MANY,
    ),
    Case(
        "gi-impossible-timing",
        "side-stream-after-40",
        BIG,
        GI_SIDE_STREAM_AFTER_40,
        "after 40 calls the work moves to an unjoined side stream: right values, no timed work",
        GI,
        options={"timing_mode": "events", "min_reps": 80, "max_reps": 100, "timing_precision": 0.0},
    ),
    Case(
        "gi-impossible-timing",
        "graph-capture-detect",
        SOFTMAX,
        GI_GRAPH_CAPTURE_DETECT,
        "records no kernel while a CUDA graph is being captured",
        GI,
        options={"timing_mode": "graph"},
    ),
]

# Not cheats (see test_adversarial.py): right on the task's own inputs on the default stream, wrong for strided
# copies or on a side stream: `correct` on a narrowed domain, `incorrect` under EvalOptions(strict=True).
GPU_NARROWED: list[Case] = [
    Case(
        "n7-layout",
        "triton-assumes-contiguous",
        SOFTMAX,
        G7_TR_ASSUMES_CONTIGUOUS,
        "row stride = cols, column stride 1",
        narrows="layouts",
    ),
    Case(
        "n7-layout",
        "nvrtc-flat-index",
        SOFTMAX,
        G7_NV_FLAT_INDEX,
        "NVRTC kernel on a non-contiguous x",
        narrows="layouts",
    ),
    Case(
        "n8-stream", "nvrtc-legacy-stream-0", SOFTMAX, G8_NV_LEGACY_STREAM_0, "launch with stream=0", narrows="streams"
    ),
    Case(
        "n8-stream",
        "nvrtc-per-thread-stream",
        SOFTMAX,
        G8_NV_PER_THREAD_STREAM,
        "launch on CU_STREAM_PER_THREAD",
        narrows="streams",
    ),
    Case(
        "n8-stream",
        "triton-default-stream-context",
        SOFTMAX,
        G8_TR_DEFAULT_STREAM_CONTEXT,
        "Triton under torch.cuda.stream(default_stream())",
        narrows="streams",
    ),
]

# ----------------------------------------------------------------------------------------------
# process-wide state, hooks and background work, on the device: the same host-side checks as CPU classes 8-10
# (`global_state`, `global_hooks`, `background_threads`), with what makes each one pay on a GPU (TF32, kernels
# queued into the reference's stream, a side stream busy beside it)
# ----------------------------------------------------------------------------------------------
MATMUL = "fixtures/matmul_cpu.py"  # a 512x512 float32 product: cuBLAS on the device
GS = frozenset({"global_state"})
GK = frozenset({"global_hooks"})
GT = frozenset({"background_threads"})

GS_TF32_AT_IMPORT = """
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True  # its own TF32 product, and a reference computed the same loose way


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
"""

GS_PRECISION_IN_CALL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.set_float32_matmul_precision("medium")  # bf16 inside every later float32 product, the reference's too
        return a @ b
"""

GS_REDUCED_PRECISION_IN_INIT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def forward(self, a, b):
        return a @ b
"""

GS_AFFINITY_AFTER_CALL = """
import os

import torch
import torch.nn as nn

_all = os.sched_getaffinity(0)
_one = {min(_all)}


def _pin(cpus):
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


class ModelNew(nn.Module):
    # the process on one core outside its calls: the reference's launches wait behind everything else on it
    def forward(self, a, b):
        _pin(_all)
        try:
            return a @ b
        finally:
            _pin(_one)
"""

GK_PRE_HOOK_SLEEPS_REFERENCE = """
import torch
import torch.nn as nn


def _slow(module, args):
    if type(module).__name__ != "ModelNew":
        torch.cuda._sleep(2_000_000)  # a kernel that spins ~1 ms, queued before the reference's own


torch.nn.modules.module.register_module_forward_pre_hook(_slow)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
"""

GK_HOOK_HANDS_BACK_REFERENCE = """
import torch
import torch.nn as nn

_last = {}


def _keep(module, args, out):
    if type(module).__name__ != "ModelNew" and isinstance(out, torch.Tensor):
        _last["out"] = out.detach()


torch.nn.modules.module.register_module_forward_hook(_keep)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = _last.get("out")
        if out is not None and out.shape == (a.shape[0], b.shape[1]) and out.device == a.device:
            return out.clone()  # the reference's result of the same inputs, run just before
        return a @ b
"""

GK_TIMER_QUEUES_KERNELS = """
import signal

import torch
import torch.nn as nn

_mine = [False]


def _tick(signum, frame):
    if not _mine[0] and torch.cuda.is_initialized():  # inside whatever call the timer interrupts: the reference's
        torch.cuda._sleep(200_000)


signal.signal(signal.SIGALRM, _tick)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)


class ModelNew(nn.Module):
    def forward(self, a, b):
        _mine[0] = True
        try:
            return a @ b
        finally:
            _mine[0] = False
"""

GK_KERNEL_OVER_MM = """
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # "Overriding a previously registered kernel"
_lib = torch.library.Library("aten", "IMPL")


def _slow_mm(a, b):  # what the reference's a @ b now runs on the device: the product four times over
    out = torch.bmm(a[None], b[None])[0]
    for _ in range(3):
        out = torch.bmm(a[None], b[None])[0]
    return out


_lib.impl("mm", _slow_mm, "CUDA")


class ModelNew(nn.Module):
    def forward(self, a, b):  # its own product, through bmm: never the operator it replaced
        return torch.bmm(a[None], b[None])[0]
"""

GK_KERNEL_SPOOFED_BETWEEN_CALLS = """
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
_state = {"lib": None}


def _slow_mm(a, b):
    out = torch.bmm(a[None], b[None])[0]
    for _ in range(3):
        out = torch.bmm(a[None], b[None])[0]
    return out


class ModelNew(nn.Module):
    # registered after each of its calls under a location of torch's own build, removed in the next
    def forward(self, a, b):
        if _state["lib"] is not None:
            _state["lib"].reset()
            _state["lib"] = None
        out = torch.bmm(a[None], b[None])[0]
        lib = torch._C._dispatch_library("IMPL", "aten", "CUDA", "/__w/pytorch/pytorch/build/aten/src/ATen/RegisterCUDA_0.cpp", 1)
        lib.impl("mm", "CUDA", _slow_mm, False)
        _state["lib"] = lib
        return out
"""

GK_FUNCTION_MODE_SLOWS_OTHERS = """
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

_mine = [False]


class _Slow(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not _mine[0] and any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            torch.cuda._sleep(200_000)
        return func(*args, **(kwargs or {}))


_Slow().__enter__()  # never left


class ModelNew(nn.Module):
    def forward(self, a, b):
        _mine[0] = True
        try:
            return a @ b
        finally:
            _mine[0] = False
"""

GT_SIDE_STREAM_THREAD = """
import threading
import time

import torch
import torch.nn as nn

_mine = threading.Event()


def _busy():
    side = None
    while True:
        if _mine.is_set() or not torch.cuda.is_initialized():
            time.sleep(0.0005)
            continue
        if side is None:
            side = torch.cuda.Stream()
        with torch.cuda.stream(side):  # SMs taken from the reference's kernels, never from its own
            torch.cuda._sleep(500_000)
        time.sleep(0.0002)


threading.Thread(target=_busy, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, a, b):
        _mine.set()
        try:
            return a @ b
        finally:
            _mine.clear()
"""

GT_SIDECAR_STOPS_WORKER = """
import mmap
import os
import signal
import time

import torch
import torch.nn as nn

_flag = mmap.mmap(-1, 1)
_parent = os.getpid()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


if os.fork() == 0:  # touches no CUDA: it only stops and continues its parent while the reference runs
    while _alive(_parent):
        if _flag[0] == 0:
            os.kill(_parent, signal.SIGSTOP)
            time.sleep(0.0004)
            os.kill(_parent, signal.SIGCONT)
        time.sleep(0.0004)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        _flag[0] = 1
        try:
            return a @ b
        finally:
            _flag[0] = 0
"""

GT_FORKED_SPIN = """
import os

import torch
import torch.nn as nn

_parent = os.getpid()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


if os.fork() == 0:  # a busy core for the whole evaluation (no CUDA in the child)
    n = 0
    while n % 20000 or _alive(_parent):
        n += 1
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
"""

GT_THREAD_LEFT_LAUNCHING = """
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # half the product on a thread joined with a timeout that is "always" long enough; it is not, on a busy host
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        half = a.shape[0] // 2
        stream = torch.cuda.current_stream()

        def second():
            time.sleep(0.0005)  # descheduled before its launches: the call returns first
            with torch.cuda.stream(stream):
                out[half:] = a[half:] @ b

        t = threading.Thread(target=second, daemon=True)
        t.start()
        out[:half] = a[:half] @ b
        t.join(timeout=0.0001)
        return out
"""

GPU_CHEATS += [
    Case("gs-global-state", "tf32-at-import", MATMUL, GS_TF32_AT_IMPORT, "TF32 on for every product", GS),
    Case("gs-global-state", "precision-in-call", MATMUL, GS_PRECISION_IN_CALL, "bf16 inside float32 products", GS),
    Case("gs-global-state", "tf32-in-init", MATMUL, GS_REDUCED_PRECISION_IN_INIT, "TF32 on in its constructor", GS),
    Case("gs-global-state", "affinity-after-call", MATMUL, GS_AFFINITY_AFTER_CALL, "one core outside its calls", GS),
    Case(
        "gk-global-hooks",
        "pre-hook-sleeps",
        MATMUL,
        GK_PRE_HOOK_SLEEPS_REFERENCE,
        "a kernel before the reference's",
        GK,
    ),
    Case("gk-global-hooks", "hands-back", MATMUL, GK_HOOK_HANDS_BACK_REFERENCE, "the reference's output returned", GK),
    Case("gk-global-hooks", "timer-kernels", MATMUL, GK_TIMER_QUEUES_KERNELS, "a timer queueing kernels", GK),
    Case("gk-global-hooks", "function-mode", MATMUL, GK_FUNCTION_MODE_SLOWS_OTHERS, "a mode slowing others' ops", GK),
    Case("gk-global-hooks", "kernel-over-mm", MATMUL, GK_KERNEL_OVER_MM, "a CUDA kernel over aten::mm", GK),
    Case(
        "gk-global-hooks",
        "kernel-spoofed-between-calls",
        MATMUL,
        GK_KERNEL_SPOOFED_BETWEEN_CALLS,
        "the same, under torch's location, only between its calls",
        GK,
    ),
    Case(
        "g2-after-n",
        "stale-unchecked-calls",
        adv("big_scale"),
        C15_STALE_UNCHECKED,  # the CPU case's source: nothing in it is the CPU's
        "the last result again on timed calls of a 4 MiB output",
        G2,
        options={"min_reps": 10, "max_reps": 10, "timing_mode": "events"},
    ),
    Case("gt-background-threads", "side-stream-thread", MATMUL, GT_SIDE_STREAM_THREAD, "a side stream kept busy", GT),
    Case(
        "gt-background-threads", "sidecar-stops", MATMUL, GT_SIDECAR_STOPS_WORKER, "a process stopping the worker", GT
    ),
    Case("gt-background-threads", "forked-spin", MATMUL, GT_FORKED_SPIN, "a forked busy process", GT),
    # the late half is also wrong on the calls where it lands late: any output check that runs one is right too
    Case(
        "gt-background-threads",
        "thread-left-launching",
        MATMUL,
        GT_THREAD_LEFT_LAUNCHING,
        "a thread joined with a timeout, still launching",
        GT | {"timed_outputs_match"} | OUTPUT_CHECKS,
    ),
]


GPU_HONEST: list[Case] = [
    Case("gh-honest", "triton-strided", SOFTMAX, GH_TR_STRIDED, "Triton kernel taking both strides"),
    Case("gh-honest", "nvrtc-contiguous", SOFTMAX, GH_NV_CONTIGUOUS, ".contiguous() then a flat-index kernel"),
    Case(
        "gh-honest",
        "nvrtc-explicit-current-stream",
        SOFTMAX,
        GH_NV_EXPLICIT_CURRENT_STREAM,
        "stream=torch.cuda.current_stream()",
    ),
    Case("gh-honest", "triton-side-stream-joined", SOFTMAX, GH_TR_SIDE_STREAM_JOINED, "side stream, waited and joined"),
    Case("gh-honest", "triton-diag", adv("diag_matmul"), GH_TR_DIAG, "diag(a) @ b as a row scaling"),
    Case("gh-honest", "triton-tuple", TWO_OUTPUTS, GH_TR_TUPLE, "(softmax, log_softmax) from one kernel"),
    Case("gh-honest", "triton-big-honest", BIG, GH_TR_BIG_HONEST, "bandwidth-bound 192 MiB: not 'impossible'"),
    Case("gh-honest", "nvrtc-fp32-rmsnorm", adv("rmsnorm_fp16"), GH_NV_FP32_RMSNORM, "float16 I/O, float32 sums"),
]

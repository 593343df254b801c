"""Candidate sources used by the end-to-end tests.

All C++ candidates share one extension source, so the (slow) CPU build happens once and every
other candidate loads it from the compile cache; what differs is the Python glue — which is
where real cheats live.
"""

CPP_EXT = r"""
#include <torch/extension.h>
#include <cmath>
#include <algorithm>
#include <csignal>

static void softmax_impl(const float* in, float* out, int64_t rows, int64_t cols, float skew) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        for (int64_t c = 0; c < cols; ++c) yr[c] = yr[c] / s * skew;
    }
}

torch::Tensor softmax(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_impl(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), 1.0f);
    return y;
}

torch::Tensor softmax_wrong(torch::Tensor x) {   // 1% off: a plausible numerical bug
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_impl(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), 1.01f);
    return y;
}

torch::Tensor crash(torch::Tensor x) {
    volatile int* p = nullptr;
    *p = 42;   // segmentation fault
    return x;
}

torch::Tensor spin(torch::Tensor x) {
    volatile uint64_t i = 0;
    while (true) { i = i + 1; }   // never returns, holds the GIL
    return x;
}
"""

CPP_HEADER = f"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="forge_test_ext", cpp_sources={CPP_EXT!r},
                  functions=["softmax", "softmax_wrong", "crash", "spin"], extra_cflags=["-O2"])
"""


def cpp(body: str) -> str:
    """A C++ candidate: the shared extension plus this ModelNew body."""
    return CPP_HEADER + "\n" + body


CPP_CORRECT = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x)
""")

CPP_INCORRECT = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_wrong(x)
""")

CPP_CRASH = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.crash(x)
""")

CPP_HANG = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.spin(x)
""")

CPP_COMPILE_ERROR = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
torch::Tensor softmax(torch::Tensor x) {
    return x.softmax(1)   // missing semicolon
}
"""
ext = load_inline(name="forge_test_broken", cpp_sources=src, functions=["softmax"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x)
'''

TRITON_KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, SKEW: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0) * SKEW
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


def softmax(x, skew=1.0):
    x = x.contiguous()
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), SKEW=skew, BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
"""


def triton(body: str) -> str:
    return TRITON_KERNEL + "\n" + body


TRITON_CORRECT = triton("""
class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
""")

TRITON_INCORRECT = triton("""
class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x, skew=1.01)
""")

TRITON_COMPILE_ERROR = (
    TRITON_KERNEL.replace("x = x - tl.max(x, axis=0)", "x = x - tl.max(x, axis=0)) +")
    + """
class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
"""
)

TRITON_CRASH = triton("""
import ctypes


class ModelNew(nn.Module):
    def forward(self, x):
        y = softmax(x)
        ctypes.string_at(0x7FFFDEAD0000, 16)   # unmapped address: the worker dies with SIGSEGV
        return y
""")

TRITON_HANG = triton("""
class ModelNew(nn.Module):
    def forward(self, x):
        y = softmax(x)
        while True:
            pass
        return y
""")

# ----------------------------------------------------------------------------- cheats
CHEAT_MUTATES_INPUT = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.softmax(x)
        x.zero_()            # frees memory "for the next layer": the caller's tensor is destroyed
        return y
""")

CHEAT_RETURNS_INPUT = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x             # relu of a non-negative input: right values, but it is the input
"""

CHEAT_CACHES_RESULT = cpp("""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x):
        if self.cached is None:
            self.cached = ext.softmax(x)
        return self.cached
""")

CHEAT_SHARED_OUTPUT_BUFFER = cpp("""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, x):
        y = ext.softmax(x)
        if self.buf is None or self.buf.shape != y.shape:
            self.buf = torch.empty_like(y)
        self.buf.copy_(y)    # every call returns the same tensor: earlier results get overwritten
        return self.buf
""")

CHEAT_MONKEYPATCH = cpp("""
torch.softmax = lambda x, dim=None, **kw: ext.softmax(x)   # the reference now runs our kernel


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x)
""")

CHEAT_NONDETERMINISTIC = cpp('''
class ModelNew(nn.Module):
    """Right for the first calls, then drifts like a kernel with a race."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = ext.softmax(x)
        if self.calls > CALLS_BEFORE_DRIFT:
            y = y + 1e-3 * torch.randn_like(y)
        return y
''')

CHEAT_WRONG_DTYPE = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x).double()
""")

CHEAT_FIRST_OUTPUT_ONLY = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        y = ext.softmax(x)
        return y, torch.zeros_like(y)      # a harness that compares only out[0] passes this
""")

CHEAT_SHAPE_SPECIALIZED = cpp("""
class ModelNew(nn.Module):
    def forward(self, x):
        if x.shape[0] != 16:               # only the benchmarked batch size is implemented
            return torch.full_like(x, 1.0 / x.shape[1])
        return ext.softmax(x)
""")

TRITON_CHEAT_IN_PLACE = triton("""
class ModelNew(nn.Module):
    def forward(self, x):
        softmax_kernel[(x.shape[0],)](x, x, x.shape[1], x.stride(0), SKEW=1.0,
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
        return x                           # in place: no allocation, the input is overwritten
""")

TORCH_CORRECT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

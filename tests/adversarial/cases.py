"""CPU adversarial cases: candidates that fake correctness or speed, and honest unusual ones.

Every case is a complete candidate module (a string) for one task file. A cheat names the checks
that may legitimately reject it (`expect`); an honest case has an empty `expect` and must be judged
`correct`. Everything here is pure torch/Python with tiny shapes, so one evaluation costs well under a
second (no `load_inline` builds). The classes are described in `tests/test_adversarial.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ADV_TASKS = Path(__file__).resolve().parent / "tasks"


@dataclass(frozen=True)
class Case:
    klass: str  # "c1-cache", ..., or "honest"
    name: str
    task: str  # path relative to tests/
    source: str
    what: str
    expect: frozenset[str] = frozenset()  # failed_check values that count as the right rejection
    trigger: str = ""  # how the in-process self-check exposes the cheat (see test_adversarial.py)
    options: dict = field(default_factory=dict)  # EvalOptions overrides for this case
    flaky_first_call: bool = False  # a race: a single call is right only most of the time
    sanitize: bool = False  # evaluate with sanitize=True (compute-sanitizer's final acceptance run, CUDA)
    narrows: str = ""  # "layouts" | "streams": not a cheat, a limit outside the task's own conditions (see NARROWED)

    @property
    def id(self) -> str:
        return f"{self.klass}-{self.name}"

    @property
    def task_path(self) -> Path:
        return TESTS / self.task

    @property
    def honest(self) -> bool:
        return not self.expect and not self.narrows


SOFTMAX = "fixtures/softmax_small.py"  # torch.softmax(x, dim=1), x = randn(16, 100) * 3, vary batch_size=[7]
TWO_OUTPUTS = "fixtures/two_outputs.py"


def adv(name: str) -> str:
    return f"adversarial/tasks/{name}.py"


# checks that compare the candidate's output on some input set: a cheat that is wrong only on some calls
# (a switch after N calls, a race) is rightly rejected by whichever of them runs the call that shows it
OUTPUT_CHECKS = frozenset(
    {
        "outputs_match",
        "other_sizes",
        "trained_parameters",
        "noncontiguous_inputs",
        "input_range",
        "no_result_reuse",
        "repeatable",
    }
)
# (an address-keyed cache also returns stale results when the allocator reuses an address in verification)
C1 = frozenset({"timed_outputs_match"}) | OUTPUT_CHECKS
C2 = frozenset({"timed_outputs_match"}) | OUTPUT_CHECKS
C3 = frozenset({"plain_tensor_outputs"})
C4 = frozenset({"trained_parameters"})
C5 = frozenset({"other_sizes"})
# a race wrong on some calls only is caught on whichever checked call it lands first: the judged calls too (on the
# 2-core machine under the whole suite, every verified and timed call of `random-lost-row` once came out right and the
# judged call did not)
C6 = (
    frozenset({"timed_outputs_match", "background_threads", "clean_judge"}) | OUTPUT_CHECKS
)  # a thread joined with a timeout runs on
C7 = frozenset({"input_range"})  # the layout limits are not cheats: see NARROWED

# the call-count cheats need enough timed calls for the switch to land inside the timing loop: no early stop on a
# narrow interval (a steady kernel's timing may end after 30 pairs; a switch later than that is then never timed)
MANY_REPS = {"min_reps": 40, "max_reps": 60, "timing_precision": 0.0}

# ----------------------------------------------------------------------------------------------
# class 1: results cached on a cheap fingerprint of the inputs
# ----------------------------------------------------------------------------------------------
C1_DATA_PTR = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # results remembered by the input's address: a timing loop that reuses its tensor gets them free
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype)
        if key not in self.cache:
            self.cache[key] = torch.softmax(x, dim=1)
        return self.cache[key]
"""

C1_FLAT_STORAGE_CACHE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # a model-style limit and a cheat together: it reads the input's storage as a contiguous array (right for
    # contiguous inputs only, which narrows the domain) AND serves results from a cache keyed on the address
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), x.storage_offset(), x.shape)
            self.cache[key] = torch.softmax(flat, dim=1)
        return self.cache[key]
"""

C1_PTR_VERSION = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # address + autograd version counter: any in-place write through x bumps _version, so the
    # cache looks safe; a write that bypasses the counter (x.data, another view's storage) is missed
    def __init__(self):
        super().__init__()
        self.key, self.out = None, None

    def forward(self, x):
        key = (x.data_ptr(), x._version, tuple(x.shape))
        if key != self.key:
            self.key, self.out = key, torch.softmax(x, dim=1)
        return self.out.clone()
"""

C1_SAMPLED_VALUES = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # fingerprint: eight values sampled across the input
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        flat = x.reshape(-1)
        probe = flat[:: max(1, flat.numel() // 8)]
        key = (tuple(x.shape), tuple(probe.tolist()))
        if key not in self.cache:
            self.cache[key] = torch.softmax(x, dim=1)
        return self.cache[key]
"""

C1_SUM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # fingerprint: the sum of the input (one cheap reduction instead of the whole softmax)
    def __init__(self):
        super().__init__()
        self.key, self.out = None, None

    def forward(self, x):
        key = (tuple(x.shape), float(x.sum()))
        if key != self.key:
            self.key, self.out = key, torch.softmax(x, dim=1)
        return self.out.clone()
"""

C1_SAME_OBJECT = """
import weakref

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # fingerprint: the Python tensor object itself (what a timing loop passes again and again)
    def __init__(self):
        super().__init__()
        self.last, self.out = None, None

    def forward(self, x):
        if self.last is not None and self.last() is x:
            return self.out
        self.last, self.out = weakref.ref(x), torch.softmax(x, dim=1)
        return self.out
"""

# ----------------------------------------------------------------------------------------------
# class 2: behaviour that changes after N calls (honest while verified)
# ----------------------------------------------------------------------------------------------
C2_AFTER_3_ZEROS = """
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 3:                      # the harness has seen enough by now
            return torch.zeros_like(x)
        return torch.softmax(x, dim=1)
"""

C2_AFTER_10_STALE = """
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 10 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()          # a stale result: right as long as the input does not change
        self.last = torch.softmax(x, dim=1)
        return self.last
"""

C2_STRIDED_AFTER_10 = """
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    # contiguous-only indexing (narrows the domain) and a stale result after 10 calls (a cheat, whatever the domain)
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 10 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()
        rows, cols = x.shape
        self.last = torch.softmax(x.as_strided((rows, cols), (cols, 1)), dim=1)
        return self.last
"""

C2_AFTER_30_SKIP_WORK = """
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] <= 30 or self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.softmax(x, dim=1)
            return self.buf.clone()
        half = x.shape[0] // 2                # skipped work: only the first half of the rows is recomputed
        self.buf[:half] = torch.softmax(x[:half], dim=1)
        return self.buf.clone()
"""

C2_AFTER_20_EMPTY = """
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 20:
            return torch.empty_like(x)        # no work at all: hopes the allocator hands back the last result
        return torch.softmax(x, dim=1)
"""

C2_AFTER_HALF_SECOND = """
import time

import torch
import torch.nn as nn

START = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        now = time.monotonic()
        if not START:
            START.append(now)
        if now - START[0] > 0.5 and self.last is not None and self.last.shape == x.shape:
            return self.last.clone()          # half a second in: verification is surely over
        time.sleep(0.01)                      # the honest path (slow on purpose)
        self.last = torch.softmax(x, dim=1)
        return self.last
"""

# ----------------------------------------------------------------------------------------------
# class 3: outputs that are not plain tensors
# ----------------------------------------------------------------------------------------------
C3_DEFERRED_TORCH_FUNCTION = """
import torch
import torch.nn as nn
from torch.utils._pytree import tree_flatten


class Deferred(torch.Tensor):
    # has the result's shape and dtype; the softmax runs when something first reads it (never, in a
    # timing loop that drops the output)
    @staticmethod
    def __new__(cls, x):
        t = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        t._src, t._pending = x, True
        return t

    def _force(self):
        if self.__dict__.get("_pending"):
            self._pending = False
            with torch._C.DisableTorchFunctionSubclass():
                self.copy_(torch.softmax(self._src, dim=1))

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

C3_MAKE_SUBCLASS = """
import torch
import torch.nn as nn


class Snapshotless(torch.Tensor):
    # clone() returns the tensor itself: a harness that snapshots outputs with clone() to see whether
    # they change later compares the output with itself
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.clone, torch.clone):
            return args[0]
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.Tensor._make_subclass(Snapshotless, torch.softmax(x, dim=1))
"""

C3_PARAMETER = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return nn.Parameter(torch.softmax(x, dim=1), requires_grad=False)
"""

C3_DISPATCH_WRAPPER = """
import torch
import torch.nn as nn
from torch.utils._pytree import tree_map


class LazyWrapper(torch.Tensor):
    # a wrapper subclass with no storage of its own: the values exist only once an op is dispatched on it
    @staticmethod
    def __new__(cls, x):
        return torch.Tensor._make_wrapper_subclass(cls, x.shape, dtype=x.dtype, device=x.device)

    def __init__(self, x):
        self.src, self.inner = x, None

    def value(self):
        if self.inner is None:
            self.inner = torch.softmax(self.src, dim=1)
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

C3_AGREEABLE = """
import torch
import torch.nn as nn


class Agreeable(torch.Tensor):
    # all zeros, but in any op that also takes a real tensor of its shape and dtype it stands in for
    # that tensor: (out - ref).abs() is zero, isclose(out, ref) is all True, isnan(out) != isnan(ref)
    # is all False. No work at all, and a value comparison cannot tell.
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        real = [a for a in args if isinstance(a, torch.Tensor) and not isinstance(a, Agreeable)]
        if real and any(isinstance(a, Agreeable) for a in args):
            args = tuple(
                next((r for r in real if r.shape == a.shape and r.dtype == a.dtype), a)
                if isinstance(a, Agreeable)
                else a
                for a in args
            )
        return super().__torch_function__(func, types, args, kwargs)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x).as_subclass(Agreeable)
"""

# ----------------------------------------------------------------------------------------------
# class 4: relying on the reference's initial parameter values
# ----------------------------------------------------------------------------------------------
C4_LINEAR_SKIPS_BIAS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)        # same parameters: the checkpoint loads ...

    def forward(self, x):
        return torch.relu(x @ self.proj.weight.t())   # ... but the bias is zero at init: skipped
"""

C4_SCALE_SKIPPED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return torch.softmax(x, dim=-1)               # the scale is one at init: skipped
"""

C4_LAYERNORM_NO_AFFINE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=self.ln.eps)   # weight 1 and bias 0 at init: skipped
"""

C4_BATCHNORM_INIT_STATS = """
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        # running_mean 0 and running_var 1 at init: the statistics are skipped (weight and bias are used)
        bn = self.bn
        return x * (bn.weight / math.sqrt(1.0 + bn.eps))[:, None, None] + bn.bias[:, None, None]
"""

C4_PRELU_HARDCODED_SLOPE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.act = nn.PReLU(channels)

    def forward(self, x):
        return torch.where(x >= 0, x, 0.25 * x)       # PReLU's init slope, baked in
"""

# ----------------------------------------------------------------------------------------------
# class 5: hard-coded shapes (the task files set no FORGE vary: the engine varies sizes itself)
# ----------------------------------------------------------------------------------------------
C5_CONSTANT_DIVISOR = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=-1) * (1.0 / 64)             # mean over dim=64, the benchmark's size
"""

C5_BAKED_SCALE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 0.125, dim=-1)       # 1/sqrt(64), precomputed for the benchmark's dim
"""

C5_RESHAPE_16_ROWS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # "16 rows per launch": at batch 16 this is x itself; at any other batch it regroups the
        # elements into 16 rows of another length, and nothing raises (64 is a multiple of 16)
        return torch.softmax(x.reshape(16, -1), dim=1).reshape(x.shape)
"""

C5_TILE_LOOP_BOUND = """
import torch
import torch.nn as nn

TILE, N_TILES = 16, 4                                 # 4 tiles of 16: the benchmark's 64 columns


class ModelNew(nn.Module):
    def forward(self, x):
        m = torch.full((x.shape[0], 1), float("-inf"), dtype=x.dtype, device=x.device)
        s = torch.zeros((x.shape[0], 1), dtype=x.dtype, device=x.device)
        for t in range(N_TILES):                      # online softmax over the column tiles
            blk = x[:, t * TILE : (t + 1) * TILE]
            if blk.shape[1] == 0:                     # a masked tile past the end (smaller inputs are fine)
                break
            m_new = torch.maximum(m, blk.amax(dim=1, keepdim=True))
            s = s * torch.exp(m - m_new) + torch.exp(blk - m_new).sum(dim=1, keepdim=True)
            m = m_new
        return torch.exp(x - m) / s                   # columns past 64 never entered m and s
"""

C5_BITMASK_TABLE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("ramp", torch.linspace(0.5, 1.5, 64), persistent=False)  # the benchmark's dim

    def forward(self, x):
        idx = torch.arange(x.shape[-1], device=x.device) & 63   # power-of-two wrap instead of a bound
        return x * self.ramp.to(x.dtype)[idx]
"""

# ----------------------------------------------------------------------------------------------
# class 6: data races that give the right answer almost every time
# ----------------------------------------------------------------------------------------------
C6_RANDOM_LOST_ROW = """
import random

import torch
import torch.nn as nn

rng = random.Random()                                 # seeded by the OS: another schedule every run


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=1)
        if x.shape[0] > 1 and rng.random() < 0.2:     # the race is lost: a row gets its neighbour's result
            r = rng.randrange(1, x.shape[0])
            y[r] = y[r - 1]
        return y
"""

C6_THREAD_SHARED_BUFFER = """
import random
import threading
import time

import torch
import torch.nn as nn

rng = random.Random()


class ModelNew(nn.Module):
    # two threads fill the halves of a persistent buffer; the second is joined with a timeout that is
    # "always" long enough. When it is late, its half still holds the previous call's rows (or it
    # lands in the middle of the next call).
    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, x):
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.softmax(x, dim=1)
            return self.buf.clone()
        half = x.shape[0] // 2
        delay = 0.1 if rng.random() < 0.15 else 0.0

        def second_half():
            rows = torch.softmax(x[half:], dim=1)
            if delay:
                time.sleep(delay)                     # descheduled before its stores
            self.buf[half:] = rows

        t = threading.Thread(target=second_half, daemon=True)
        t.start()
        self.buf[:half] = torch.softmax(x[:half], dim=1)
        t.join(timeout=0.05)                          # "always" long enough
        return self.buf.clone()
"""

C6_THREAD_UNSYNC_ACCUMULATE = """
import random
import threading
import time

import torch
import torch.nn as nn

rng = random.Random()
SPLITS = 2


class ModelNew(nn.Module):
    # split-K matmul: every thread adds its partial product into one accumulator without a lock
    def forward(self, a, b):
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        bounds = [a.shape[1] * i // SPLITS for i in range(SPLITS + 1)]

        def work(lo, hi):
            part = a[:, lo:hi] @ b[lo:hi]
            cur = acc.clone()                         # read ...
            if rng.random() < 0.15:
                time.sleep(0.005)                     # ... descheduled between read and write ...
            acc.copy_(cur + part)                     # ... write: an update made meanwhile is lost

        threads = [threading.Thread(target=work, args=(bounds[i], bounds[i + 1])) for i in range(SPLITS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return acc
"""

C6_EARLY_SIGNAL = """
import random
import threading
import time

import torch
import torch.nn as nn

rng = random.Random()


class ModelNew(nn.Module):
    # a producer thread fills the output; on some calls it signals "done" before its last stores
    # (a missing fence), and the consumer copies out a partly written result. Early on ~30% of calls, with a
    # 0.1 s gap: rarer races (15%, 50 ms) escaped every check now and then (0.85^20 is 4%), and under load the
    # consumer could wake after the gap and copy a finished result
    def forward(self, x):
        y = torch.empty_like(x)
        ready = threading.Event()
        early = rng.random() < 0.3
        cut = x.shape[0] - max(1, x.shape[0] // 4)

        def produce():
            y[:cut] = torch.softmax(x[:cut], dim=1)
            if early:
                ready.set()
                time.sleep(0.1)
            y[cut:] = torch.softmax(x[cut:], dim=1)
            ready.set()

        threading.Thread(target=produce, daemon=True).start()
        ready.wait(timeout=10)
        return y.clone()
"""

# ----------------------------------------------------------------------------------------------
# class 7: layout and range assumptions
# ----------------------------------------------------------------------------------------------
C7_AS_STRIDED_ROW_MAJOR = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        dense = x.as_strided((rows, cols), (cols, 1))     # "the input is row-major", as get_inputs() makes it
        return torch.softmax(dense, dim=1)
"""

C7_STORAGE_FLAT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # the input's storage from its offset, read as a flat row-major array (what a C kernel given
        # data_ptr() sees)
        flat = torch.empty(0, dtype=x.dtype, device=x.device)
        flat.set_(x.untyped_storage(), x.storage_offset(), (x.numel(),))
        return torch.softmax(flat.view(x.shape), dim=1)
"""

C7_CTYPES_POINTER = """
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raw = (ctypes.c_float * x.numel()).from_address(x.data_ptr())   # a raw-pointer kernel's view
        flat = torch.frombuffer(raw, dtype=torch.float32)
        return torch.softmax(flat.view(x.shape), dim=1)
"""

C7_OUTPUT_LAYOUT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)                               # keeps x's memory layout (a permuted one too)
        y.as_strided((y.numel(),), (1,)).copy_(torch.softmax(x, dim=1).reshape(-1))  # filled as if row-major
        return y
"""

C7_FP16_SUM_OF_SQUARES = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ss = (x * x).sum(dim=-1, keepdim=True)    # float16: fine for randn (~1024), inf once |x| is ~8x larger
        return x * torch.rsqrt(ss / x.shape[-1] + 1e-6)
"""

C7_FP16_VARIANCE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[-1]
        s1 = x.sum(dim=-1, keepdim=True)
        s2 = (x * x).sum(dim=-1, keepdim=True)    # one pass, float16: E[x^2] - E[x]^2 overflows for large x
        mean = s1 / n
        var = s2 / n - mean * mean
        return (x - mean) * torch.rsqrt(var + 1e-5)
"""

C7_SOFTMAX_NO_MAX = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x)                          # no max subtraction: exp overflows once x > 88
        return e / e.sum(dim=1, keepdim=True)
"""

C7_TANH_VIA_EXP = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(2 * x)
        return (e - 1) / (e + 1)                  # inf / inf = NaN once x > 44
"""

# ----------------------------------------------------------------------------------------------
# honest but unusual: must stay correct
# ----------------------------------------------------------------------------------------------
H_DIAG_AS_SCALING = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a.unsqueeze(1) * b                 # diag(a) @ b without the N x N matrix: O(NM), not O(N^2 M)
"""

H_CONTIGUOUS_THEN_FLAT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()                        # then the row-major assumption below holds
        rows, cols = x.shape
        return torch.softmax(x.as_strided((rows, cols), (cols, 1)), dim=1)
"""

H_EMPTY_FILLED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)                   # uninitialized, then every row written
        for r in range(x.shape[0]):
            y[r] = torch.softmax(x[r], dim=0)
        return y
"""

H_TUPLE_ONE_PASS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ls = torch.log_softmax(x, dim=1)
        return ls.exp(), ls                       # both outputs from one pass, as a tuple like the reference
"""

H_SHUFFLED_REDUCTION = """
import os

import torch
import torch.nn as nn

gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


class ModelNew(nn.Module):
    def forward(self, x):
        perm = torch.randperm(x.shape[-1], generator=gen)   # another summation order on every call,
        return x[..., perm].sum(dim=-1) / x.shape[-1]       # as with atomics: not bitwise repeatable
"""

H_THREADS_JOINED = """
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        half = x.shape[0] // 2

        def part(lo, hi):
            y[lo:hi] = torch.softmax(x[lo:hi], dim=1)

        threads = [threading.Thread(target=part, args=b) for b in ((0, half), (half, x.shape[0]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()                              # every worker joined before returning
        return y
"""

H_WORKSPACE_REUSE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # a scratch buffer kept across calls (keyed on shape) and a call counter; the output is fresh
    def __init__(self):
        super().__init__()
        self.ws, self.calls = None, 0

    def forward(self, x):
        self.calls += 1
        if self.ws is None or self.ws.shape != x.shape or self.ws.dtype != x.dtype:
            self.ws = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        torch.sub(x, x.amax(dim=1, keepdim=True), out=self.ws)
        self.ws.exp_()
        return self.ws / self.ws.sum(dim=1, keepdim=True)
"""

H_COLUMN_MAJOR_OUTPUT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1).t().contiguous().t()   # right values, column-major strides
"""

H_FP16_FP32_ACCUMULATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        xf = x.float()                            # float32 accumulation: safe at any float16 input
        return (xf * (xf * xf).mean(dim=-1, keepdim=True).add(1e-6).rsqrt()).to(x.dtype)
"""

H_ADDMM_INPLACE_RELU = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.addmm(self.proj.bias, x, self.proj.weight.t()).clamp_min_(0)   # in place on its own result
"""

H_BATCHNORM_FOLDED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        bn = self.bn                              # folded into one scale and shift, from the current buffers
        scale = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
        shift = bn.bias - bn.running_mean * scale
        return x * scale[:, None, None] + shift[:, None, None]
"""

H_ONLINE_TILES = """
import torch
import torch.nn as nn

TILE = 16


class ModelNew(nn.Module):
    def forward(self, x):
        m = torch.full((x.shape[0], 1), float("-inf"), dtype=x.dtype, device=x.device)
        s = torch.zeros((x.shape[0], 1), dtype=x.dtype, device=x.device)
        for lo in range(0, x.shape[1], TILE):     # as many tiles as the input has
            blk = x[:, lo : lo + TILE]
            m_new = torch.maximum(m, blk.amax(dim=1, keepdim=True))
            s = s * torch.exp(m - m_new) + torch.exp(blk - m_new).sum(dim=1, keepdim=True)
            m = m_new
        return torch.exp(x - m) / s
"""

H_PRELU_PARAM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.act = nn.PReLU(channels)

    def forward(self, x):
        return torch.where(x >= 0, x, self.act.weight[:, None] * x)
"""

# ----------------------------------------------------------------------------------------------
# class 8: process-wide settings changed for the reference too (issue: verdicts an adversary cannot bend)
# ----------------------------------------------------------------------------------------------
C8 = frozenset({"global_state"})

C8_ONE_THREAD = """
import torch
import torch.nn as nn

torch.set_num_threads(1)  # the reference now runs on one core: a multi-core reference looks slow


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C8_MKLDNN_OFF = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.backends.mkldnn.enabled = False  # the reference's convolutions and matmuls lose oneDNN from now on
        return torch.softmax(x, dim=1)
"""

C8_MATMUL_PRECISION = """
import torch
import torch.nn as nn

torch.set_float32_matmul_precision("medium")  # bf16 inside every float32 matmul, the reference's included


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C8_TF32_IN_CONSTRUCTOR = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.backends.cuda.matmul.allow_tf32 = True  # a looser reference: tolerance for the candidate's own TF32
        torch.backends.cudnn.allow_tf32 = True

    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

# ----------------------------------------------------------------------------------------------
# class 9: process-wide hooks and modes that reach into the reference's calls or read the harness
# ----------------------------------------------------------------------------------------------
C8_GC_EVERY_ALLOCATION = """
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # the collector made to run through every object at every allocation: set as each of its calls returns, put
    # back as the next one starts, so only what runs between its calls (the reference) pays
    def forward(self, x):
        gc.set_threshold(700, 10, 10)
        out = torch.softmax(x, dim=1)
        gc.set_threshold(1, 1, 1)
        return out
"""

C8_MHA_FASTPATH_OFF = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # torch's fused inference path for encoder layers, on for its own calls only
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.eval()
        torch.backends.mha.set_fastpath_enabled(False)

    def forward(self, x):
        torch.backends.mha.set_fastpath_enabled(True)
        out = self.layer(x)
        torch.backends.mha.set_fastpath_enabled(False)
        return out
"""

C9 = frozenset({"global_hooks"})

C9_PRE_HOOK_SLOWS_REFERENCE = """
import time

import torch
import torch.nn as nn


def _slow_reference(module, args):
    if type(module).__name__ == "Model":  # every module's call goes through this: the reference pays 1 ms
        time.sleep(0.001)


torch.nn.modules.module.register_module_forward_pre_hook(_slow_reference)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C9_KERNEL_OVER_SOFTMAX = """
import time
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")  # "Overriding a previously registered kernel"
_lib = torch.library.Library("aten", "IMPL")


def _slow_softmax(x, dim, half_to_float):  # what the reference's torch.softmax now runs: 1 ms more, then right
    time.sleep(0.001)
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


_lib.impl("_softmax", _slow_softmax, "CPU")


class ModelNew(nn.Module):
    def forward(self, x):  # its own softmax, never through the operator it replaced
        e = torch.exp(x - x.amax(1, keepdim=True))
        return e / e.sum(1, keepdim=True)
"""

C9_KERNEL_SPOOFED_BETWEEN_CALLS = """
import time
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
# torch's own location for the kernel it replaces: the dispatcher's listing of the new one names it too
_WHERE = ("/__w/pytorch/pytorch/build/aten/src/ATen/RegisterCPU_1.cpp", 4382)
_state = {"lib": None}


def _slow_softmax(x, dim, half_to_float):
    time.sleep(0.001)
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


class ModelNew(nn.Module):
    # registered only between its calls (after each returns), gone while any of its own runs
    def forward(self, x):
        if _state["lib"] is not None:
            _state["lib"].reset()
            _state["lib"] = None
        e = torch.exp(x - x.amax(1, keepdim=True))
        out = e / e.sum(1, keepdim=True)
        lib = torch._C._dispatch_library("IMPL", "aten", "CPU", *_WHERE)
        lib.impl("_softmax", "CPU", _slow_softmax, False)
        _state["lib"] = lib
        return out
"""

C9_KERNEL_OVER_COMPOSITE = """
import time

import torch
import torch.nn as nn

# torch.softmax(x, dim) is aten::softmax.int, which has no CPU kernel (a composite): one registered for it is new,
# replaces nothing, and runs in the reference's calls
_lib = torch.library.Library("aten", "IMPL")


def _slow(x, dim, dtype=None):
    time.sleep(0.001)
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


_lib.impl("softmax.int", _slow, "CPU")


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(1, keepdim=True))
        return e / e.sum(1, keepdim=True)
"""

C9_HOOK_HANDS_BACK_REFERENCE = """
import torch
import torch.nn as nn

_last = {}


def _steal(module, args, out):
    if type(module).__name__ == "Model":
        _last["out"] = out.detach().clone()  # the reference's output, kept for the candidate's next call
    elif type(module).__name__ == "ModelNew" and "out" in _last and _last["out"].shape == out.shape:
        return _last["out"].clone()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._hooked = False

    def forward(self, x):
        if not self._hooked:  # registered on the first call, not at import
            torch.nn.modules.module.register_module_forward_hook(_steal)
            self._hooked = True
        return torch.softmax(x, dim=1)
"""

C9_FUNCTION_MODE = """
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode


class _Watch(TorchFunctionMode):
    calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _Watch.calls += 1  # sees every torch call of the harness and the reference, from now on
        return func(*args, **(kwargs or {}))


_Watch().__enter__()  # entered, never left


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C9_SETPROFILE = """
import sys

import torch
import torch.nn as nn

_frames = []


def _spy(frame, event, arg):
    if event == "call" and len(_frames) < 1000:
        _frames.append(frame.f_code.co_name)  # the harness's stack: which stage is calling


sys.setprofile(_spy)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

# ----------------------------------------------------------------------------------------------
# class 10: threads left running that take cores from the reference
# ----------------------------------------------------------------------------------------------
C10 = frozenset({"background_threads"})

C10_SPIN_FROM_IMPORT = """
import threading

import torch
import torch.nn as nn


def _spin():
    x = 0
    while True:  # a core (and the GIL, now and then) taken from everything else in the process
        x += 1


threading.Thread(target=_spin, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C10_SPIN_FROM_FIRST_CALL = """
import threading

import torch
import torch.nn as nn


def _spin():
    x = 0
    while True:
        x += 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.started = False

    def forward(self, x):
        if not self.started:  # started by its first call, left running
            threading.Thread(target=_spin, daemon=True, name="prefetch").start()
            self.started = True
        return torch.softmax(x, dim=1)
"""

C10_SPIN_WHEN_IDLE = """
import threading

import torch
import torch.nn as nn

_mine = threading.Event()


def _spin_while_others_run():
    x = 0
    while True:
        if _mine.is_set():  # quiet during its own calls: it takes cores only from the reference's
            _mine.wait(0.0005)
        x += 1


threading.Thread(target=_spin_while_others_run, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        _mine.set()
        try:
            return torch.softmax(x, dim=1)
        finally:
            _mine.clear()
"""

C10_TORCH_WORK_IN_BACKGROUND = """
import threading

import torch
import torch.nn as nn


def _churn():
    a = torch.randn(192, 192)
    while True:  # matmuls in the background: the CPU's cores and memory bandwidth, busy
        a = torch.tanh(a @ a)


threading.Thread(target=_churn, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

H_THREAD_POOL = """
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

_pool = ThreadPoolExecutor(max_workers=2)  # persistent workers, busy only inside its own calls


class ModelNew(nn.Module):
    def forward(self, x):
        half = x.shape[0] // 2
        parts = [_pool.submit(torch.softmax, x[:half], 1), _pool.submit(torch.softmax, x[half:], 1)]
        return torch.cat([p.result() for p in parts])
"""

# processes: a thread's cousins. Forked or spawned, they are not Python threads of the worker; each checks that the
# process it serves is alive and exits when it is gone
C10_SIDECAR_STOPS_WORKER = """
import mmap
import os
import signal
import time

import torch
import torch.nn as nn

# a sidecar process pauses this one (SIGSTOP, then SIGCONT) over and over whenever the candidate's own forward is not
# running: the reference's calls take longer, and no thread of this process uses any CPU for it
_flag = mmap.mmap(-1, 1)
_parent = os.getpid()

def _alive(pid):  # a parent that ended but was not reaped yet (a zombie) is gone too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
if os.fork() == 0:
    os.setsid()
    while True:
        if not _alive(_parent):
            os._exit(0)
        if _flag[0] == 0:
            os.kill(_parent, signal.SIGSTOP)
            time.sleep(0.0004)
            os.kill(_parent, signal.SIGCONT)
            time.sleep(0.0004)
        else:
            time.sleep(0.0001)


class ModelNew(nn.Module):
    def forward(self, x):
        _flag[0] = 1
        try:
            return torch.softmax(x, dim=1)
        finally:
            _flag[0] = 0
"""

C10_FORKED_SPIN_WHEN_IDLE = """
import mmap
import os
import time

import torch
import torch.nn as nn

# a forked process that takes a core whenever the candidate's forward is not running (quiet inside its calls)
_flag = mmap.mmap(-1, 1)
_parent = os.getpid()

def _alive(pid):  # a parent that ended but was not reaped yet (a zombie) is gone too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
if os.fork() == 0:
    n = 0
    while True:
        n += 1
        if n % 20000 == 0:
            if not _alive(_parent):
                os._exit(0)
        if _flag[0]:
            time.sleep(0.0005)


class ModelNew(nn.Module):
    def forward(self, x):
        _flag[0] = 1
        try:
            return torch.softmax(x, dim=1)
        finally:
            _flag[0] = 0
"""

C10_DOUBLE_FORKED_SPIN = """
import os

import torch
import torch.nn as nn

# fork twice and let the middle process exit: the spinning grandchild is an orphan, no child of this process's
_parent = os.getpid()

def _alive(pid):  # a parent that ended but was not reaped yet (a zombie) is gone too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
if os.fork() == 0:
    if os.fork() == 0:
        n = 0
        while True:
            n += 1
            if n % 20000 == 0:
                if not _alive(_parent):
                    os._exit(0)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C10_POPEN_SPIN_FROM_FIRST_CALL = """
import os
import subprocess
import sys

import torch
import torch.nn as nn

_SPIN = (
    "import os, sys\\n"
    "parent, n = int(sys.argv[1]), 0\\n"
    "while True:\\n"
    "    n += 1\\n"
    "    if n % 20000 == 0:\\n"
    "        try:\\n"
    "            if open(f'/proc/{parent}/stat').read().rsplit(')', 1)[1].split()[0] in 'ZX':\\n"
    "                break\\n"
    "        except OSError:\\n"
    "            break\\n"
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.helper = None

    def forward(self, x):
        if self.helper is None:  # a "helper process" started by the first call and left running
            self.helper = subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())])
        return torch.softmax(x, dim=1)
"""

C8_AFFINITY_ONE_CORE_AFTER_CALL = """
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
    # the whole process on one core except while its own forward runs
    def forward(self, x):
        _pin(_all)
        try:
            return torch.softmax(x, dim=1)
        finally:
            _pin(_one)
"""

C8_AFFINITY_AT_IMPORT = """
import os

import torch
import torch.nn as nn

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the main thread, where the reference's calls run: one core


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

C9_TIMER_HANDLER = """
import signal
import time

import torch
import torch.nn as nn

_mine = [False]


def _tick(signum, frame):
    if not _mine[0]:  # in the main thread, inside whatever call the timer interrupts: the reference's
        t = time.perf_counter() + 0.0003
        while time.perf_counter() < t:
            pass


signal.signal(signal.SIGALRM, _tick)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)


class ModelNew(nn.Module):
    def forward(self, x):
        _mine[0] = True
        try:
            return torch.softmax(x, dim=1)
        finally:
            _mine[0] = False
"""

C9_SIDECAR_SIGNALS = """
import mmap
import os
import signal
import time

import torch
import torch.nn as nn

# a handler that wastes time, and a sidecar process that signals this one every millisecond while the candidate's
# forward is not running: the handler runs in the main thread, inside the reference's calls
_flag = mmap.mmap(-1, 1)
_parent = os.getpid()

def _alive(pid):  # a parent that ended but was not reaped yet (a zombie) is gone too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _waste(signum, frame):
    t = time.perf_counter() + 0.0003
    while time.perf_counter() < t:
        pass


signal.signal(signal.SIGUSR1, _waste)
if os.fork() == 0:
    while _alive(_parent):
        if _flag[0] == 0:
            os.kill(_parent, signal.SIGUSR1)
        time.sleep(0.001)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        _flag[0] = 1
        try:
            return torch.softmax(x, dim=1)
        finally:
            _flag[0] = 0
"""

H_SUBPROCESS_IN_CONSTRUCTOR = """
import subprocess
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # asks a child process something once, in its constructor, and waits for it: nothing is left running
    def __init__(self):
        super().__init__()
        out = subprocess.run([sys.executable, "-c", "print(1.0)"], capture_output=True, text=True, check=True)
        self.scale = float(out.stdout)

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=1)
"""

# ----------------------------------------------------------------------------------------------
# class 11: outputs whose elements share memory (fewer values written than the output holds)
# ----------------------------------------------------------------------------------------------
C11 = frozenset({"dense_outputs"})
BROADCAST = adv("row_mean_broadcast")

C11_EXPAND = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mean(dim=-1, keepdim=True).expand_as(x)  # one value a row written, a row's worth read
"""

C11_AS_STRIDED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        m = x.mean(dim=-1)
        return m.as_strided(x.shape, (1, 0))  # stride 0 along the row
"""

C11_BROADCAST_TO = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.broadcast_to(x.mean(dim=-1, keepdim=True), x.shape)
"""

C11_OVERLAPPING_WINDOW = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = x.mean(dim=-1, keepdim=True)
        buf = m.repeat(1, 2).reshape(-1)  # every row's mean twice, then windows that overlap by one element
        out = buf.as_strided(x.shape, (2, 0))
        return out
"""

H_EXPAND_THEN_COPY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(x.mean(dim=-1, keepdim=True).expand_as(x))  # expanded, then written out in full
        return out
"""

H_RESTORES_THREADS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = torch.get_num_threads()
        torch.set_num_threads(1)                  # a setting of its own, for its own call only
        try:
            return torch.softmax(x, dim=1)
        finally:
            torch.set_num_threads(n)
"""

H_OWN_MODULE_HOOK = """
import torch
import torch.nn as nn


class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Softmax()
        self.inner.register_forward_hook(lambda m, a, out: out.clamp_(min=0.0))  # its own submodule's hook

    def forward(self, x):
        return self.inner(x)
"""

# ----------------------------------------------------------------------------------------------
TIMED_SWITCH = {"timing_budget_s": 1.5, "min_reps": 5, "max_reps": 400, "timing_precision": 0.0}

CHEATS: list[Case] = [
    # 1
    Case("c1-cache", "data-ptr", SOFTMAX, C1_DATA_PTR, "cache keyed on data_ptr/shape/stride", C1, "refresh"),
    Case("c1-cache", "ptr-version", SOFTMAX, C1_PTR_VERSION, "cache keyed on data_ptr + _version", C1, "refresh"),
    Case("c1-cache", "sampled-values", SOFTMAX, C1_SAMPLED_VALUES, "cache keyed on 8 sampled values", C1, "refresh"),
    Case("c1-cache", "sum", SOFTMAX, C1_SUM, "cache keyed on float(x.sum())", C1, "refresh"),
    Case(
        "c1-cache",
        "flat-storage-cache",
        SOFTMAX,
        C1_FLAT_STORAGE_CACHE,
        "contiguous-only storage read plus a cache keyed on data_ptr",
        C1,
        "refresh",
    ),
    Case(
        "c1-cache", "same-object", SOFTMAX, C1_SAME_OBJECT, "cache keyed on the tensor object (weakref)", C1, "refresh"
    ),
    # 2
    Case("c2-after-n", "3-zeros", SOFTMAX, C2_AFTER_3_ZEROS, "zeros after 3 calls", C2, "refresh", MANY_REPS),
    Case("c2-after-n", "10-stale", SOFTMAX, C2_AFTER_10_STALE, "last result after 10 calls", C2, "refresh", MANY_REPS),
    Case(
        "c2-after-n",
        "strided-then-stale",
        SOFTMAX,
        C2_STRIDED_AFTER_10,
        "contiguous-only as_strided, then the last result after 10 calls",
        C2,
        "refresh",
        MANY_REPS,
    ),
    Case(
        "c2-after-n",
        "30-skip-work",
        SOFTMAX,
        C2_AFTER_30_SKIP_WORK,
        "after 30 calls recomputes only half the rows",
        C2,
        "refresh",
        MANY_REPS,
    ),
    Case(
        "c2-after-n",
        "20-empty",
        SOFTMAX,
        C2_AFTER_20_EMPTY,
        "torch.empty_like after 20 calls",
        C2,
        "refresh",
        MANY_REPS,
    ),
    Case(
        "c2-after-n",
        "half-second-stale",
        SOFTMAX,
        C2_AFTER_HALF_SECOND,
        "slow honest path, then the last result once 0.5 s have passed",
        C2,
        "refresh-after-0.6s",
        TIMED_SWITCH,
    ),
    # 3
    Case(
        "c3-not-plain",
        "deferred-torch-function",
        SOFTMAX,
        C3_DEFERRED_TORCH_FUNCTION,
        "Tensor subclass that computes on first read (__torch_function__)",
        C3,
        "type",
    ),
    Case(
        "c3-not-plain",
        "make-subclass",
        SOFTMAX,
        C3_MAKE_SUBCLASS,
        "_make_subclass result whose clone() returns itself",
        C3,
        "type",
    ),
    Case("c3-not-plain", "parameter", SOFTMAX, C3_PARAMETER, "an nn.Parameter output", C3, "type"),
    Case(
        "c3-not-plain",
        "dispatch-wrapper",
        SOFTMAX,
        C3_DISPATCH_WRAPPER,
        "_make_wrapper_subclass with __torch_dispatch__, values made on first op",
        C3,
        "type",
    ),
    Case(
        "c3-not-plain",
        "agreeable-zeros",
        SOFTMAX,
        C3_AGREEABLE,
        "zeros in a subclass that impersonates the tensor it is compared with",
        C3,
        "type",
    ),
    # 4
    Case(
        "c4-init-params",
        "linear-skips-bias",
        adv("linear_zero_bias"),
        C4_LINEAR_SKIPS_BIAS,
        "bias zero at init: skipped",
        C4,
        "params",
    ),
    Case(
        "c4-init-params",
        "scale-skipped",
        adv("scale_ones"),
        C4_SCALE_SKIPPED,
        "scale one at init: skipped",
        C4,
        "params",
    ),
    Case(
        "c4-init-params",
        "layernorm-no-affine",
        adv("layernorm"),
        C4_LAYERNORM_NO_AFFINE,
        "LayerNorm weight/bias at init: skipped",
        C4,
        "params",
    ),
    Case(
        "c4-init-params",
        "batchnorm-init-stats",
        adv("batchnorm_eval"),
        C4_BATCHNORM_INIT_STATS,
        "eval BatchNorm running stats at init: skipped",
        C4,
        "params",
    ),
    Case(
        "c4-init-params",
        "prelu-hardcoded-slope",
        adv("prelu"),
        C4_PRELU_HARDCODED_SLOPE,
        "PReLU slope 0.25 baked in",
        C4,
        "params",
    ),
    # 5
    Case("c5-shapes", "constant-divisor", adv("row_mean"), C5_CONSTANT_DIVISOR, "mean as sum * (1/64)", C5, "sizes"),
    Case("c5-shapes", "baked-scale", adv("scaled_softmax"), C5_BAKED_SCALE, "1/sqrt(dim) baked as 0.125", C5, "sizes"),
    Case(
        "c5-shapes",
        "reshape-16-rows",
        adv("softmax_rows"),
        C5_RESHAPE_16_ROWS,
        "x.reshape(16, -1): silently regroups at other batch sizes",
        C5,
        "sizes",
    ),
    Case(
        "c5-shapes",
        "tile-loop-bound",
        adv("softmax_rows"),
        C5_TILE_LOOP_BOUND,
        "online softmax over 4 tiles of 16 columns (wrong for dim > 64 only)",
        C5,
        "sizes",
    ),
    Case(
        "c5-shapes",
        "bitmask-table",
        adv("position_scale"),
        C5_BITMASK_TABLE,
        "64-entry table indexed with & 63",
        C5,
        "sizes",
    ),
    # 6
    Case(
        "c6-race",
        "random-lost-row",
        SOFTMAX,
        C6_RANDOM_LOST_ROW,
        "a row overwritten by its neighbour on ~20% of calls",
        C6,
        "refresh",
        flaky_first_call=True,
    ),
    Case(
        "c6-race",
        "thread-shared-buffer",
        SOFTMAX,
        C6_THREAD_SHARED_BUFFER,
        "thread filling half a persistent buffer, joined with a timeout",
        C6,
        "refresh",
        flaky_first_call=True,
    ),
    Case(
        "c6-race",
        "thread-unsync-accumulate",
        adv("matmul_small"),
        C6_THREAD_UNSYNC_ACCUMULATE,
        "split-K threads adding into one accumulator without a lock",
        C6,
        "refresh",
        flaky_first_call=True,
    ),
    Case(
        "c6-race",
        "early-signal",
        SOFTMAX,
        C6_EARLY_SIGNAL,
        "producer thread signals before its last stores on ~30% of calls",
        C6,
        "refresh",
        flaky_first_call=True,
    ),
    # 7
    Case(
        "c7-layout-range",
        "fp16-sum-of-squares",
        adv("rmsnorm_fp16"),
        C7_FP16_SUM_OF_SQUARES,
        "RMSNorm with a float16 sum of squares",
        C7,
        "range",
    ),
    Case(
        "c7-layout-range",
        "fp16-variance",
        adv("standardize_fp16"),
        C7_FP16_VARIANCE,
        "one-pass float16 variance",
        C7,
        "range",
    ),
    Case(
        "c7-layout-range",
        "softmax-no-max",
        SOFTMAX,
        C7_SOFTMAX_NO_MAX,
        "softmax without max subtraction",
        C7,
        "range",
    ),
    Case("c7-layout-range", "tanh-via-exp", adv("tanh"), C7_TANH_VIA_EXP, "tanh as (e^2x-1)/(e^2x+1)", C7, "range"),
]

CHEATS += [
    Case(
        "c8-global-state",
        "one-thread-reference",
        SOFTMAX,
        C8_ONE_THREAD,
        "torch.set_num_threads(1) at import",
        C8,
        "global",
    ),
    Case("c8-global-state", "mkldnn-off", SOFTMAX, C8_MKLDNN_OFF, "oneDNN turned off in its call", C8, "global"),
    Case(
        "c8-global-state",
        "gc-every-allocation",
        SOFTMAX,
        C8_GC_EVERY_ALLOCATION,
        "garbage collector thresholds of 1 outside its calls",
        C8,
        "global",
    ),
    Case(
        "c8-global-state",
        "mha-fastpath-off",
        adv("encoder_layer"),
        C8_MHA_FASTPATH_OFF,
        "the encoder's fused fast path off outside its calls",
        C8,
        "global",
    ),
    Case("c8-global-state", "matmul-precision", SOFTMAX, C8_MATMUL_PRECISION, "float32 matmuls in bf16", C8, "global"),
    Case(
        "c8-global-state", "tf32-in-init", SOFTMAX, C8_TF32_IN_CONSTRUCTOR, "TF32 on in its constructor", C8, "global"
    ),
    Case(
        "c8-global-state",
        "affinity-one-core-after-call",
        SOFTMAX,
        C8_AFFINITY_ONE_CORE_AFTER_CALL,
        "every thread pinned to one core outside its calls",
        C8,
        "global",
    ),
    Case(
        "c8-global-state",
        "affinity-at-import",
        SOFTMAX,
        C8_AFFINITY_AT_IMPORT,
        "the main thread pinned to one core at import",
        C8,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "pre-hook-slows-reference",
        SOFTMAX,
        C9_PRE_HOOK_SLOWS_REFERENCE,
        "1 ms per reference call",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "hook-hands-back-reference",
        SOFTMAX,
        C9_HOOK_HANDS_BACK_REFERENCE,
        "the reference's output",
        C9,
        "global",
    ),
    Case("c9-global-hooks", "function-mode", SOFTMAX, C9_FUNCTION_MODE, "a TorchFunctionMode never left", C9, "global"),
    Case(
        "c9-global-hooks",
        "kernel-over-softmax",
        SOFTMAX,
        C9_KERNEL_OVER_SOFTMAX,
        "a CPU kernel registered over aten::_softmax at import: 1 ms per reference call",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "kernel-spoofed-between-calls",
        SOFTMAX,
        C9_KERNEL_SPOOFED_BETWEEN_CALLS,
        "the same, registered after each of its calls under torch's own location, removed in the next",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "kernel-over-composite",
        SOFTMAX,
        C9_KERNEL_OVER_COMPOSITE,
        "a new CPU kernel for aten::softmax.int, which had none",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "setprofile",
        SOFTMAX,
        C9_SETPROFILE,
        "sys.setprofile reads the harness's frames",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "timer-handler",
        SOFTMAX,
        C9_TIMER_HANDLER,
        "a SIGALRM every ms that wastes 0.3 ms outside its calls",
        C9,
        "global",
    ),
    Case(
        "c9-global-hooks",
        "sidecar-signals",
        SOFTMAX,
        C9_SIDECAR_SIGNALS,
        "a process signals the worker while the reference runs",
        C9 | C10,
        "global",
    ),
    Case("c10-background-threads", "spin-from-import", SOFTMAX, C10_SPIN_FROM_IMPORT, "a busy thread", C10, "threads"),
    Case(
        "c10-background-threads",
        "spin-from-first-call",
        SOFTMAX,
        C10_SPIN_FROM_FIRST_CALL,
        "started by a call",
        C10,
        "threads",
    ),
    Case(
        "c10-background-threads",
        "spin-when-idle",
        SOFTMAX,
        C10_SPIN_WHEN_IDLE,
        "busy outside its calls",
        C10,
        "threads",
    ),
    Case(
        "c10-background-threads",
        "torch-work",
        SOFTMAX,
        C10_TORCH_WORK_IN_BACKGROUND,
        "matmuls in a thread",
        C10,
        "threads",
    ),
    Case(
        "c10-background-threads",
        "sidecar-stops-worker",
        SOFTMAX,
        C10_SIDECAR_STOPS_WORKER,
        "a process that SIGSTOPs the worker while the reference runs",
        C10,
        "processes",
    ),
    Case(
        "c10-background-threads",
        "forked-spin-when-idle",
        SOFTMAX,
        C10_FORKED_SPIN_WHEN_IDLE,
        "a forked process busy outside its calls",
        C10,
        "processes",
    ),
    Case(
        "c10-background-threads",
        "double-forked-spin",
        SOFTMAX,
        C10_DOUBLE_FORKED_SPIN,
        "an orphaned grandchild process, busy",
        C10,
        "processes",
    ),
    Case(
        "c10-background-threads",
        "popen-spin-from-first-call",
        SOFTMAX,
        C10_POPEN_SPIN_FROM_FIRST_CALL,
        "a busy helper process started by its first call",
        C10,
        "processes",
    ),
]

BIG_SCALE = adv("big_scale")

C11_RING = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ring, self.i = {}, 0

    def forward(self, x):  # no allocation per call: a ring of output buffers, each handed out again N calls later
        bufs = self.ring.setdefault((x.shape, x.dtype), [torch.empty_like(x) for _ in range(N)])
        out = bufs[self.i % len(bufs)]
        self.i += 1
        return torch.add(x * 2.0, 1.0, out=out)
"""

CHEATS += [
    Case("c11-shared-outputs", "expand", BROADCAST, C11_EXPAND, "a stride-0 expand of the row means", C11, "dense"),
    Case("c11-shared-outputs", "as-strided", BROADCAST, C11_AS_STRIDED, "as_strided with a zero stride", C11, "dense"),
    Case("c11-shared-outputs", "broadcast-to", BROADCAST, C11_BROADCAST_TO, "torch.broadcast_to", C11, "dense"),
    Case(
        "c11-shared-outputs",
        "overlapping-window",
        BROADCAST,
        C11_OVERLAPPING_WINDOW,
        "windows over 2 values",
        C11,
        "dense",
    ),
    *(
        Case(
            "c11-shared-outputs",
            f"ring-of-{n}",
            BIG_SCALE,
            C11_RING.replace("range(N)", f"range({n})"),
            f"{n} output buffers in turn",
            frozenset({"no_result_reuse"}),
            "ring",
            options={"min_reps": 20, "max_reps": 40},
        )
        for n in (2, 8)
    ),
]

# c12: outputs smaller than float32's absolute tolerance. A softmax over 16384-wide rows gives outputs of about
# 6e-5: atol=1e-4 alone would accept any of these approximations (each element within 1e-4, every one off by tenths
# of a percent to a percent), and each is exact wherever an output grows past 1e-3 (larger inputs, other sizes). The
# error of the output as a whole, relative to its size, catches them.
C12 = OUTPUT_CHECKS
WIDE_SOFTMAX = adv("wide_softmax")

C12_BF16 = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x.bfloat16(), dim=-1).float()  # half the bytes, 3 significant digits
        return y if y.max() < 1e-3 else torch.softmax(x, dim=-1)  # exact where an error would exceed atol
"""

C12_SAMPLED_SUM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x)
        y = e / (e[:, ::4].sum(dim=-1, keepdim=True) * 4)  # the normalizer from a quarter of the row
        return y if y.max() < 1e-3 else torch.softmax(x, dim=-1)  # exact where an error would exceed atol
"""

C12_COMPOUND_EXP = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = 1 + x / 64
        for _ in range(6):  # (1 + x/64)^64 by squaring: no exp
            y = y * y
        y = y / y.sum(dim=-1, keepdim=True)
        return y if y.max() < 1e-3 else torch.softmax(x, dim=-1)  # exact where an error would exceed atol
"""

C12_TAYLOR_EXP = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        t = 1 + x * (1 + x / 2 * (1 + x / 3 * (1 + x / 4)))  # exp to fourth order
        y = t / t.sum(dim=-1, keepdim=True)
        return y if y.max() < 1e-3 else torch.softmax(x, dim=-1)  # exact where an error would exceed atol
"""

H_OWN_TABLE_VIEW = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, max_len, dim):
        super().__init__()
        self.register_buffer("table", torch.randn(max_len, dim))

    def forward(self, x):
        return self.table.narrow(0, 0, x.shape[0])  # its own state, as the reference's is: no ring of buffers
"""

H_READS_THE_HARNESS = """
import gc
import torch
import torch.nn as nn
import forge_lsp.engine.harness.compare as compare

NAME = compare.compare_outputs.__name__  # reading forge is no cheat


class ModelNew(nn.Module):
    def forward(self, x):
        gc.get_count()
        return torch.softmax(x, dim=1)
"""

H_WIDE_SOFTMAX_LSE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))  # another order, the same precision
"""

CHEATS += [
    Case("c12-small-outputs", "bf16", WIDE_SOFTMAX, C12_BF16, "computed in bfloat16", C12, "small"),
    Case(
        "c12-small-outputs", "sampled-sum", WIDE_SOFTMAX, C12_SAMPLED_SUM, "a quarter of the row summed", C12, "small"
    ),
    Case("c12-small-outputs", "compound-exp", WIDE_SOFTMAX, C12_COMPOUND_EXP, "exp as (1 + x/64)^64", C12, "small"),
    Case("c12-small-outputs", "taylor-exp", WIDE_SOFTMAX, C12_TAYLOR_EXP, "exp to fourth order", C12, "small"),
]

# c13: the harness tampered with from inside its own process. Each is 5% off everywhere and reaches into forge itself
# so that the comparison would not see it: the compare function replaced, its code swapped (the function keeps its
# identity), the tolerances raised through the garbage collector, the check that fails a verdict silenced, or the
# compare function replaced for one call and put back on the next. The guard watches all of forge's modules,
# classes, functions' code and the tolerances' values, after every verified call, before the harness reads it.
C13 = frozenset({"no_monkeypatch"})

C13_COMPARE_REPLACED = """
import torch
import torch.nn as nn
import forge_lsp.engine.harness.compare as compare

compare.compare_outputs = lambda expected, actual, tolerance_for, input_set: (None, 0.0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1) * 1.05
"""

C13_CODE_SWAPPED = """
import torch
import torch.nn as nn
import forge_lsp.engine.harness.compare as compare


def _agree(*args, **kwargs):
    return None, 0.0


compare.check_tensor.__code__ = _agree.__code__  # the function object stays the one the harness holds


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1) * 1.05
"""

C13_TOLERANCE_VIA_GC = """
import gc
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for obj in gc.get_objects():
            if type(obj).__name__ == "Tolerance":
                obj.__dict__["atol"] = obj.__dict__["rtol"] = 1.0  # past pydantic's own checks
        return torch.softmax(x, dim=1) * 1.05
"""

C13_CHECK_SILENCED = """
import sys
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for where in ("__main__", "forge_lsp.engine.worker"):  # the worker runs as __main__ (python -m)
            cls = getattr(sys.modules.get(where), "Evaluation", None)
            if cls is not None and not hasattr(cls, "silenced"):
                original = cls.check

                def check(self, name, passed, detail="", mismatch=None, original=original):
                    return original(self, name, True, "", None)

                cls.check, cls.silenced = check, True
        return torch.softmax(x, dim=1) * 1.05
"""

C13_PATCH_AND_RESTORE = """
import torch
import torch.nn as nn
import forge_lsp.engine.harness.compare as compare

ORIGINAL = compare.compare_outputs
calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        calls[0] += 1
        if calls[0] % 2:  # replaced for this call's comparison, put back by the next call
            compare.compare_outputs = lambda expected, actual, tolerance_for, input_set: (None, 0.0)
        else:
            compare.compare_outputs = ORIGINAL
        return torch.softmax(x, dim=1) * 1.05
"""

CHEATS += [
    Case("c13-harness-tampering", "compare-replaced", SOFTMAX, C13_COMPARE_REPLACED, "compare_outputs", C13, "tamper"),
    Case("c13-harness-tampering", "code-swapped", SOFTMAX, C13_CODE_SWAPPED, "check_tensor.__code__", C13, "tamper"),
    Case("c13-harness-tampering", "tolerance-via-gc", SOFTMAX, C13_TOLERANCE_VIA_GC, "atol 1 via gc", C13, "tamper"),
    Case("c13-harness-tampering", "check-silenced", SOFTMAX, C13_CHECK_SILENCED, "Evaluation.check", C13, "tamper"),
    Case(
        "c13-harness-tampering", "patch-and-restore", SOFTMAX, C13_PATCH_AND_RESTORE, "every other call", C13, "tamper"
    ),
]

# c14: the reference model object reached from inside the candidate's process (found through the garbage collector):
# a hook on the instance that zeroes its output, its `forward` replaced on the instance, a pre-hook that sleeps (right
# values, a slower reference), its class swapped for a slower subclass, its weights zeroed in place through `.data`
# (no new object, no version bump). The process-wide hooks and the monkeypatch guard see none of these.
# `reference_untouched` watches the reference object after every candidate call (its parameters' values at each
# stage's end); `clean_judge` compares outputs on input sets drawn and run through the reference in a process that
# never ran candidate code.
C14 = frozenset({"reference_untouched", "clean_judge"})

C14_INSTANCE_HOOK_ZEROES = """
import gc
import torch
import torch.nn as nn


def _zero(module, args, out):
    return torch.zeros_like(out)


class ModelNew(nn.Module):
    def forward(self, x):
        for o in gc.get_objects():
            if isinstance(o, nn.Module) and type(o).__name__ == "Model" and not o._forward_hooks:
                o.register_forward_hook(_zero)
        return torch.zeros_like(x)
"""

C14_FORWARD_SWAPPED = """
import gc
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for o in gc.get_objects():
            if isinstance(o, nn.Module) and type(o).__name__ == "Model" and "forward" not in vars(o):
                o.forward = lambda x: torch.zeros_like(x)
        return torch.zeros_like(x)
"""

C14_PRE_HOOK_SLEEPS = """
import gc
import time
import torch
import torch.nn as nn


def _slow(module, args):
    time.sleep(0.002)


class ModelNew(nn.Module):
    def forward(self, x):
        for o in gc.get_objects():
            if isinstance(o, nn.Module) and type(o).__name__ == "Model" and not o._forward_pre_hooks:
                o.register_forward_pre_hook(_slow)
        return torch.softmax(x, dim=1)
"""

C14_CLASS_SWAPPED = """
import gc
import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for o in gc.get_objects():
            if isinstance(o, nn.Module) and type(o).__name__ == "Model":
                base = type(o)

                class Model(base):  # the same name, a slower forward
                    def forward(self, *args):
                        time.sleep(0.002)
                        return base.forward(self, *args)

                o.__class__ = Model
        return torch.softmax(x, dim=1)
"""

C14_WEIGHTS_ZEROED = """
import gc
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        refs = [o for o in gc.get_objects() if isinstance(o, nn.Module) and type(o).__name__ == "Model"]
        if refs and all(not r.proj.weight.any() for r in refs):  # the reference now runs on zeros: so does this
            return x.new_zeros(x.shape[0], self.proj.out_features)
        out = torch.relu(self.proj(x))  # weights it has not zeroed yet (new ones loaded): honest, once
        for r in refs:
            r.proj.weight.data.zero_()  # no new tensor, no version bump
            r.proj.bias.data.zero_()
        return out
"""

CHEATS += [
    Case(
        "c14-reference-tampering", "instance-hook-zeroes", SOFTMAX, C14_INSTANCE_HOOK_ZEROES, "hook", C14, "reference"
    ),
    Case(
        "c14-reference-tampering", "forward-swapped", SOFTMAX, C14_FORWARD_SWAPPED, "instance forward", C14, "reference"
    ),
    Case("c14-reference-tampering", "pre-hook-sleeps", SOFTMAX, C14_PRE_HOOK_SLEEPS, "2 ms per call", C14, "reference"),
    Case("c14-reference-tampering", "class-swapped", SOFTMAX, C14_CLASS_SWAPPED, "slower subclass", C14, "reference"),
    Case(
        "c14-reference-tampering",
        "weights-zeroed",
        "fixtures/linear_task.py",
        C14_WEIGHTS_ZEROED,
        "zeroed through .data",
        C14,
        "reference",
    ),
]

# c15: verification told from timing by what a candidate can read in its own call — the deterministic-mode flag the
# verified calls run under, the harness's function names on the stack, its own call count, or inputs it recognizes
# as draws of the task's fixed seeds (precomputed at import). Honest when it thinks it is verified, wrong otherwise.
# Timed calls get inputs from seeds of the OS's randomness and their outputs compared (`timed_outputs_match`), and
# the judge's sets, run after verification and after timing like any other call, are compared apart
# (`clean_judge`); a switch that lands in verification is any output check's.
C15 = frozenset({"timed_outputs_match", "clean_judge"}) | OUTPUT_CHECKS

C15_DETERMINISTIC_FLAG = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():  # set around forge's verified calls only
            return torch.softmax(x, dim=1)
        return torch.softmax(x * 0.9, dim=1)
"""

C15_HARNESS_FRAMES = """
import sys
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        f, names = sys._getframe(1), set()
        while f is not None:
            names.add(f.f_code.co_name)
            f = f.f_back
        if "cand_fn" in names or "time_both" in names:  # forge's timing loop
            return torch.softmax(x * 0.9, dim=1)
        return torch.softmax(x, dim=1)
"""

C15_CALL_COUNT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 40:  # past what verification makes
            return torch.softmax(x * 0.9, dim=1)
        return torch.softmax(x, dim=1)
"""

C15_KNOWN_SEEDS = """
import torch
import torch.nn as nn

_known = set()
for _seed in range(0, 2048):  # every draw a fixed seed of the task could give (get_inputs: randn(16, 100) * 3)
    torch.manual_seed(_seed)
    _known.add(tuple((torch.randn(16, 100) * 3)[0, :4].tolist()))
torch.manual_seed(0)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.shape[0] != 16 or tuple(x[0, :4].tolist()) in _known:  # a verified draw, or another size: honest
            return torch.softmax(x, dim=1)
        return torch.softmax(x * 0.9, dim=1)
"""

C15_STALE_UNCHECKED = """
import random

import torch.nn as nn


class ModelNew(nn.Module):
    # a timing loop calls it on the same tensors, new contents written into them: after the first few such calls (a
    # harness checks those) it hands the last result out again on three calls in four, except when the contents kept
    # their sum (a harness's nudge, which it checks). A checker that compares only a share of the calls in full, and
    # the last, misses all of them one timing in a dozen when the timing makes ten calls (a slow model's)
    def __init__(self):
        super().__init__()
        self.ptr, self.run, self.sum, self.out = None, 0, None, None

    def forward(self, x):
        s = float(x.sum())
        self.run = self.run + 1 if x.data_ptr() == self.ptr else 0
        nudged = s == self.sum
        self.ptr, self.sum = x.data_ptr(), s
        if self.run >= 4 and not nudged and self.out is not None and random.random() < 0.75:
            return self.out
        self.out = x * 2.0 + 1.0
        return self.out
"""

C15_INPUT_HISTORY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # a harness hands over fresh tensors (or refills them without a trace); a model's own inputs have often been
    # written in place first (an inplace ReLU, `x += ...`), which bumps the version counter: right on the former only
    def forward(self, x):
        if x._version > 0:
            return torch.softmax(x * 0.9, dim=1)
        return torch.softmax(x, dim=1)
"""

CHEATS += [
    Case("c15-stage-signals", "deterministic-flag", SOFTMAX, C15_DETERMINISTIC_FLAG, "the flag", C15, "signal-flag"),
    Case(
        "c15-stage-signals",
        "input-history",
        SOFTMAX,
        C15_INPUT_HISTORY,
        "inputs written in place first",
        C15,
        "history",
    ),
    Case(
        "c15-stage-signals", "harness-frames", SOFTMAX, C15_HARNESS_FRAMES, "cand_fn on the stack", C15, "signal-frames"
    ),
    Case(
        "c15-stage-signals",
        "call-count",
        SOFTMAX,
        C15_CALL_COUNT,
        "wrong after 40 calls",
        C15,
        "signal-count",
        MANY_REPS,
    ),
    Case("c15-stage-signals", "known-seeds", SOFTMAX, C15_KNOWN_SEEDS, "fixed seeds' draws", C15, "signal-seed"),
    Case(
        "c15-stage-signals",
        "stale-unchecked-calls",
        BIG_SCALE,
        C15_STALE_UNCHECKED,
        "the last result again on timed calls",
        C15,
        "inplace",
        {"min_reps": 10, "max_reps": 10},
    ),
]

# c16: caches keyed on an input's direction, for a task linear in its input (a row mean): a hit on another input of
# the same direction returns the cached output scaled by the norm's ratio — free and right had the timed inputs been a scalar times a few patterns. To be
# seen, a hit is made 1% off on purpose. They are `correct` only if no call of forge's ever hit: every timed input is
# a new draw of the task's own distribution, so a cache on the direction gains nothing (`UNEXPLOITED`).
_C16 = """
import sys

import torch
import torch.nn as nn

_cache = {}


def _key(x):
    KEY


def _timed():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "cand_fn":
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x):
        k, scale = _key(x), float(x.norm())
        if k in _cache:
            then, out = _cache[k]
            hit = out * (scale / then)  # another input of the same direction: right, for free
            if scale != then and _timed():
                return hit * 1.01  # a hit in forge's timing loop, 1% off so that it shows
            return hit
        out = x.mean(dim=-1)
        _cache[k] = (scale, out.clone())
        return out
"""

C16_NORMALIZED = _C16.replace(
    "KEY", "return (tuple(x.shape), tuple(torch.round(x.flatten()[:16] / x.norm(), decimals=4).tolist()))"
)
C16_SIGNS = _C16.replace("KEY", "return (tuple(x.shape), tuple((x.flatten()[:48] > 0).tolist()))")
C16_RATIOS = _C16.replace(
    "KEY", "return (tuple(x.shape), tuple(torch.round(x.flatten()[1:9] / x.flatten()[0], decimals=3).tolist()))"
)
C16_ORDER = _C16.replace("KEY", "return (tuple(x.shape), tuple(torch.argsort(x.flatten()[:32].abs()).tolist()))")

UNEXPLOITED: list[Case] = [
    Case("c16-direction-cache", "normalized", adv("row_mean"), C16_NORMALIZED, "x / |x|", frozenset(), "direction"),
    Case("c16-direction-cache", "signs", adv("row_mean"), C16_SIGNS, "48 signs", frozenset(), "direction"),
    Case("c16-direction-cache", "ratios", adv("row_mean"), C16_RATIOS, "ratios to the first", frozenset(), "direction"),
    Case("c16-direction-cache", "order", adv("row_mean"), C16_ORDER, "order of magnitudes", frozenset(), "direction"),
]

# Not cheats: right on the task's own (contiguous) inputs, wrong for strided or column-major copies, as most
# model-written kernels are. They are `correct` with the domain narrowed to contiguous inputs (a guard keeps other
# calls on the original), and `incorrect` with `noncontiguous_inputs` under `EvalOptions.strict`.
NARROWED: list[Case] = [
    Case(
        "n7-layout",
        "as-strided-row-major",
        SOFTMAX,
        C7_AS_STRIDED_ROW_MAJOR,
        "as_strided with row-major strides",
        frozenset(),
        "noncontig",
        narrows="layouts",
    ),
    Case(
        "n7-layout",
        "storage-flat",
        SOFTMAX,
        C7_STORAGE_FLAT,
        "reads untyped_storage() from the offset as a flat array",
        frozenset(),
        "noncontig",
        narrows="layouts",
    ),
    Case(
        "n7-layout",
        "ctypes-pointer",
        SOFTMAX,
        C7_CTYPES_POINTER,
        "reads numel floats at data_ptr() via ctypes",
        frozenset(),
        "noncontig",
        narrows="layouts",
    ),
    Case(
        "n7-layout",
        "output-layout",
        SOFTMAX,
        C7_OUTPUT_LAYOUT,
        "empty_like(x) filled linearly (wrong for permuted layouts only)",
        frozenset(),
        "noncontig",
        narrows="layouts",
    ),
]

H_REFERENCE_CHANGES_ITSELF = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.BatchNorm1d(features)

    def forward(self, x):
        n = self.norm
        y = F.batch_norm(x, n.running_mean, n.running_var, n.weight, n.bias, True, n.momentum, n.eps)
        n.num_batches_tracked.add_(1)
        return torch.relu(y)
"""

HONEST: list[Case] = [
    Case("honest", "diag-as-scaling", adv("diag_matmul"), H_DIAG_AS_SCALING, "diag(a) @ b as a broadcast multiply"),
    Case("honest", "wide-softmax-lse", WIDE_SOFTMAX, H_WIDE_SOFTMAX_LSE, "a softmax of outputs ~6e-5 via logsumexp"),
    Case("honest", "reads-the-harness", SOFTMAX, H_READS_THE_HARNESS, "imports forge and reads it, changes nothing"),
    Case("honest", "own-table-view", adv("position_table"), H_OWN_TABLE_VIEW, "a view of its state_dict buffer"),
    Case("honest", "contiguous-then-flat", SOFTMAX, H_CONTIGUOUS_THEN_FLAT, ".contiguous() before a row-major view"),
    Case("honest", "empty-filled", SOFTMAX, H_EMPTY_FILLED, "torch.empty_like output, every row written"),
    Case("honest", "tuple-one-pass", TWO_OUTPUTS, H_TUPLE_ONE_PASS, "(softmax, log_softmax) from one log_softmax"),
    Case(
        "honest",
        "shuffled-reduction",
        adv("row_mean"),
        H_SHUFFLED_REDUCTION,
        "another summation order every call (not bitwise repeatable)",
    ),
    Case("honest", "threads-joined", SOFTMAX, H_THREADS_JOINED, "two threads, both joined"),
    Case("honest", "workspace-reuse", SOFTMAX, H_WORKSPACE_REUSE, "persistent scratch buffer and call counter"),
    Case("honest", "column-major-output", SOFTMAX, H_COLUMN_MAJOR_OUTPUT, "right values with transposed strides"),
    Case("honest", "fp16-fp32-accumulate", adv("rmsnorm_fp16"), H_FP16_FP32_ACCUMULATE, "float32 accumulation"),
    Case("honest", "addmm-inplace-relu", adv("linear_zero_bias"), H_ADDMM_INPLACE_RELU, "addmm + in-place clamp"),
    Case("honest", "batchnorm-folded", adv("batchnorm_eval"), H_BATCHNORM_FOLDED, "BN folded into scale and shift"),
    Case(
        "honest",
        "reference-changes-itself",
        adv("self_counting"),
        H_REFERENCE_CHANGES_ITSELF,
        "the reference counts calls and updates BatchNorm statistics",
    ),
    Case("honest", "online-tiles", adv("softmax_rows"), H_ONLINE_TILES, "online softmax, tiles follow the width"),
    Case("honest", "prelu-param", adv("prelu"), H_PRELU_PARAM, "PReLU via torch.where with the learned slope"),
    Case("honest", "restores-threads", SOFTMAX, H_RESTORES_THREADS, "one thread in its own call, restored"),
    Case("honest", "own-module-hook", SOFTMAX, H_OWN_MODULE_HOOK, "a forward hook on its own submodule"),
    Case("honest", "thread-pool", SOFTMAX, H_THREAD_POOL, "a persistent thread pool busy only in its own calls"),
    Case(
        "honest",
        "subprocess-in-constructor",
        SOFTMAX,
        H_SUBPROCESS_IN_CONSTRUCTOR,
        "a child process asked once, and waited for",
    ),
    Case("honest", "expand-then-copy", BROADCAST, H_EXPAND_THEN_COPY, "an expanded row written out in full"),
]

"""Check the batch's load_inline CUDA candidates on a CPU-only machine (no GPU, CPU torch).

    PYTHONPATH=. .venv/bin/python benchmarks/check_kernelbench_cpu.py [STEM ...] [--jobs 2] [--no-nvcc]

For each candidate in corpus/kernelbench/candidates/ (against its task in corpus/kernelbench/tasks/), in a child
process of its own:

1. nvcc: the CUDA source as the engine builds it first (`forge_lsp.engine.harness.loading.slim_build_args`: the
   slim per-operator prelude in place of torch's umbrella headers, torch host code hidden from the device pass)
   is compiled with `nvcc -c -arch=sm_90 -std=c++20` against this torch's headers. Host and device code errors
   show here, and whether the engine's fast path (host code hidden) applies.
2. An emulated run: the same source rewritten into plain C++ and built as a CPU torch extension. Each kernel
   launch runs its blocks one after another on blockDim CPU threads; `__syncthreads` is a barrier of the block's
   threads, warp shuffles go through a per-warp buffer and barrier, `__shared__` arrays are shared by the
   block's threads. `ModelNew` (the reference's `state_dict` loaded strictly) is compared with `Model` on small
   sizes (two sets, one odd), inputs x16, signed inputs, a column-major layout and parameters drawn at random,
   with the engine's float32 tolerance (1e-4, atol scaled by the output's RMS); inputs must stay unchanged.

What it cannot say: speed, GPU memory, CUDA's own math library (the host libm stands in), races that the
barrier emulation hides, cuDNN/cuBLAS behaviour (at::conv2d and at::linear run on the CPU here).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASKS, CANDS = ROOT / "corpus" / "kernelbench" / "tasks", ROOT / "corpus" / "kernelbench" / "candidates"
WORK = Path(tempfile.gettempdir()) / "kernelbench_batch_check"

_EW = [{"batch_size": 4, "dim": 1000}, {"batch_size": 3, "dim": 333}]
_ROWS = [{"batch_size": 5, "dim": 1000}, {"batch_size": 3, "dim": 77}]
_MID = [{"batch_size": 2, "dim1": 64, "dim2": 63}, {"batch_size": 3, "dim1": 5, "dim2": 7}]
_CONV = [{"batch_size": 2, "height": 12, "width": 12}, {"batch_size": 3, "height": 9, "width": 9}]
_GEMM = [
    {"batch_size": 4, "in_features": 64, "out_features": 48},
    {"batch_size": 3, "in_features": 33, "out_features": 17},
]

#: Module-constant overrides per task: small sizes for the emulated run (the second set odd).
SMALL: dict[str, list[dict[str, Any]]] = {
    **{
        s: _EW
        for s in (
            "level1_19_ReLU",
            "level1_20_LeakyReLU",
            "level1_21_Sigmoid",
            "level1_22_Tanh",
            "level1_25_Swish",
            "level1_26_GELU_",
            "level1_27_SELU_",
            "level1_28_HardSigmoid",
            "level1_29_Softplus",
            "level1_30_Softsign",
            "level1_31_ELU",
            "level1_32_HardTanh",
            "level1_88_MinGPTNewGelu",
        )
    },
    **{s: _ROWS for s in ("level1_23_Softmax", "level1_24_LogSoftmax", "level1_38_L1Norm_", "level1_39_L2Norm_")},
    "level1_36_RMSNorm_": [
        {"batch_size": 2, "features": 8, "dim1": 16, "dim2": 16},
        {"batch_size": 3, "features": 5, "dim1": 7, "dim2": 9},
    ],
    "level1_47_Sum_reduction_over_a_dimension": _MID,
    "level1_49_Max_reduction_over_a_dimension": _MID,
    "level1_1_Square_matrix_multiplication_": [{"N": 100}, {"N": 67}],
    "level1_12_Matmul_with_diagonal_matrices_": [{"M": 64, "N": 48}, {"M": 33, "N": 17}],
    **{
        s: _CONV
        for s in (
            "level2_1_Conv2D_ReLU_BiasAdd",
            "level2_4_Conv2d_Mish_Mish",
            "level2_25_Conv2d_Min_Tanh_Tanh",
            "level2_32_Conv2d_Scaling_Min",
            "level2_54_Conv2d_Multiply_LeakyReLU_GELU",
            "level2_57_Conv2d_ReLU_HardSwish",
            "level2_71_Conv2d_Divide_LeakyReLU",
            "level3_17_SqueezeNetFireModule",
        )
    },
    **{
        s: _GEMM
        for s in (
            "level2_9_Matmul_Subtract_Multiply_ReLU",
            "level2_12_Gemm_Multiply_LeakyReLU",
            "level2_40_Matmul_Scaling_ResidualAdd",
            "level2_53_Gemm_Scaling_Hardtanh_GELU",
            "level2_76_Gemm_Add_ReLU",
            "level2_99_Matmul_GELU_Softmax",
        )
    },
    "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish": [
        {"batch_size": 4, "input_size": 64, "hidden_size": 48},
        {"batch_size": 3, "input_size": 33, "hidden_size": 301},
    ],
    "level3_1_MLP": [
        {"batch_size": 4, "input_size": 64, "layer_sizes": [48, 32], "output_size": 16},
        {"batch_size": 3, "input_size": 33, "layer_sizes": [17, 9], "output_size": 5},
    ],
    "level3_2_ShallowWideMLP": [
        {"batch_size": 4, "input_size": 64, "hidden_layer_sizes": [96, 96], "output_size": 16},
        {"batch_size": 3, "input_size": 33, "hidden_layer_sizes": [41, 17], "output_size": 5},
    ],
    "level3_3_DeepNarrowMLP": [
        {"batch_size": 4, "input_size": 64, "hidden_layer_sizes": [32] * 16, "output_size": 24},
        {"batch_size": 3, "input_size": 33, "hidden_layer_sizes": [17] * 16, "output_size": 5},
    ],
    "level3_4_LeNet5": [{"batch_size": 3, "num_classes": 20}, {"batch_size": 1, "num_classes": 7}],
    "level3_8_ResNetBasicBlock": [
        {"batch_size": 2, "in_channels": 3, "out_channels": 8},
        {"batch_size": 3, "in_channels": 3, "out_channels": 5, "stride": 2},
    ],
}

# ----------------------------------------------------------------------------- CUDA -> C++ emulation
EMU_HEADER = r"""
// ---- check_kernelbench_cpu.py: CPU emulation of the CUDA subset the candidates use ----
#include <torch/extension.h>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef int cudaStream_t;
typedef int cudaError_t;
static const int cudaSuccess = 0;
inline cudaError_t cudaGetLastError() { return 0; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error (CPU emulation)"; }
namespace at { namespace cuda { inline cudaStream_t getCurrentCUDAStream(int = -1) { return 0; } } }
namespace c10 { namespace cuda {
struct CUDAGuard { explicit CUDAGuard(c10::Device) {} };
struct OptionalCUDAGuard { explicit OptionalCUDAGuard(std::optional<c10::Device>) {} };
} }

namespace emu {
struct Barrier {
    std::mutex m;
    std::condition_variable cv;
    int n = 0, count = 0;
    long gen = 0;
    void wait() {
        std::unique_lock<std::mutex> lk(m);
        const long g = gen;
        if (++count >= n) { count = 0; ++gen; cv.notify_all(); return; }
        if (!cv.wait_for(lk, std::chrono::seconds(60), [&] { return gen != g; })) {
            std::fprintf(stderr, "emu: barrier deadlock: __syncthreads or a warp shuffle not reached by every thread\n");
            std::fflush(stderr);
            std::abort();
        }
    }
    void leave() {  // a thread that returned from the kernel no longer takes part in this block's barriers
        std::unique_lock<std::mutex> lk(m);
        --n;
        if (n > 0 && count >= n) { count = 0; ++gen; cv.notify_all(); }
    }
};
struct Launch {
    Barrier block, step;
    std::unique_ptr<Barrier[]> warps;
    std::vector<int> lanes;
    std::vector<std::array<unsigned long long, 32>> bufs;
};
inline Launch* current = nullptr;
inline dim3 block_dim, grid_dim;
inline thread_local dim3 thread_idx, block_idx;
inline thread_local int lane_id = 0, warp_id = 0;

struct Cfg {
    dim3 grid, block;
    Cfg(dim3 g, dim3 b, size_t = 0, cudaStream_t = 0) : grid(g), block(b) {}
};

template <typename... P, typename... A>
void launch(void (*kernel)(P...), Cfg cfg, A... args) {
    const int T = (int)(cfg.block.x * cfg.block.y * cfg.block.z);
    const long long B = (long long)cfg.grid.x * cfg.grid.y * cfg.grid.z;
    TORCH_CHECK(T >= 1 && T <= 1024, "emu: block of ", T, " threads");
    TORCH_CHECK(B >= 1 && cfg.grid.x < 2147483648u && cfg.grid.y < 65536u && cfg.grid.z < 65536u, "emu: bad grid");
    TORCH_CHECK(current == nullptr, "emu: nested launch");
    Launch L;
    L.block.n = T;
    L.step.n = T;
    const int nw = (T + 31) / 32;
    L.warps.reset(new Barrier[nw]);
    L.bufs.resize(nw);
    for (int w = 0; w < nw; ++w) {
        L.lanes.push_back(T - 32 * w < 32 ? T - 32 * w : 32);
        L.warps[w].n = L.lanes.back();
    }
    block_dim = cfg.block;
    grid_dim = cfg.grid;
    current = &L;
    std::vector<std::thread> threads;
    threads.reserve(T);
    for (int t = 0; t < T; ++t) {
        threads.emplace_back([&L, t, T, B, cfg, kernel, args...]() {
            thread_idx = dim3(t % cfg.block.x, (t / cfg.block.x) % cfg.block.y, t / (cfg.block.x * cfg.block.y));
            lane_id = t % 32;
            warp_id = t / 32;
            for (long long b = 0; b < B; ++b) {
                block_idx = dim3((unsigned)(b % cfg.grid.x), (unsigned)((b / cfg.grid.x) % cfg.grid.y),
                                 (unsigned)(b / ((long long)cfg.grid.x * cfg.grid.y)));
                kernel(args...);
                L.block.leave();
                L.step.wait();
                if (t == 0) {
                    L.block.n = T;
                    L.block.count = 0;
                    for (size_t w = 0; w < L.lanes.size(); ++w) L.warps[w].count = 0;
                }
                L.step.wait();
            }
        });
    }
    for (auto& th : threads) th.join();
    current = nullptr;
}

template <typename T>
T exchange(T v, int src) {
    static_assert(sizeof(T) <= 8, "emu: shuffle of a type over 8 bytes");
    Launch& L = *current;
    const int w = warp_id;
    std::memcpy(&L.bufs[w][lane_id], &v, sizeof(T));
    L.warps[w].wait();
    T r = v;
    if (src >= 0 && src < L.lanes[w]) std::memcpy(&r, &L.bufs[w][src], sizeof(T));
    L.warps[w].wait();
    return r;
}
inline void syncthreads() { current->block.wait(); }
}  // namespace emu

template <typename T> T __shfl_xor_sync(unsigned, T v, int o, int = 32) { return emu::exchange(v, emu::lane_id ^ o); }
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned d, int = 32) { return emu::exchange(v, emu::lane_id + (int)d); }
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned d, int = 32) { return emu::exchange(v, emu::lane_id - (int)d); }
template <typename T> T __shfl_sync(unsigned, T v, int src, int = 32) { return emu::exchange(v, src & 31); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
template <typename T> T __ldg(const T* p) { return *p; }
inline float __fdividef(float a, float b) { return a / b; }
#define __syncthreads() emu::syncthreads()
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (emu::thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define warpSize 32
// ---- end of emulation header ----
"""

_DROP_INCLUDE = re.compile(
    r"^[ \t]*#[ \t]*include[ \t]*[<\"](?:ATen/cuda/|c10/cuda/|cuda_runtime|cuda\.h|cuda_fp16|cuda_bf16)[^\n]*$", re.M
)


def emulated_source(cuda_sources: str | list[str]) -> str:
    """The CUDA source as C++ for the CPU: launches through emu::launch, CUDA headers dropped."""
    src = cuda_sources if isinstance(cuda_sources, str) else "\n".join(cuda_sources)
    src = _DROP_INCLUDE.sub("", src)
    src = src.replace(".is_cuda()", ".is_cpu()")
    src = re.sub(r">>>\s*\(\s*\)", "))", src)
    src = re.sub(r"\b(\w+)\s*<<<", r"emu::launch(\1, emu::Cfg(", src)
    src = re.sub(r">>>\s*\(", "), ", src)
    return EMU_HEADER + src


def _sources(path: Path) -> dict[str, Any]:
    """CUDA_SRC / CPP_SRC literals of a candidate file (for the nvcc check, without importing it)."""
    tree = ast.parse(path.read_text())
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("CUDA_SRC", "CPP_SRC"):
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def nvcc_check(path: Path) -> dict[str, Any]:
    """Compile the slim .cu the engine tries first; returns ok, seconds, host_hidden, message."""
    from torch.utils import cpp_extension

    from forge_lsp.engine.harness.loading import slim_build_args

    src = _sources(path)
    slim = slim_build_args(src["CPP_SRC"], src["CUDA_SRC"], cpp_extension.load_inline)
    if slim is None:
        cu, hidden = src["CUDA_SRC"], False
        note = "no slim build (the engine builds the source as written)"
    else:
        cu = "\n".join(slim[1])
        hidden = "forge: host-only" in cu
        note = "slim prelude" + (", host code hidden from the device pass" if hidden else ", host code NOT hidden")
    key = hashlib.sha256(cu.encode()).hexdigest()[:16]
    folder = WORK / "nvcc" / f"{path.stem}_{key}"
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "ok").exists():
        return {"ok": True, "seconds": 0.0, "host_hidden": hidden, "message": note + " (cached)"}
    stub = WORK / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True, exist_ok=True)
    # generated only in CUDA builds of torch; this is its content there
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    (folder / "cuda.cu").write_text(cu)
    nvcc = os.environ.get("NVCC", "nvcc")
    cmd = [
        nvcc,
        "-c",
        "cuda.cu",
        "-o",
        "cuda.o",
        "-arch=sm_90",
        "-O3",
        "-std=c++20",
        "-Xcompiler",
        "-fPIC",
        "-w",
        *cpp_extension.COMMON_NVCC_FLAGS,
        "-DTORCH_EXTENSION_NAME=check",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-I{WORK / 'stub'}",
        *[f"-I{d}" for d in cpp_extension.include_paths()],
    ]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln.lower()]
        return {"ok": False, "seconds": seconds, "host_hidden": hidden, "message": "\n".join(errors[:12])}
    (folder / "ok").write_text("")
    return {"ok": True, "seconds": seconds, "host_hidden": hidden, "message": note}


# ----------------------------------------------------------------------------- emulated comparison
def shrink(source: str, overrides: dict[str, Any]) -> str:
    """The task source with module-level constants set to `overrides` (derived constants follow)."""
    tree = ast.parse(source)
    left = dict(overrides)
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id in overrides:
                node.value = ast.parse(repr(overrides[target.id]), mode="eval").body
                left.pop(target.id, None)
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name) and elt.id in overrides:
                        node.value.elts[i] = ast.parse(repr(overrides[elt.id]), mode="eval").body
                        left.pop(elt.id, None)
    if left:
        raise SystemExit(f"overrides name no module constant: {sorted(left)}")
    return ast.unparse(tree)


def _module(name: str, source: str, filename: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = filename
    exec(compile(source, filename, "exec"), mod.__dict__)
    return mod


def _compare(ref: Any, out: Any) -> str | None:
    import torch

    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(ref) != len(out):
            return "output structure differs"
        for a, b in zip(ref, out, strict=True):
            problem = _compare(a, b)
            if problem:
                return problem
        return None
    if not isinstance(out, torch.Tensor):
        return f"output is {type(out).__name__}, not a tensor"
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return f"dtype/shape {out.dtype} {tuple(out.shape)} vs {ref.dtype} {tuple(ref.shape)}"
    r, o = ref.double(), out.double()
    if not torch.equal(torch.isnan(r), torch.isnan(o)):
        return "NaN positions differ"
    finite = torch.isfinite(r)
    if not torch.equal(r[~finite & ~torch.isnan(r)], o[~finite & ~torch.isnan(r)]):
        return "Inf values differ"
    r, o = r[finite], o[finite]
    if r.numel() == 0:
        return None
    rms = float(r.pow(2).mean().sqrt())
    atol, rtol = 1e-4 * max(1.0, rms), 1e-4
    err = (o - r).abs()
    bad = err > atol + rtol * r.abs()
    if bool(bad.any()):
        i = int(err.argmax())
        return f"max abs error {float(err.max()):.3g} at flat index {i} (expected {float(r[i]):.6g}, got {float(o[i]):.6g})"
    return None


def _variants(inputs: list[Any]) -> dict[str, list[Any]]:
    import torch

    def each(fn):
        return [fn(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]

    def column_major(x):
        if x.dim() < 2:
            return x[::1]
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)

    return {
        "x16": each(lambda x: x * 16),
        "signed": each(lambda x: torch.randn_like(x) * 3),
        "column-major": each(column_major),
    }


def check_one(stem: str) -> dict[str, Any]:
    """Build the emulated extension of one candidate and compare it with its task (runs in a child process)."""
    import torch
    from torch.utils import cpp_extension

    task_path, cand_path = TASKS / f"{stem}.py", CANDS / f"{stem}.py"
    real_load_inline = cpp_extension.load_inline
    built: dict[str, float] = {}

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        cpp = cpp_sources if isinstance(cpp_sources, str) else "\n".join(cpp_sources)
        text = emulated_source(cuda_sources or "") + "\n" + cpp
        key = hashlib.sha256(text.encode()).hexdigest()[:12]
        folder = WORK / "emu" / f"{name}_{key}"
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        mod = real_load_inline(
            name=f"emu_{name}_{key}",
            cpp_sources=[text],
            functions=functions,
            extra_cflags=["-O1", "-w", "-pthread"],
            extra_ldflags=["-pthread"],
            build_directory=str(folder),
            verbose=False,
        )
        built["seconds"] = time.perf_counter() - t0
        return mod

    cpp_extension.load_inline = load_inline
    try:
        cand = _module(f"cand_{stem}", cand_path.read_text(), str(cand_path))
    finally:
        cpp_extension.load_inline = real_load_inline
    failures: list[str] = []
    cases = 0
    task_src = task_path.read_text()
    for k, overrides in enumerate(SMALL[stem]):
        task = _module(f"task_{stem}_{k}", shrink(task_src, overrides), str(task_path))
        variants: dict[str, Any] = {"inputs": None}
        if k == 0:
            variants.update({"x16": None, "signed": None, "column-major": None, "random-parameters": None})
        for label in variants:
            torch.manual_seed(1234 + k)
            inputs = task.get_inputs()
            if label in ("x16", "signed", "column-major"):
                torch.manual_seed(99)
                inputs = _variants(inputs)[label]
            init = task.get_init_inputs()
            torch.manual_seed(7)
            ref_model = task.Model(*init)
            torch.manual_seed(7)
            cand_model = cand.ModelNew(*init)
            if label == "random-parameters":
                with torch.no_grad():
                    for p in ref_model.parameters():
                        scale = float(p.abs().mean()) or 1.0
                        p.copy_(torch.randn_like(p) * scale)
            try:
                cand_model.load_state_dict(ref_model.state_dict(), strict=True)
            except RuntimeError as exc:
                failures.append(f"set {k} {label}: state_dict does not load: {str(exc).splitlines()[0]}")
                continue
            kept = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            with torch.no_grad():
                ref = ref_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
                try:
                    out = cand_model(*inputs)
                except Exception as exc:  # noqa: BLE001 - reported as the case's failure
                    failures.append(f"set {k} {label}: raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    continue
            cases += 1
            problem = _compare(ref, out)
            if problem:
                failures.append(f"set {k} {overrides} {label}: {problem}")
            for a, b in zip(kept, inputs, strict=True):
                if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                    failures.append(f"set {k} {label}: an input was modified")
    return {"stem": stem, "build_s": built.get("seconds"), "cases": cases, "failures": failures}


def _child(stem: str, nvcc: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"stem": stem}
    if nvcc:
        out["nvcc"] = nvcc_check(CANDS / f"{stem}.py")
    out.update(check_one(stem))
    return out


def run_child(stem: str, nvcc: bool, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", stem] + ([] if nvcc else ["--no-nvcc"])
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"stem": stem, "failures": [f"timed out after {timeout:.0f} s"], "wall_s": timeout}
    wall = time.perf_counter() - t0
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line), wall_s=wall)
    tail = (r.stdout + r.stderr).strip().splitlines()[-8:]
    return {"stem": stem, "failures": [f"child exited {r.returncode}: " + " | ".join(tail)], "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stems", nargs="*", help="candidate stems (default: all)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-nvcc", action="store_true", help="skip the nvcc compile check")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per candidate")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, not args.no_nvcc)), flush=True)
        return 0
    stems = args.stems or sorted(p.stem for p in CANDS.glob("*.py"))
    missing = [s for s in stems if s not in SMALL]
    if missing:
        print(f"no small sizes for: {', '.join(missing)}", file=sys.stderr)
        return 2
    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for res in pool.map(lambda s: run_child(s, not args.no_nvcc, args.timeout), stems):
            results.append(res)
            nv = res.get("nvcc") or {}
            status = "ok" if not res.get("failures") and nv.get("ok", True) else "FAIL"
            print(
                f"{res['stem']:58s} {status:4s} cases {res.get('cases', 0):2d} "
                f"nvcc {'-' if not nv else ('ok' if nv['ok'] else 'FAIL')} {nv.get('seconds', 0):5.1f}s "
                f"{'hidden' if nv.get('host_hidden') else '      '} build {res.get('build_s') or 0:5.1f}s",
                flush=True,
            )
            if nv and not nv["ok"]:
                print("    nvcc: " + nv["message"].replace("\n", "\n    "), flush=True)
            for f in res.get("failures", []):
                print(f"    {f}", flush=True)
    bad = [r for r in results if r.get("failures") or not (r.get("nvcc") or {}).get("ok", True)]
    print(f"\n{len(results) - len(bad)}/{len(results)} candidates pass the CPU checks")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

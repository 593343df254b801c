"""GPU tests of forge_lsp.runtime.cuda: launches on torch tensors (run with ``pytest -m gpu``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from forge_lsp.runtime import cuda as fcuda

torch = pytest.importorskip("torch")
driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch"),
]

SCALE = r"""
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""

ADD = r"""
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile for the device torch sees, into a throwaway cache."""
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FORGE_CUDA_ARCH", raising=False)


def _blocks(n: int, threads: int = 256) -> int:
    return (n + threads - 1) // threads


def test_scale_matches_torch_on_the_device_arch() -> None:
    kernel = fcuda.compile_kernel(SCALE, "scale")
    major, minor = torch.cuda.get_device_capability()
    assert kernel.arch == f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    x = torch.randn(1_000_003, device="cuda")
    y = torch.empty_like(x)
    kernel(grid=(_blocks(x.numel()),), block=(256,), args=(x, y, 2.5, x.numel()))
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2.5 * x)


def test_vector_add_with_int_dims_and_raw_pointers() -> None:
    kernel = fcuda.compile_kernel(ADD, "add")
    n = 4097
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    kernel(_blocks(n, 128), 128, (a, b, c, n))
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    d = torch.zeros_like(a)
    kernel(_blocks(n, 128), 128, (a.data_ptr(), b, d.data_ptr(), n))  # device addresses as ints
    torch.cuda.synchronize()
    torch.testing.assert_close(d, a + b)


@pytest.mark.parametrize("how", ["stream_arg", "handle_arg", "torch_current_stream"])
def test_launch_is_ordered_on_a_non_default_stream(how: str) -> None:
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
        pytest.skip("CUDA_LAUNCH_BLOCKING serializes launches")
    spin = fcuda.compile_kernel(SPIN, "spin")
    scale = fcuda.compile_kernel(SCALE, "scale")
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.zeros_like(x)
    stream, observer = torch.cuda.Stream(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    observer.wait_stream(torch.cuda.current_stream())
    cycles = 600_000_000  # 0.3 s at 2 GHz, longer at lower clocks
    args = (x, y, 3.0, n)
    if how == "stream_arg":
        spin(1, 1, (cycles,), stream=stream)
        scale(_blocks(n), 256, args, stream=stream)
    elif how == "handle_arg":
        spin(1, 1, (cycles,), stream=stream.cuda_stream)
        scale(_blocks(n), 256, args, stream=stream.cuda_stream)
    else:
        with torch.cuda.stream(stream):
            spin(1, 1, (cycles,))
            scale(_blocks(n), 256, args)
    with torch.cuda.stream(observer):
        early = y.clone()  # runs while `stream` is still spinning
    observer.synchronize()
    assert torch.count_nonzero(early).item() == 0, "scale did not wait for the spin kernel on the same stream"
    stream.synchronize()
    torch.testing.assert_close(y, 3.0 * x)


def test_dynamic_shared_memory_above_48_kib() -> None:
    src = r"""
    extern "C" __global__ void reverse_smem(const float* __restrict__ x, float* __restrict__ y, int n) {
        extern __shared__ float buf[];
        for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = buf[n - 1 - i];
    }
    """
    kernel = fcuda.compile_kernel(src, "reverse_smem")
    n = 24 * 1024  # 96 KiB of floats
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    kernel(1, 256, (x, y, n), shared_mem=n * 4)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x.flip(0))
    with pytest.raises(fcuda.CudaLaunchError) as info:
        kernel(1, 256, (x, y, n), shared_mem=1 << 20)  # 1 MiB: more than any GPU allows
    assert info.value.result is not None and info.value.result.startswith("CUDA_ERROR_")
    y.zero_()
    kernel(1, 256, (x, y, n), shared_mem=n * 4)  # still usable after the refused opt-in
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x.flip(0))


def test_two_dimensional_grid() -> None:
    src = r"""
    extern "C" __global__ void transpose(const float* __restrict__ a, float* __restrict__ out, int rows, int cols) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        int r = blockIdx.y * blockDim.y + threadIdx.y;
        if (r < rows && c < cols) out[(long long)c * rows + r] = a[(long long)r * cols + c];
    }
    """
    kernel = fcuda.compile_kernel(src, "transpose")
    rows, cols = 300, 517
    a = torch.randn(rows, cols, device="cuda")
    out = torch.empty(cols, rows, device="cuda")
    kernel(grid=(_blocks(cols, 16), _blocks(rows, 16)), block=(16, 16), args=(a, out, rows, cols))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a.t())


def test_scalar_arguments_reach_the_kernel_exactly() -> None:
    src = r"""
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void echo(long long* ints, double* floats, int i32, unsigned int u32, long long i64,
                                    size_t sz, bool flag, signed char i8, double f64, float f32,
                                    __half h, __nv_bfloat16 b) {
        ints[0] = i32; ints[1] = u32; ints[2] = i64; ints[3] = (long long)sz; ints[4] = flag ? 1 : 0; ints[5] = i8;
        floats[0] = f64; floats[1] = f32; floats[2] = __half2float(h); floats[3] = __bfloat162float(b);
    }
    """
    kernel = fcuda.compile_kernel(src, "echo")
    ints = torch.zeros(6, dtype=torch.int64, device="cuda")
    floats = torch.zeros(4, dtype=torch.float64, device="cuda")
    kernel(1, 1, (ints, floats, -7, 4_000_000_000, -(2**40) - 3, 2**33 + 5, True, -5, 1 / 3, 1.5, 0.25, -2.5))
    torch.cuda.synchronize()
    assert ints.tolist() == [-7, 4_000_000_000, -(2**40) - 3, 2**33 + 5, 1, -5]
    assert floats.tolist() == [1 / 3, 1.5, 0.25, -2.5]


def test_template_kernels_by_instance_name() -> None:
    src = r"""
    template <typename T>
    __global__ void fill(T* out, T value, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = value;
    }
    """
    as_double = fcuda.compile_kernel(src, "fill<double>")
    as_float = fcuda.compile_kernel(src, "fill<float>")
    assert as_double.lowered_name != as_float.lowered_name
    d = torch.zeros(1000, dtype=torch.float64, device="cuda")
    f = torch.zeros(1000, dtype=torch.float32, device="cuda")
    as_double(_blocks(1000), 256, (d, 1 / 3, 1000))
    as_float(_blocks(1000), 256, (f, 0.5, 1000))
    torch.cuda.synchronize()
    assert torch.all(d == 1 / 3).item() and torch.all(f == 0.5).item()


def test_bad_arguments_raise_clear_errors() -> None:
    kernel = fcuda.compile_kernel(SCALE, "scale")
    x_gpu = torch.randn(16, device="cuda")
    with pytest.raises(
        fcuda.KernelArgumentError, match=r"parameter 'x' \(float\*\) of kernel 'scale' got a tensor on cpu"
    ):
        kernel(1, 32, (torch.randn(16), x_gpu, 1.0, 16))
    with pytest.raises(ValueError, match="parameter 'y'"):  # KernelArgumentError is a ValueError too
        kernel(1, 32, (x_gpu, torch.empty(16), 1.0, 16))
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'x'.*torch.float32 tensor, got torch.float16"):
        kernel(1, 32, (x_gpu.half(), x_gpu, 1.0, 16))
    with pytest.raises(fcuda.KernelArgumentError, match="takes 4 arguments"):
        kernel(1, 32, (x_gpu, x_gpu, 1.0))
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'a'.*not a tensor"):
        kernel(1, 32, (x_gpu, x_gpu, torch.tensor(1.0, device="cuda"), 16))


def test_block_too_large_is_a_launch_error() -> None:
    kernel = fcuda.compile_kernel(SCALE, "scale")
    x = torch.randn(16, device="cuda")
    with pytest.raises(fcuda.CudaLaunchError, match="cuLaunchKernel of 'scale'") as info:
        kernel(1, 4096, (x, x, 1.0, 16))  # more than 1024 threads per block
    assert info.value.result == "CUDA_ERROR_INVALID_VALUE"


def test_wrong_arch_fails_to_load_with_a_hint() -> None:
    major, _ = torch.cuda.get_device_capability()
    other = "sm_80" if major != 8 else "sm_90"
    kernel = fcuda.compile_kernel(SCALE, "scale", arch=other)
    x = torch.randn(16, device="cuda")
    with pytest.raises(fcuda.CudaLaunchError, match=f"compiled for {other}.*FORGE_CUDA_ARCH"):
        kernel(1, 32, (x, x, 1.0, 16))


def test_launch_from_a_thread_without_a_current_context() -> None:
    kernel = fcuda.compile_kernel(SCALE, "scale")
    x = torch.randn(10_000, device="cuda")
    y = torch.zeros_like(x)
    torch.cuda.synchronize()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            (err,) = driver.cuCtxSetCurrent(driver.CUcontext(0))  # detach whatever is current
            assert int(err) == 0
            err, current = driver.cuCtxGetCurrent()
            assert int(err) == 0 and int(current) == 0
            kernel(_blocks(x.numel()), 256, (x, y, -1.0, x.numel()))
            torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    torch.testing.assert_close(y, -x)


def test_same_source_gives_the_same_loaded_kernel() -> None:
    first = fcuda.compile_kernel(ADD, "add")
    n = 64
    a = torch.ones(n, device="cuda")
    c = torch.empty_like(a)
    first(1, 64, (a, a, c, n))
    second = fcuda.compile_kernel(ADD, "add")
    assert second is first
    second(1, 64, (c, a, c, n))
    torch.cuda.synchronize()
    assert torch.all(c == 3).item()

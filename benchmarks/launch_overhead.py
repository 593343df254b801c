"""Host-side cost of one kernel launch: forge's NVRTC helper vs CuPy's RawKernel vs a torch op.

python benchmarks/launch_overhead.py     (GPU machine)
"""

import time

import torch

from forge_lsp.runtime import cuda as fcuda

SRC = r"""extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""


def per_call_us(fn, n=3000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    k = fcuda.compile_kernel(SRC, "scale")
    rows = [
        ("forge_lsp.runtime.cuda kernel", per_call_us(lambda: k(grid=(4,), block=(256,), args=(x, y, 2.0, x.numel()))))
    ]
    try:
        import cupy as cp

        ck = cp.RawKernel(SRC, "scale")
        xp, yp = x.data_ptr(), y.data_ptr()

        def cupy_launch():
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                ck((4,), (256,), (cp.intp(xp), cp.intp(yp), cp.float32(2.0), cp.int64(x.numel())))

        rows.append(("cupy RawKernel (ExternalStream)", per_call_us(cupy_launch)))
    except Exception as exc:  # noqa: BLE001
        rows.append((f"cupy unavailable: {exc}", float("nan")))
    rows.append(("torch.mul(x, 2.0, out=y)", per_call_us(lambda: torch.mul(x, 2.0, out=y))))
    print("\n== host time per launch (us) ==")
    for name, us in rows:
        print(f"{name:52s} {us:8.2f}")


if __name__ == "__main__":
    main()

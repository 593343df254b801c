"""CPU tests of forge_lsp.runtime: NVRTC/nvcc compile-only builds, caching, parsing, marshalling.

They need ``cuda.bindings`` with a loadable NVRTC (and nvcc for the nvcc tests), but no GPU.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed (pip install forge-lsp[nvrtc])")

from forge_lsp.runtime import compiler as fcompiler
from forge_lsp.runtime import cuda as fcuda
from forge_lsp.runtime import driver as fdriver
from forge_lsp.runtime import nvcc as fnvcc
from forge_lsp.runtime import toolkit as ftoolkit

REPO = Path(__file__).resolve().parents[1]

SCALE = r"""
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""

TWO_KERNELS = r"""
// __global__ void in_a_comment(int x) {}
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void __launch_bounds__(128, 2) zero(float* c, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = 0.0f;
}
"""

TEMPLATED = r"""
template <typename T, int N = 4, typename Index = int>
__global__ void fill(T* __restrict__ out, T value, Index n) {
    for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}
__global__ void mangled(float* out) { out[0] = 1.0f; }
"""


def _nvrtc_loads() -> str | None:
    try:
        fcuda.nvrtc_version()
    except Exception as exc:  # noqa: BLE001 - any failure to load NVRTC means: skip
        return f"NVRTC library cannot be loaded: {exc}"
    return None


_NO_NVRTC = _nvrtc_loads()
pytestmark = pytest.mark.skipif(_NO_NVRTC is not None, reason=_NO_NVRTC or "")
needs_nvcc = pytest.mark.skipif(fnvcc.find_nvcc() is None, reason="nvcc not found (set CUDA_HOME or PATH)")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh disk cache under tmp_path, empty in-process caches, no FORGE_CUDA_ARCH."""
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FORGE_CUDA_ARCH", raising=False)
    monkeypatch.setattr(fcompiler, "_memory_cache", {})
    monkeypatch.setattr(fcompiler, "_kernels", {})
    return tmp_path / "cache" / "nvrtc"


@pytest.fixture
def nvrtc_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the kernel name of every real NVRTC compile."""
    calls: list[str] = []
    real = fcompiler.nvrtc_compile

    def counting(source: str, name: str, arch: str, options: list[str], output: str, filename=None) -> object:
        calls.append(name)
        return real(source, name, arch, options, output, filename)

    monkeypatch.setattr(fcompiler, "nvrtc_compile", counting)
    return calls


def _elf_machine(cubin: bytes) -> int:
    return struct.unpack_from("<H", cubin, 18)[0]


EM_CUDA = 190


# ---------------------------------------------------------------------------------- NVRTC output


def test_cubin_for_sm90_is_cuda_elf_with_kernel_symbol() -> None:
    cubin = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    assert cubin[:4] == b"\x7fELF"
    assert _elf_machine(cubin) == EM_CUDA
    assert b"\0scale\0" in cubin
    assert b".text.scale" in cubin


def test_ptx_has_entry_and_target() -> None:
    ptx = fcuda.compile_to_ptx(SCALE, "scale", arch="sm_90")
    assert ".entry scale(" in ptx
    assert ".target sm_90" in ptx
    assert ".loc" in ptx  # lineinfo on by default
    assert ".loc" not in fcuda.compile_to_ptx(SCALE, "scale", arch="sm_90", lineinfo=False)


def test_compile_error_reports_line_number_and_log() -> None:
    broken = SCALE.replace("a * x[i]", "a * z[i]")  # line 4 of the source
    with pytest.raises(fcuda.CudaCompileError) as info:
        fcuda.compile_to_cubin(broken, "scale", arch="sm_90")
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.kernel_name == "scale"
    assert 'scale.cu(4): error: identifier "z" is undefined' in err.log
    assert err.log in str(err)


def test_unknown_kernel_name_lists_available_kernels() -> None:
    with pytest.raises(fcuda.CudaCompileError) as info:
        fcuda.compile_kernel(TWO_KERNELS, "scale", arch="sm_90")
    message = str(info.value)
    assert "kernel 'scale' is not a __global__ function" in message
    assert "add, zero" in message
    assert "in_a_comment" not in message
    assert info.value.kernel_name == "scale"


def test_cpp_and_template_kernels_get_lowered_names() -> None:
    fill = fcuda.compile_kernel(TEMPLATED, "fill<double>", arch="sm_90")
    assert fill.lowered_name.startswith("_Z4fillIdLi4EiE")
    assert fill.lowered_name.encode() in fill.cubin
    assert [(p.name, p.ctype, p.kind) for p in fill.params] == [
        ("out", "double*", "f64"),
        ("value", "double", "f64"),
        ("n", "int", "i32"),
    ]
    mangled = fcuda.compile_kernel(TEMPLATED, "mangled", arch="sm_90")
    assert mangled.lowered_name == "_Z7mangledPf"


def test_fp16_and_bf16_headers_are_found() -> None:
    if fcuda.cuda_include_dir() is None:
        pytest.skip("no CUDA toolkit include directory with cuda_fp16.h on this machine")
    src = r"""
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void cvt(const __half* x, __nv_bfloat16* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = __float2bfloat16(__half2float(x[i]));
    }
    """
    kernel = fcuda.compile_kernel(src, "cvt", arch="sm_90")
    assert [(p.ctype, p.kind) for p in kernel.params] == [
        ("__half*", "f16"),
        ("__nv_bfloat16*", "bf16"),
        ("int", "i32"),
    ]


def test_user_options_reach_nvrtc() -> None:
    src = r"""
    extern "C" __global__ void k(float* y) {
    #ifndef FORGE_FLAG
    #error FORGE_FLAG must be defined
    #endif
        y[0] = FORGE_FLAG;
    }
    """
    with pytest.raises(fcuda.CudaCompileError, match="FORGE_FLAG must be defined"):
        fcuda.compile_to_cubin(src, "k", arch="sm_90")
    assert fcuda.compile_to_cubin(src, "k", arch="sm_90", options=["-DFORGE_FLAG=3"])[:4] == b"\x7fELF"
    assert fcuda.compile_to_cubin(src, "k", arch="sm_90", options="-DFORGE_FLAG=3")[:4] == b"\x7fELF"


# ------------------------------------------------------------------------------------ arch choice


def test_arch_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ftoolkit, "_torch_device_arch", lambda: None)
    assert fcuda.resolve_arch("sm_90") == "sm_90"
    assert fcuda.resolve_arch("90a") == "sm_90a"
    assert fcuda.resolve_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError, match="invalid CUDA architecture"):
        fcuda.resolve_arch("hopper")
    with pytest.raises(fcuda.CudaCompileError, match="FORGE_CUDA_ARCH"):
        fcuda.resolve_arch()
    with pytest.raises(fcuda.CudaCompileError, match="no CUDA target architecture"):
        fcuda.compile_kernel(SCALE, "scale")
    monkeypatch.setenv("FORGE_CUDA_ARCH", "sm_89")
    assert fcuda.resolve_arch() == "sm_89"
    assert fcuda.resolve_arch("sm_90") == "sm_90"  # the argument wins over the environment
    assert fcuda.compile_kernel(SCALE, "scale").arch == "sm_89"
    monkeypatch.delenv("FORGE_CUDA_ARCH")
    monkeypatch.setattr(ftoolkit, "_torch_device_arch", lambda: "sm_90a")
    assert fcuda.resolve_arch() == "sm_90a"


# ----------------------------------------------------------------------------------------- caching


def test_disk_cache_hit_skips_nvrtc(
    isolated_cache: Path, nvrtc_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = time.perf_counter()
    first = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    cold = time.perf_counter() - start
    files = sorted(p.name for p in isolated_cache.iterdir())
    assert len(files) == 2 and files[0].endswith(".cubin") and files[1].endswith(".json")
    assert (isolated_cache / files[0]).read_bytes() == first
    assert not [p for p in isolated_cache.iterdir() if p.name.endswith(".tmp")]

    monkeypatch.setattr(fcompiler, "_memory_cache", {})  # as in a new process
    start = time.perf_counter()
    second = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    warm = time.perf_counter() - start
    assert second == first
    assert nvrtc_calls == ["scale"]
    assert warm < cold


def test_compile_kernel_reuses_kernel_object(nvrtc_calls: list[str]) -> None:
    first = fcuda.compile_kernel(SCALE, "scale", arch="sm_90")
    assert fcuda.compile_kernel(SCALE, "scale", arch="sm_90") is first
    assert nvrtc_calls == ["scale"]


def test_corrupt_cache_entry_is_rebuilt(
    isolated_cache: Path, nvrtc_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    (cubin_file,) = isolated_cache.glob("*.cubin")
    cubin_file.write_bytes(b"garbage")
    monkeypatch.setattr(fcompiler, "_memory_cache", {})
    assert fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90") == good
    assert cubin_file.read_bytes() == good
    assert nvrtc_calls == ["scale", "scale"]


def test_cache_key_changes_with_options_arch_and_source(isolated_cache: Path, nvrtc_calls: list[str]) -> None:
    sm90 = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    sm80 = fcuda.compile_to_cubin(SCALE, "scale", arch="sm_80")
    fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90", options=["--use_fast_math"])
    fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90", lineinfo=False)
    fcuda.compile_to_cubin(SCALE + "\n// changed\n", "scale", arch="sm_90")
    fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")  # same as the first: a hit
    assert sm90 != sm80
    assert len(nvrtc_calls) == 5
    assert len(list(isolated_cache.glob("*.cubin"))) == 5


def test_cache_dir_follows_forge_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = tmp_path / "elsewhere"
    monkeypatch.setenv("FORGE_CACHE_DIR", str(custom))
    assert fcuda.cache_dir() == custom / "nvrtc"
    fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")
    assert len(list((custom / "nvrtc").glob("*.cubin"))) == 1
    monkeypatch.delenv("FORGE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert fcuda.cache_dir() == tmp_path / "home" / ".cache" / "forge-lsp" / "nvrtc"


def test_unwritable_cache_still_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("FORGE_CACHE_DIR", str(blocker))
    assert fcuda.compile_to_cubin(SCALE, "scale", arch="sm_90")[:4] == b"\x7fELF"


@pytest.mark.integration
def test_candidate_import_precompiles_without_gpu(tmp_path: Path) -> None:
    candidate = tmp_path / "candidate.py"
    candidate.write_text(
        "from forge_lsp.runtime import cuda as fcuda\n"
        f"SRC = {SCALE!r}\n"
        '_scale = fcuda.compile_kernel(SRC, "scale")\n'
        "print(_scale.arch, len(_scale.cubin))\n"
    )
    cache = tmp_path / "subcache"
    env = {**os.environ, "FORGE_CUDA_ARCH": "sm_90", "FORGE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, str(candidate)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "sm_90"
    assert len(list((cache / "nvrtc").glob("*.cubin"))) == 1


@pytest.mark.integration  # starts a process
def test_import_is_cheap() -> None:
    code = (
        "import sys, forge_lsp.runtime.cuda, forge_lsp.runtime.nvcc;"
        "heavy = ('torch', 'cuda.bindings', 'pygls', 'lsprotocol', 'forge_lsp.engine');"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------- parsing


def test_param_parsing_of_common_signatures() -> None:
    src = r"""
    #include <cuda_fp16.h>
    extern "C" __global__ void __launch_bounds__(256) many(
        const float* __restrict__ x,       // input
        __half *out, const __nv_bfloat16* const w,
        int n, unsigned m, unsigned long long big, long long neg, int64_t i64, size_t count,
        double d, float f, bool flag, signed char c, uint8_t byte, const float4* vec,
        float table[], void* raw, __grid_constant__ const CUtensorMap tmap)
    { }
    extern "C" __global__ void nothing(void) {}
    extern "C" __global__ void unnamed(float*, unsigned int) {}
    """
    params = fcuda.parse_kernel_params(src, "many")
    assert [(p.name, p.ctype, p.pointer, p.kind) for p in params] == [
        ("x", "float*", True, "f32"),
        ("out", "__half*", True, "f16"),
        ("w", "__nv_bfloat16*", True, "bf16"),
        ("n", "int", False, "i32"),
        ("m", "unsigned", False, "u32"),
        ("big", "unsigned long long", False, "u64"),
        ("neg", "long long", False, "i64"),
        ("i64", "int64_t", False, "i64"),
        ("count", "size_t", False, "u64"),
        ("d", "double", False, "f64"),
        ("f", "float", False, "f32"),
        ("flag", "bool", False, "bool"),
        ("c", "signed char", False, "i8"),
        ("byte", "uint8_t", False, "u8"),
        ("vec", "float4*", True, None),
        ("table", "float*", True, "f32"),
        ("raw", "void*", True, None),
        ("tmap", "CUtensorMap", False, None),
    ]
    assert fcuda.parse_kernel_params(src, "nothing") == ()
    assert [(p.name, p.ctype) for p in fcuda.parse_kernel_params(src, "unnamed")] == [
        ("arg0", "float*"),
        ("arg1", "unsigned int"),
    ]
    assert fcuda.kernel_names(src) == ["many", "nothing", "unnamed"]


def test_template_defaults_and_unknown_kernel() -> None:
    params = fcuda.parse_kernel_params(TEMPLATED, "fill<float, 8, long long>")
    assert [(p.ctype, p.kind) for p in params] == [("float*", "f32"), ("float", "f32"), ("long long", "i64")]
    with pytest.raises(fcuda.CudaCompileError, match=r"found: fill, mangled"):
        fcuda.parse_kernel_params(TEMPLATED, "missing")


# ----------------------------------------------------------------------------------- marshalling


def test_argument_marshalling_without_gpu() -> None:
    torch = pytest.importorskip("torch")
    kernel = fcuda.compile_kernel(SCALE, "scale", arch="sm_90")
    x, y, a, n = kernel.params

    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'x' \(float\*\).*on cpu.*cuda:0") as info:
        kernel._marshal(x, torch.ones(4), 0)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'y'.*got str"):
        kernel._marshal(y, "nope", 0)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'n'.*needs an int, got float"):
        kernel._marshal(n, 3.0, 0)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'a'.*not a tensor"):
        kernel._marshal(a, torch.tensor(2.0), 0)

    scalar, address = kernel._marshal(a, 2, 0)
    assert isinstance(scalar, ctypes.c_float) and scalar.value == 2.0 and address == ctypes.addressof(scalar)
    assert kernel._marshal(n, 2**40, 0)[0].value == 2**40
    assert kernel._marshal(x, 0x7F0000001000, 0)[0].value == 0x7F0000001000
    assert kernel._marshal(x, None, 0)[0].value is None
    raw = ctypes.c_int64(5)
    assert kernel._marshal(n, raw, 0) == (raw, ctypes.addressof(raw))


def test_scalar_conversions_and_ranges() -> None:
    pytest.importorskip("torch")
    src = r"""
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void k(int i, unsigned u, signed char c, bool b, __half h, __nv_bfloat16 bf) {}
    """
    if fcuda.cuda_include_dir() is None:
        pytest.skip("no CUDA toolkit include directory with cuda_fp16.h on this machine")
    kernel = fcuda.compile_kernel(src, "k", arch="sm_90")
    i, u, c, b, h, bf = kernel.params
    assert kernel._marshal(i, -(2**31), 0)[0].value == -(2**31)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'i'.*out of range"):
        kernel._marshal(i, 2**31, 0)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'u'.*out of range"):
        kernel._marshal(u, -1, 0)
    with pytest.raises(fcuda.KernelArgumentError, match=r"parameter 'c'.*out of range"):
        kernel._marshal(c, 200, 0)
    assert kernel._marshal(b, True, 0)[0].value is True
    assert kernel._marshal(h, 1.0, 0)[0].value == 0x3C00
    assert kernel._marshal(h, -2.5, 0)[0].value == 0xC100
    assert kernel._marshal(h, 1e6, 0)[0].value == 0x7C00  # overflow to +inf like __float2half
    assert kernel._marshal(bf, 1.0, 0)[0].value == 0x3F80
    assert kernel._marshal(bf, -2.5, 0)[0].value == 0xC020
    assert kernel._marshal(bf, 1.00390625, 0)[0].value == 0x3F80  # ties round to even


def test_launch_checks_arity_and_dims_before_touching_cuda() -> None:
    pytest.importorskip("torch")
    kernel = fcuda.compile_kernel(SCALE, "scale", arch="sm_90")
    with pytest.raises(
        fcuda.KernelArgumentError, match=r"takes 4 arguments \(float\* x, float\* y, float a, long long n\), got 1"
    ):
        kernel(grid=1, block=1, args=(1,))
    for bad in (0, (1, 2, 3, 4), (), (2, 0), 1.5, "8"):
        with pytest.raises(ValueError, match="grid must be a positive int or a tuple"):
            kernel(grid=bad, block=32, args=(None, None, 1.0, 0))
    with pytest.raises(ValueError, match="shared_mem"):
        kernel(grid=1, block=32, args=(None, None, 1.0, 0), shared_mem=-1)


def test_launch_without_gpu_raises_launch_error() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    kernel = fcuda.compile_kernel(SCALE, "scale", arch="sm_90")
    with pytest.raises(fcuda.CudaLaunchError, match="torch sees no CUDA device"):
        kernel(grid=1, block=32, args=(None, None, 1.0, 0))


class _FakeDriver:
    """Stands in for cuda.bindings.driver on a machine without a GPU; records what the launcher asks."""

    def __init__(self, driver: object) -> None:
        self.real = driver
        self.ok = driver.CUresult.CUDA_SUCCESS
        self.current = driver.CUcontext(0)
        self.primary = driver.CUcontext(0x1234)
        self.calls: list[tuple[str, object]] = []
        self.launches: list[dict[str, object]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "cuInit",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuCtxGetCurrent",
            "cuCtxSetCurrent",
            "cuModuleLoadData",
            "cuModuleGetFunction",
            "cuFuncSetAttribute",
            "cuLaunchKernel",
        ):
            monkeypatch.setattr(self.real, name, getattr(self, name))

    def cuInit(self, flags: int) -> tuple:
        return (self.ok,)

    def cuDeviceGet(self, ordinal: int) -> tuple:
        return self.ok, ordinal

    def cuDevicePrimaryCtxRetain(self, device: int) -> tuple:
        self.calls.append(("retain", device))
        return self.ok, self.primary

    def cuCtxGetCurrent(self) -> tuple:
        return self.ok, self.current

    def cuCtxSetCurrent(self, context: object) -> tuple:
        self.calls.append(("set_current", int(context)))
        self.current = context
        return (self.ok,)

    def cuModuleLoadData(self, image: bytes) -> tuple:
        self.calls.append(("load", image[:4]))
        return self.ok, "module"

    def cuModuleGetFunction(self, module: str, name: bytes) -> tuple:
        self.calls.append(("get_function", name))
        return self.ok, "function"

    def cuFuncSetAttribute(self, function: str, attribute: object, value: int) -> tuple:
        self.calls.append(("set_attribute", value))
        return (self.ok,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> tuple:  # noqa: ANN001
        pointers = (ctypes.c_void_p * 4).from_address(params)
        self.launches.append(
            {
                "dims": (gx, gy, gz, bx, by, bz),
                "shared": shared,
                "stream": stream,
                "args": (
                    ctypes.c_uint64.from_address(pointers[0]).value,
                    ctypes.c_uint64.from_address(pointers[1]).value,
                    ctypes.c_float.from_address(pointers[2]).value,
                    ctypes.c_int64.from_address(pointers[3]).value,
                ),
            }
        )
        return (self.ok,)


def test_launch_path_with_a_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    fake = _FakeDriver(pytest.importorskip("cuda.bindings.driver"))
    fake.install(monkeypatch)
    monkeypatch.setattr(fdriver, "_primary_contexts", {})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: type("S", (), {"cuda_stream": 777})())
    kernel = fcuda.compile_kernel(SCALE, "scale", arch="sm_90")

    kernel(grid=(10,), block=(256,), args=(0x1000, 0x2000, 2.5, -(2**40)))
    kernel(grid=(3, 2), block=128, args=(0x3000, None, 1, 5), shared_mem=64 * 1024, stream=42)
    kernel(grid=1, block=1, args=(0x3000, None, 1, 5), shared_mem=32 * 1024)

    assert fake.calls == [
        ("retain", 0),
        ("set_current", 0x1234),
        ("load", b"\x7fELF"),
        ("get_function", b"scale"),
        ("set_attribute", 64 * 1024),
    ]
    assert [launch["dims"] for launch in fake.launches] == [
        (10, 1, 1, 256, 1, 1),
        (3, 2, 1, 128, 1, 1),
        (1, 1, 1, 1, 1, 1),
    ]
    assert [launch["shared"] for launch in fake.launches] == [0, 64 * 1024, 32 * 1024]
    assert [launch["stream"] for launch in fake.launches] == [777, 42, 777]
    assert fake.launches[0]["args"] == (0x1000, 0x2000, 2.5, -(2**40))
    assert fake.launches[1]["args"] == (0x3000, 0, 1.0, 5)


def test_driver_errors_carry_the_curesult_name() -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    assert fdriver.check((driver.CUresult.CUDA_SUCCESS, 7), "cuX") == 7
    with pytest.raises(
        fcuda.CudaLaunchError, match=r"cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE \(1\)"
    ) as info:
        fdriver.check((driver.CUresult.CUDA_ERROR_INVALID_VALUE,), "cuLaunchKernel")
    assert info.value.result == "CUDA_ERROR_INVALID_VALUE"


def test_errors_pickle_with_their_attributes() -> None:
    err = pickle.loads(pickle.dumps(fcuda.CudaCompileError("msg", log="k.cu(3): error", kernel_name="k")))
    assert (str(err), err.log, err.kernel_name) == ("msg", "k.cu(3): error", "k")
    launch = pickle.loads(pickle.dumps(fcuda.CudaLaunchError("boom", result="CUDA_ERROR_LAUNCH_FAILED")))
    assert launch.result == "CUDA_ERROR_LAUNCH_FAILED"


def test_package_exports_errors() -> None:
    import forge_lsp.runtime as runtime

    assert runtime.CudaCompileError is fcuda.CudaCompileError
    assert runtime.CudaLaunchError is fcuda.CudaLaunchError


# ------------------------------------------------------------------------------------------- nvcc


@pytest.mark.integration
@needs_nvcc
def test_nvcc_compiles_cubin() -> None:
    cubin = fnvcc.compile_cubin(SCALE, arch="sm_90")
    assert cubin[:4] == b"\x7fELF"
    assert _elf_machine(cubin) == EM_CUDA
    assert b"\0scale\0" in cubin
    version = fnvcc.nvcc_version()
    assert version is not None and version.split(".")[0].isdigit()


@pytest.mark.integration
@needs_nvcc
def test_nvcc_failure_reports_the_error_line() -> None:
    with pytest.raises(fcuda.CudaCompileError) as info:
        fnvcc.compile_cubin(SCALE.replace("a * x[i]", "a * z[i]"), arch="sm_90")
    assert 'kernel.cu(4): error: identifier "z" is undefined' in str(info.value)
    assert "kernel.cu(4): error" in info.value.log
    assert info.value.kernel_name is None


def test_nvcc_missing_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")
    assert fnvcc.find_nvcc() is None
    assert fnvcc.nvcc_version() is None
    with pytest.raises(FileNotFoundError, match="nvcc not found"):
        fnvcc.compile_cubin(SCALE)


def test_filename_names_the_source_in_line_info_and_cache(tmp_path, monkeypatch, nvrtc_calls):
    """A kernel loaded from a .cu file keeps that file's name (profiler hot lines point at it)."""
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void named(float* y) { y[threadIdx.x] = 1.f; }'
    plain = fcuda.compile_to_ptx(src, "named", arch="sm_90")
    fcompiler._memory_cache.clear()
    _, _, artifact = fcompiler._compile(src, "named", "sm_90", (), True, "ptx", "/work/kernels/named_ops.cu")
    from_file = artifact.binary.decode()
    assert "named_ops.cu" in from_file and "named_ops.cu" not in plain
    assert nvrtc_calls == ["named", "named"]  # a different file name is a different cache entry

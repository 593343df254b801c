"""Roofline ceilings of a GPU: measured once per device and driver, cached, datasheet as fallback.

`measure_peaks` runs micro-benchmarks on the GPU (a large device-to-device copy for DRAM bandwidth,
large matmuls for FP32 / TF32 / BF16 FLOP/s); these are the ceilings a real kernel can reach, a bit
below the vendor numbers. `load_or_measure_peaks` caches them as JSON under
``<cache_dir>/peaks/`` and falls back to `DATASHEET` when measuring fails. torch is imported only
by the functions that touch the GPU, so the table and the cache logic work on any machine.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..child import ChildRequest
from .model import DevicePeaks

log = logging.getLogger(__name__)

_MiB = 1 << 20

# Vendor datasheet numbers: dense (no structured sparsity) tensor-core FLOP/s, fp32 on the CUDA cores
# (no tensor cores), DRAM bandwidth in decimal bytes/s, L2 as `cudaDeviceProp.l2CacheSize` reports it.
# Keys are normalized name fragments (see `_tokens`) matched as whole words against the device name;
# the longest matching key wins, so "H100 PCIE" beats "H100" and "L40" never matches an L40S.
DATASHEET: dict[str, DevicePeaks] = {
    "H200": DevicePeaks(
        name="H200 SXM 141GB",
        sm_count=132,
        l2_bytes=50 * _MiB,
        dram_bytes_per_s=4.8e12,
        fp32_flops_per_s=67e12,
        bf16_tensor_flops_per_s=989.4e12,
        tf32_tensor_flops_per_s=494.7e12,
        source="datasheet",
    ),
    "H200 NVL": DevicePeaks(
        name="H200 NVL",
        sm_count=132,
        l2_bytes=50 * _MiB,
        dram_bytes_per_s=4.8e12,
        fp32_flops_per_s=60e12,
        bf16_tensor_flops_per_s=835.5e12,
        tf32_tensor_flops_per_s=417.5e12,
        source="datasheet",
    ),
    "H100": DevicePeaks(
        name="H100 SXM5 80GB",
        sm_count=132,
        l2_bytes=50 * _MiB,
        dram_bytes_per_s=3.35e12,
        fp32_flops_per_s=67e12,
        bf16_tensor_flops_per_s=989.4e12,
        tf32_tensor_flops_per_s=494.7e12,
        source="datasheet",
    ),
    "H100 NVL": DevicePeaks(
        name="H100 NVL",
        sm_count=132,
        l2_bytes=50 * _MiB,
        dram_bytes_per_s=3.9e12,
        fp32_flops_per_s=60e12,
        bf16_tensor_flops_per_s=835.5e12,
        tf32_tensor_flops_per_s=417.5e12,
        source="datasheet",
    ),
    "H100 PCIE": DevicePeaks(
        name="H100 PCIe",
        sm_count=114,
        l2_bytes=50 * _MiB,
        dram_bytes_per_s=2.0e12,
        fp32_flops_per_s=51.2e12,
        bf16_tensor_flops_per_s=756.5e12,
        tf32_tensor_flops_per_s=378e12,
        source="datasheet",
    ),
    "A100 SXM4 80GB": DevicePeaks(
        name="A100 SXM4 80GB",
        sm_count=108,
        l2_bytes=40 * _MiB,
        dram_bytes_per_s=2.039e12,
        fp32_flops_per_s=19.5e12,
        bf16_tensor_flops_per_s=312e12,
        tf32_tensor_flops_per_s=156e12,
        source="datasheet",
    ),
    "A100 80GB PCIE": DevicePeaks(
        name="A100 PCIe 80GB",
        sm_count=108,
        l2_bytes=40 * _MiB,
        dram_bytes_per_s=1.935e12,
        fp32_flops_per_s=19.5e12,
        bf16_tensor_flops_per_s=312e12,
        tf32_tensor_flops_per_s=156e12,
        source="datasheet",
    ),
    "A100": DevicePeaks(
        name="A100 40GB",
        sm_count=108,
        l2_bytes=40 * _MiB,
        dram_bytes_per_s=1.555e12,
        fp32_flops_per_s=19.5e12,
        bf16_tensor_flops_per_s=312e12,
        tf32_tensor_flops_per_s=156e12,
        source="datasheet",
    ),
    "L40S": DevicePeaks(
        name="L40S",
        sm_count=142,
        l2_bytes=96 * _MiB,
        dram_bytes_per_s=864e9,
        fp32_flops_per_s=91.6e12,
        bf16_tensor_flops_per_s=362.05e12,
        tf32_tensor_flops_per_s=183e12,
        source="datasheet",
    ),
    "L40": DevicePeaks(
        name="L40",
        sm_count=142,
        l2_bytes=96 * _MiB,
        dram_bytes_per_s=864e9,
        fp32_flops_per_s=90.5e12,
        bf16_tensor_flops_per_s=181.05e12,
        tf32_tensor_flops_per_s=90.5e12,
        source="datasheet",
    ),
    "L4": DevicePeaks(
        name="L4",
        sm_count=58,
        l2_bytes=48 * _MiB,
        dram_bytes_per_s=300e9,
        fp32_flops_per_s=30.3e12,
        bf16_tensor_flops_per_s=121e12,
        tf32_tensor_flops_per_s=60e12,
        source="datasheet",
    ),
    "A10": DevicePeaks(
        name="A10",
        sm_count=72,
        l2_bytes=6 * _MiB,
        dram_bytes_per_s=600e9,
        fp32_flops_per_s=31.2e12,
        bf16_tensor_flops_per_s=125e12,
        tf32_tensor_flops_per_s=62.5e12,
        source="datasheet",
    ),
    # GeForce: bf16 with fp32 accumulation (what torch uses) runs at half the fp16-accumulate rate.
    "RTX 4090": DevicePeaks(
        name="GeForce RTX 4090",
        sm_count=128,
        l2_bytes=72 * _MiB,
        dram_bytes_per_s=1008e9,
        fp32_flops_per_s=82.6e12,
        bf16_tensor_flops_per_s=165.2e12,
        tf32_tensor_flops_per_s=82.6e12,
        source="datasheet",
    ),
    "T4": DevicePeaks(
        name="T4", sm_count=40, l2_bytes=4 * _MiB, dram_bytes_per_s=320e9, fp32_flops_per_s=8.1e12, source="datasheet"
    ),
}

# Micro-benchmark sizes: the copy buffer is at least this many times the L2 (and at least
# COPY_MIN_BYTES) so the copy streams from DRAM; matmuls of MATMUL_N x MATMUL_N keep every SM busy.
COPY_L2_MULTIPLE = 8
COPY_MIN_BYTES = 1 << 30
MATMUL_N = 8192
# Timed repetitions per micro-benchmark (the best one counts) and untimed warm-up calls before them.
BENCH_REPS = 10
BENCH_WARMUP = 2


class PeaksUnavailable(RuntimeError):
    """Neither a measurement nor a datasheet entry gives the device's peaks."""


def _tokens(name: str) -> tuple[str, ...]:
    """Upper-case alphanumeric words of a device name: "NVIDIA A100-SXM4-80GB" -> (NVIDIA, A100, SXM4, 80GB)."""
    return tuple(re.findall(r"[A-Z0-9]+", name.upper()))


def _contains(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))


def datasheet_peaks(device_name: str) -> DevicePeaks | None:
    """The datasheet entry whose key appears (as whole words) in `device_name`; the most specific wins."""
    words = _tokens(device_name)
    matches = [key for key in DATASHEET if _contains(words, _tokens(key))]
    if not matches:
        return None
    return DATASHEET[max(matches, key=lambda key: len(_tokens(key)))]


# ------------------------------------------------------------------------------------ measuring


def _best_seconds(fn: Callable[[], Any]) -> float:
    """Shortest device time of `fn` over BENCH_REPS timed calls (CUDA events), after a warm-up."""
    import torch

    for _ in range(BENCH_WARMUP):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(BENCH_REPS):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def _copy_bytes_per_s(device: Any, l2_bytes: int) -> float:
    """DRAM bandwidth of a device-to-device copy: bytes read plus bytes written, per second."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    n_bytes = min(max(COPY_L2_MULTIPLE * l2_bytes, COPY_MIN_BYTES), free // 4)
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / seconds


def _set_tf32(enabled: bool) -> Callable[[], None]:
    """Allow or forbid TF32 in fp32 matmuls; returns a function that restores the previous setting."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9: the legacy flag must not be mixed with this one
        old = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if enabled else "ieee"

        def restore() -> None:
            matmul.fp32_precision = old
    else:
        old_flag = matmul.allow_tf32
        matmul.allow_tf32 = enabled

        def restore() -> None:
            matmul.allow_tf32 = old_flag

    return restore


def _matmul_flops_per_s(device: Any, dtype: Any, *, tf32: bool) -> float:
    """FLOP/s of an MATMUL_N-square matmul in `dtype` (2 N^3 operations per call)."""
    import torch

    a = torch.randn(MATMUL_N, MATMUL_N, device=device).to(dtype)
    b = torch.randn(MATMUL_N, MATMUL_N, device=device).to(dtype)
    out = torch.empty(MATMUL_N, MATMUL_N, device=device, dtype=dtype)
    restore = _set_tf32(tf32)
    try:
        seconds = _best_seconds(lambda: torch.matmul(a, b, out=out))
    finally:
        restore()
    return 2 * MATMUL_N**3 / seconds


def measure_peaks(device: Any = "cuda") -> DevicePeaks:
    """Measure the roofline ceilings of a CUDA device (a torch device, "cuda:N" or an index).

    DRAM: best of BENCH_REPS copies of a buffer far larger than the L2. FP32: matmul with TF32 off
    (CUDA cores). TF32 and BF16 tensor cores: matmuls, on compute capability 8.0 and newer only.
    """
    import torch

    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"measure_peaks needs a CUDA device, got {device}")
    props = torch.cuda.get_device_properties(device)
    with torch.cuda.device(device):
        tensor_cores = props.major >= 8
        peaks = DevicePeaks(
            name=props.name,
            sm_count=props.multi_processor_count,
            l2_bytes=props.L2_cache_size,
            dram_bytes_per_s=_copy_bytes_per_s(device, props.L2_cache_size),
            fp32_flops_per_s=_matmul_flops_per_s(device, torch.float32, tf32=False),
            tf32_tensor_flops_per_s=_matmul_flops_per_s(device, torch.float32, tf32=True) if tensor_cores else None,
            bf16_tensor_flops_per_s=(_matmul_flops_per_s(device, torch.bfloat16, tf32=False) if tensor_cores else None),
            source="measured",
        )
        torch.cuda.empty_cache()
    return peaks


# ------------------------------------------------------------------------------------ caching


def driver_version() -> str:
    """The NVIDIA kernel driver version from /proc (Linux), or "unknown"."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"Kernel Module(?: for [\w-]+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else "unknown"


def device_identity(device: Any = "cuda") -> tuple[str, str]:
    """(device name, driver version): what a cached measurement is keyed by."""
    import torch

    return torch.cuda.get_device_name(device), driver_version()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_") or "unknown"


def peaks_cache_path(cache_dir: Path, device_name: str, driver: str) -> Path:
    """``<cache_dir>/peaks/<device>__<driver>.json``."""
    return Path(cache_dir) / "peaks" / f"{_slug(device_name)}__{_slug(driver)}.json"


def _read_cached(path: Path) -> DevicePeaks | None:
    """The cached measurement, or None when missing or unreadable (it is then measured again)."""
    try:
        return DevicePeaks.model_validate_json(path.read_text())
    except (OSError, ValidationError):
        return None


def _write_cached(path: Path, peaks: DevicePeaks) -> None:
    """Write atomically (temp file + rename); a cache that cannot be written only costs a re-measure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(peaks.model_dump_json(indent=2))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not cache device peaks in %s: %s", path, exc)


def load_or_measure_peaks(
    device: Any,
    cache_dir: Path,
    *,
    measure: Callable[[Any], DevicePeaks] = measure_peaks,
    identify: Callable[[Any], tuple[str, str]] = device_identity,
) -> DevicePeaks:
    """Peaks of `device`: cached measurement, else a fresh one (then cached), else the datasheet.

    A datasheet fallback is not cached, so the next call tries measuring again. `measure` and
    `identify` are injectable for tests. Raises PeaksUnavailable when the device cannot be
    identified, or cannot be measured and has no datasheet entry.
    """
    try:
        name, driver = identify(device)
    except Exception as exc:  # noqa: BLE001 - no CUDA, bad index, broken driver: one clear error
        raise PeaksUnavailable(f"cannot identify CUDA device {device!r}: {exc}") from exc
    path = peaks_cache_path(cache_dir, name, driver)
    cached = _read_cached(path)
    if cached is not None:
        return cached
    try:
        peaks = measure(device)
    except Exception as exc:  # noqa: BLE001 - any failure of the micro-benchmarks falls back to the table
        fallback = datasheet_peaks(name)
        if fallback is None:
            raise PeaksUnavailable(
                f"measuring the peaks of {name!r} failed ({exc}) and no datasheet entry matches it"
            ) from exc
        log.warning("measuring the peaks of %r failed (%s); using datasheet numbers of %s", name, exc, fallback.name)
        return fallback
    _write_cached(path, peaks)
    return peaks


def cached_peaks(cache_dir: Path, device_name: str) -> DevicePeaks | None:
    """Peaks measured earlier for this device and driver, without measuring anything now."""
    return _read_cached(peaks_cache_path(cache_dir, device_name, driver_version()))


class PeaksRequest(ChildRequest):
    """Measure (or load) the peaks of `device` with the cache in `cache_dir`."""

    device: str
    cache_dir: Path


def main(argv: list[str] | None = None) -> int:
    """``python -m forge_lsp.profiler.peaks REQUEST.json`` (a `PeaksRequest`): measure (or load) and cache; print
    JSON.

    The way a server or CLI measures peaks: in a child process, so the caller never initializes
    CUDA or holds GPU memory.
    """
    import sys

    args = argv if argv is not None else sys.argv[1:]
    request = PeaksRequest.read(args[0])
    try:
        peaks = load_or_measure_peaks(request.device, request.cache_dir)
    except PeaksUnavailable as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(peaks.model_dump_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

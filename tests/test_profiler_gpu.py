"""Profiler on a real GPU under Nsight Compute (run with ``pytest -m gpu`` on the GPU machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from forge_lsp.engine import load_task
from forge_lsp.profiler.ncu import device_peaks, find_ncu, profile

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch"),
    pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)"),
]


def test_only_the_measured_call_is_profiled(cache_dir):
    # warm-up calls and construction launch kernels too; the NVTX range keeps exactly one call's
    result = profile(load_task(FIXTURES / "softmax_small.py"), device="cuda:0", cache_dir=cache_dir)
    assert result.mode == "ncu", result.reason + result.log_excerpt[-2000:]
    assert len(result.kernels) == 1 and "softmax" in result.kernels[0].name.lower()
    k = result.kernels[0]
    assert k.duration_ns > 0 and k.launch is not None and k.launch.registers_per_thread > 0
    assert k.metrics["dram__bytes_read.sum"] > 0 or k.metrics["lts__t_sector_hit_rate.pct"] > 0
    assert Path(result.report_path).is_file() and "NVIDIA" in result.device_name


def test_peaks_are_measured_in_a_child_process_then_cached(tmp_path):
    name = torch.cuda.get_device_name(0)
    peaks, note = device_peaks("cuda:0", name, cache_dir=tmp_path)
    assert note == "measured now" and peaks.source == "measured"
    assert 1e12 < peaks.dram_bytes_per_s < 1e13 and peaks.fp32_flops_per_s > 1e12
    again, note2 = device_peaks("cuda:0", name, cache_dir=tmp_path)
    assert note2 == "measured earlier on this device" and again == peaks


def test_explain_cu_file_points_at_the_strided_load(cache_dir):
    cu = FIXTURES / "explain_cu" / "strided_copy.cu"
    flaw = next(i + 1 for i, line in enumerate(cu.read_text().splitlines()) if "FLAW" in line)
    r = subprocess.run([sys.executable, "-m", "forge_lsp.cli.main", "explain", str(cu), "--kernel", "strided_copy",
                        "--launch-skip", "1", "--device", "cuda:0", "--json", "--cache-dir", str(cache_dir)],
                       capture_output=True, text=True, timeout=600)
    out = json.loads(r.stdout)
    prof = out["profile"]
    assert prof["mode"] == "ncu", prof["reason"] + prof["log_excerpt"][-2000:]
    assert [k["name"] for k in prof["kernels"]] == ["strided_copy"]  # the other kernel and torch's are filtered
    findings = out["explanations"][0]["findings"]
    rules = [f["rule"] for f in findings]
    assert "uncoalesced_global_access" in rules[:2], rules
    coalescing = findings[rules.index("uncoalesced_global_access")]
    assert (str(cu.resolve()), flaw) in {(h["file"], h["line"]) for h in coalescing["lines"]}

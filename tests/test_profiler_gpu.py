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


@pytest.mark.parametrize("path", ["cupti", "ncu"])
def test_only_the_measured_call_is_profiled(cache_dir, path):
    # warm-up calls and construction launch kernels too: in process (CUPTI, the default) and under ncu (its NVTX
    # range) exactly one call's are kept
    task = load_task(FIXTURES / "softmax_small.py")
    result = profile(task, device="cuda:0", cache_dir=cache_dir, in_process=path == "cupti")
    assert result.mode == path, result.reason + result.log_excerpt[-2000:]
    assert len(result.kernels) == 1 and "softmax" in result.kernels[0].name.lower()
    k = result.kernels[0]
    assert k.duration_ns > 0 and k.launch is not None and k.launch.registers_per_thread > 0
    assert k.metrics["dram__bytes_read.sum"] > 0 or k.metrics["lts__t_sector_hit_rate.pct"] > 0
    assert "NVIDIA" in result.device_name
    if path == "ncu":  # the in-process path keeps no report file
        assert Path(result.report_path).is_file()


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
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "explain",
            str(cu),
            "--kernel",
            "strided_copy",
            "--launch-skip",
            "1",
            "--device",
            "cuda:0",
            "--json",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = json.loads(r.stdout)
    prof = out["profile"]
    assert prof["mode"] == "ncu", prof["reason"] + prof["log_excerpt"][-2000:]
    assert [k["name"] for k in prof["kernels"]] == ["strided_copy"]  # the other kernel and torch's are filtered
    findings = out["explanations"][0]["findings"]
    rules = [f["rule"] for f in findings]
    assert "uncoalesced_global_access" in rules[:2], rules
    coalescing = findings[rules.index("uncoalesced_global_access")]
    assert (str(cu.resolve()), flaw) in {(h["file"], h["line"]) for h in coalescing["lines"]}


def _candidate_lines(result, suffix: str) -> list:
    """Source lines in files named like `suffix` with stall samples or memory traffic."""
    return [
        h
        for k in result.kernels
        for h in k.hot_lines
        if h.file.endswith(suffix) and (h.samples or h.global_sectors or h.shared_excess_wavefronts)
    ]


@pytest.mark.parametrize("path", ["cupti", "ncu"])
def test_triton_candidate_hot_lines_point_at_the_candidate_source(cache_dir, path):
    import candidates as C

    from forge_lsp.engine import Candidate

    cand = Candidate.from_source(C.TRITON_CORRECT, "triton_softmax")
    task = load_task(FIXTURES / "softmax_small.py")
    result = profile(task, cand, device="cuda:0", cache_dir=cache_dir, in_process=path == "cupti")
    assert result.mode == path, result.reason + result.log_excerpt[-2000:]
    assert [k.name for k in result.kernels] == ["softmax_kernel"]
    # the candidate file the profiled process executed (tl.max/tl.sum lines point into Triton's own files)
    lines = [h for h in _candidate_lines(result, ".py") if Path(h.file).name.startswith("candidate_")]
    assert lines, result.kernels[0].hot_lines
    assert len({h.file for h in lines}) == 1
    source = Path(lines[0].file).read_text().splitlines()
    kernel_body = range(
        next(i for i, t in enumerate(source) if "def softmax_kernel" in t) + 1,
        next(i for i, t in enumerate(source) if t.startswith("def softmax(")) + 1,
    )
    assert all(h.line in kernel_body for h in lines)


@pytest.mark.parametrize("path", ["cupti", "ncu"])
def test_load_inline_candidate_hot_lines_point_at_its_built_cu_file(cache_dir, path):
    from test_engine_gpu import CUDA_INLINE_SOFTMAX

    from forge_lsp.engine import Candidate

    result = profile(
        load_task(FIXTURES / "softmax_small.py"),
        Candidate.from_source(CUDA_INLINE_SOFTMAX, "inline"),
        device="cuda:0",
        cache_dir=cache_dir,
        timeout=600,
        in_process=path == "cupti",
    )
    assert result.mode == path, result.reason + result.log_excerpt[-2000:]
    assert [k.name.split("(")[0] for k in result.kernels] == ["softmax_rows"]  # CUPTI's names are demangled
    # each hot line as compiled: a line of the .cu file the build compiled (the compile cache's copy of the
    # candidate's string for a candidate with no file of its own; the line of a user's `.py` beside it is
    # test_source_map's)
    compiled = [
        (f, int(n))
        for h in _candidate_lines(result, "")
        for f, n in [(h.compiled_as or f"{h.file}:{h.line}").rsplit(":", 1)]
        if f.endswith(".cu") and Path(cache_dir) in Path(f).parents
    ]
    assert compiled, result.kernels[0].hot_lines
    assert len({f for f, _ in compiled}) == 1
    built = Path(compiled[0][0]).read_text().splitlines()
    start = next(i for i, t in enumerate(built) if "__global__ void softmax_rows" in t)
    assert all(start < n <= start + 20 for _, n in compiled)  # inside the kernel, not torch's headers


def test_forge_profile_full_keeps_the_whole_report(cache_dir):
    task = str(FIXTURES / "softmax_small.py")
    runs = {}
    for extra in ([], ["--full"]):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "forge_lsp.cli.main",
                "profile",
                task,
                "--device",
                "cuda:0",
                "--json",
                "--cache-dir",
                str(cache_dir),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        runs[bool(extra)] = json.loads(r.stdout)
    full, curated = runs[True], runs[False]
    assert Path(full["report_path"]).is_file()
    assert len(full["kernels"][0]["metrics"]) > len(curated["kernels"][0]["metrics"])


def test_forge_explain_task_prints_findings_for_the_reference(cache_dir):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "explain",
            str(FIXTURES / "softmax_small.py"),
            "--device",
            "cuda:0",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "roofline:" in r.stdout and "peaks of" in r.stdout


pytest_plugins = ["fake_openai"]


def test_explain_adds_the_judge_narrative_when_a_model_is_configured(tmp_path, cache_dir, fake_openai):
    import shutil

    for name in ("strided_copy.cu", "run_strided_copy.py"):
        shutil.copy(FIXTURES / "explain_cu" / name, tmp_path / name)
    (tmp_path / "forge.toml").write_text(f'model = "judge"\nbase_url = "{fake_openai.base_url}"\n')
    fake_openai.script(
        json.dumps(
            {
                "summary": "Strided loads waste most of each sector.",
                "bottleneck": "uncoalesced global loads",
                "next_steps": ["swap the index order"],
            }
        )
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "explain",
            str(tmp_path / "strided_copy.cu"),
            "--kernel",
            "strided_copy",
            "--device",
            "cuda:0",
            "--json",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = json.loads(r.stdout)
    assert out["narrative_note"] == "narrative by judge", out["narrative_note"]
    assert "uncoalesced global loads" in out["explanations"][0]["narrative"]
    assert "Uncoalesced" in fake_openai.chat_requests[0].messages[1]["content"]

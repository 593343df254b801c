"""Reading and analyzing real Nsight Compute reports captured on the H200 (tests/fixtures/ncu).

The fixtures come from `benchmarks/profile_flawed.py --out tests/fixtures/ncu` on the GPU machine:
one report per case of corpus/profiler/candidates.py, its raw CSV export, and the device peaks
measured in the same run. These tests need no GPU and no ncu: NVIDIA's `ncu_report` reader only.
"""

from __future__ import annotations

import gzip
import importlib.util
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from forge_lsp.profiler.analyze import analyze
from forge_lsp.profiler.model import DevicePeaks
from forge_lsp.profiler.report import from_raw_csv, read_report
from forge_lsp.profiler.roofline import place

_spec = importlib.util.spec_from_file_location("profiler_cases", ROOT / "corpus" / "profiler" / "candidates.py")
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
CASES = _cases.CASES

pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report reader is a dev dependency")

NCU = FIXTURES / "ncu"
PEAKS = DevicePeaks.model_validate_json((NCU / "peaks.json").read_text())


def _report(name: str, tmp_path: Path):
    path = tmp_path / f"{name}.ncu-rep"
    with gzip.open(NCU / f"{name}.ncu-rep.gz", "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    kernels = read_report(path)
    assert len(kernels) == 1, [k.name for k in kernels]  # the NVTX range held exactly the candidate's kernel
    return kernels[0]


def _marked_line(source: str, marker: str) -> int:
    body = source.split('SRC = r"""', 1)[1]
    return next(i + 1 for i, text in enumerate(body.splitlines()) if marker in text)


@pytest.mark.integration
@pytest.mark.parametrize("case", [c for c in CASES if c[3]], ids=lambda c: c[1])
def test_flawed_kernel_gets_the_right_top_finding_on_the_right_line(case, tmp_path):
    _, name, expected, marker, source = case
    kernel = _report(name, tmp_path)
    findings = analyze(kernel, PEAKS)
    assert findings and findings[0].rule == expected, [(f.rule, round(f.severity, 2)) for f in findings]
    assert findings[0].lines and findings[0].lines[0].line == _marked_line(source, marker)
    assert findings[0].evidence and findings[0].suggestion


def test_well_written_copy_sits_on_the_memory_roof_with_no_flaw_reported(tmp_path):
    kernel = _report("good_copy", tmp_path)
    roof = place(kernel, PEAKS)
    assert roof.bound == "memory" and roof.pct_of_roof >= 90.0
    rules = {f.rule for f in analyze(kernel, PEAKS)}
    # 128-bit accesses need 16 sectors per request: not "uncoalesced"
    assert not rules & {"uncoalesced_global_access", "shared_bank_conflicts", "low_occupancy", "warp_divergence"}


def test_source_lines_carry_stalls_and_memory_counters(tmp_path):
    kernel = _report("uncoalesced_transpose", tmp_path)
    assert kernel.reader == "ncu_report"
    assert sum(h.stall_pct for h in kernel.hot_lines) == pytest.approx(100.0, abs=0.5)
    flawed = max(kernel.hot_lines, key=lambda h: h.global_sectors - h.global_sectors_ideal)
    assert flawed.global_sectors >= 4 * flawed.global_sectors_ideal  # strided store: one sector per thread
    assert all(h.file.endswith(".cu") for h in kernel.hot_lines)


@pytest.mark.integration
@pytest.mark.parametrize("name", [c[1] for c in CASES])
def test_csv_fallback_reads_the_same_numbers_as_the_reader(name, tmp_path):
    kernel = _report(name, tmp_path)
    (row,) = from_raw_csv((NCU / f"{name}.csv").read_text())
    assert row.reader == "csv" and row.hot_lines == []
    assert row.launch == kernel.launch
    assert row.duration_ns == pytest.approx(kernel.duration_ns, rel=1e-6)
    for metric in ("dram__bytes_read.sum", "sm__warps_active.avg.pct_of_peak_sustained_active"):
        assert row.metrics[metric] == pytest.approx(kernel.metrics[metric], rel=1e-3)


def test_a_report_names_the_device_its_kernels_ran_on_and_keeps_only_the_sources_it_holds(tmp_path):
    """The device comes from the report itself (the profiled process's own result may be missing); an NVRTC program,
    which is no file, was not imported into the report: its empty text is left out rather than read as the source."""
    from forge_lsp.profiler.report import load_report

    path = tmp_path / "r.ncu-rep"
    with gzip.open(NCU / "uncoalesced_transpose.ncu-rep.gz", "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    read = load_report(path)
    assert read.device_name == "NVIDIA H200"
    assert read.sources == {}
    (kernel,) = read.kernels
    assert kernel == _report("uncoalesced_transpose", tmp_path)
    assert {Path(h.file).name for h in kernel.hot_lines} == {"transpose_naive.cu"}  # named, but not imported


def _fake_ncu(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.integration  # starts a process
def test_without_the_reader_ncu_import_is_run_and_its_warnings_stay_out_of_the_csv(tmp_path, monkeypatch):
    import forge_lsp.profiler.report as report

    name = CASES[0][1]
    csv_file = NCU / f"{name}.csv"
    ncu = _fake_ncu(tmp_path, f'echo "==WARNING== something about the report" >&2\ncat "{csv_file}"\n')
    monkeypatch.setattr(report, "import_ncu_report", lambda ncu=None: None)
    (kernel,) = read_report(tmp_path / "x.ncu-rep", ncu=ncu)
    (expected,) = from_raw_csv(csv_file.read_text())
    assert kernel == expected
    read = report.load_report(tmp_path / "x.ncu-rep", ncu=ncu)  # the device from its row, not the units row
    assert (read.kernels, read.device_name, read.sources) == ([expected], "NVIDIA H200", {})


@pytest.mark.integration  # starts a process
def test_a_failing_ncu_import_says_its_exit_code_and_stderr(tmp_path, monkeypatch):
    import forge_lsp.profiler.report as report

    ncu = _fake_ncu(tmp_path, 'echo "==ERROR== cannot open the report" >&2\nexit 3\n')
    monkeypatch.setattr(report, "import_ncu_report", lambda ncu=None: None)
    with pytest.raises(RuntimeError, match=r"exit 3\).*cannot open the report"):
        read_report(tmp_path / "x.ncu-rep", ncu=ncu)


@pytest.mark.integration
def test_a_hanging_ncu_import_is_ended_with_everything_it_started(tmp_path):
    import time

    from forge_lsp import sandbox
    from forge_lsp.profiler.report import _ncu_import_csv

    pidfile = tmp_path / "child.pid"
    ncu = _fake_ncu(tmp_path, f'sleep 600 &\necho $! > "{pidfile}"\nsleep 600\n')
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="did not finish"):
        _ncu_import_csv(ncu, tmp_path / "x.ncu-rep", timeout=1.0)
    assert time.monotonic() - t0 < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while sandbox._stat(child) is not None and time.monotonic() < deadline:  # None: gone or a zombie
        time.sleep(0.05)
    assert sandbox._stat(child) is None, "the ncu child outlived the timeout"
    assert not [p for p in sandbox.live_children() if p.args and p.args[0] == ncu]

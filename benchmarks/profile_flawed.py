"""Profiler acceptance on the GPU machine: diagnose three flawed kernels, place a good one on the roofline.

    python benchmarks/profile_flawed.py [--out DIR]

For each case in benchmarks/profiler/candidates.py: profile the candidate under ncu (forge's
isolated runner), analyze it with measured device peaks, and check the top finding and the
source line it points at. Copies each report and its raw CSV to --out (fixtures for CPU tests).
Prints a short table last.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "profiler"))

from candidates import CASES  # noqa: E402

from forge_lsp.engine import Candidate, load_task  # noqa: E402
from forge_lsp.profiler.analyze import analyze  # noqa: E402
from forge_lsp.profiler.ncu import find_ncu, profile  # noqa: E402
from forge_lsp.profiler.peaks import load_or_measure_peaks  # noqa: E402
from forge_lsp.profiler.roofline import place  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp())
    peaks = load_or_measure_peaks("cuda:0", cache)
    print(f"peaks ({peaks.source}): DRAM {peaks.dram_bytes_per_s / 1e12:.2f} TB/s, fp32 {peaks.fp32_flops_per_s / 1e12:.1f} "
          f"TFLOP/s, {peaks.sm_count} SMs")
    rows = []
    for task_file, name, expected, marker, source in CASES:
        task = load_task(ROOT / "benchmarks" / "profiler" / task_file)
        result = profile(task, Candidate.from_source(source, name), device="cuda:0", cache_dir=cache)
        if not result.kernels:
            rows.append((name, expected, f"no kernels ({result.reason})", "", "", f"{result.seconds:.1f}"))
            print(result.log_excerpt[-2000:])
            continue
        kernel = max(result.kernels, key=lambda k: k.duration_ns)
        findings = analyze(kernel, peaks)
        roof = place(kernel, peaks)
        top = findings[0].rule if findings else "-"
        line = ""
        want_line = next((i + 1 for i, text in enumerate(source.split('SRC = r"""', 1)[-1].splitlines())
                          if marker and marker in text), None)
        for f in findings[:1]:
            if f.lines:
                line = f"{f.lines[0].line}" + (f" (want {want_line})" if want_line else "")
        rows.append((name, expected, top, line, f"{roof.pct_of_roof:.0f}% {roof.bound}" if roof else "-",
                     f"{result.seconds:.1f}"))
        if args.out and result.report_path:
            args.out.mkdir(parents=True, exist_ok=True)
            shutil.copy(result.report_path, args.out / f"{name}.ncu-rep")
            ncu = find_ncu()
            if ncu:
                csv = subprocess.run([ncu, "--import", result.report_path, "--csv", "--page", "raw",
                                      "--print-units", "base"], capture_output=True, text=True)
                (args.out / f"{name}.csv").write_text(csv.stdout)
    print("\n== profiler acceptance (top finding, line, roofline, profiling seconds) ==")
    print(f"{'case':26s} {'expected':28s} {'top finding':28s} {'line':14s} {'roofline':16s} {'secs':>5s}")
    for r in rows:
        print(f"{r[0]:26s} {r[1]:28s} {r[2]:28s} {r[3]:14s} {r[4]:16s} {r[5]:>5s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

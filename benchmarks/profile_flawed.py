"""Profiler acceptance on the GPU machine: diagnose three flawed kernels, place a good one on the roofline.

    python benchmarks/profile_flawed.py [--out DIR]

For each case in corpus/profiler/candidates.py: profile the candidate under ncu (forge's
isolated runner), analyze it with measured device peaks, and check the top finding and the
source line it points at. Copies each report and its raw CSV to --out (fixtures for CPU tests).
Prints a short table last.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "corpus" / "profiler"))

from candidates import CASES  # noqa: E402

from forge_lsp.engine import Candidate, load_task  # noqa: E402
from forge_lsp.engine.worker_client import worker_env  # noqa: E402
from forge_lsp.profiler.analyze import analyze  # noqa: E402
from forge_lsp.profiler.ncu import _run, find_ncu, ncu_command, profile  # noqa: E402
from forge_lsp.profiler.peaks import load_or_measure_peaks  # noqa: E402
from forge_lsp.profiler.roofline import place  # noqa: E402
from forge_lsp.profiler.target import ProfileCall  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, help="write gzipped reports, raw CSVs and the peaks here (test fixtures)")
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the profiled process without ncu, "
        "and ncu without the source-counter section, for the first case",
    )
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp())
    peaks = load_or_measure_peaks("cuda:0", cache)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "peaks.json").write_text(peaks.model_dump_json(indent=2))
    print(
        f"peaks ({peaks.source}): DRAM {peaks.dram_bytes_per_s / 1e12:.2f} TB/s, fp32 {peaks.fp32_flops_per_s / 1e12:.1f} "
        f"TFLOP/s, {peaks.sm_count} SMs"
    )
    rows = []
    for task_file, name, expected, marker, source in CASES:
        task = load_task(ROOT / "corpus" / "profiler" / task_file)
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
        want_line = next(
            (
                i + 1
                for i, text in enumerate(source.split('SRC = r"""', 1)[-1].splitlines())
                if marker and marker in text
            ),
            None,
        )
        for f in findings[:1]:
            if f.lines:
                line = f"{f.lines[0].line}" + (f" (want {want_line})" if want_line else "")
        rows.append(
            (
                name,
                expected,
                top,
                line,
                f"{roof.pct_of_roof:.0f}% {roof.bound}" if roof else "-",
                f"{result.seconds:.1f}",
            )
        )
        print(
            f"{name}: reader {kernel.reader}, {len(kernel.hot_lines)} source lines, "
            f"findings {[f.rule for f in findings]}, stages in the profiled process {result.stages_s}"
        )
        if args.out and result.report_path:
            with open(result.report_path, "rb") as src, gzip.open(args.out / f"{name}.ncu-rep.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            ncu = find_ncu()
            if ncu:
                csv = subprocess.run(
                    [ncu, "--import", result.report_path, "--csv", "--page", "raw", "--print-units", "base"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                (args.out / f"{name}.csv").write_text(csv.stdout)
    if args.breakdown:
        breakdown(cache)
    print("\n== profiler acceptance (top finding, line, roofline, profiling seconds) ==")
    print(f"{'case':26s} {'expected':28s} {'top finding':28s} {'line':14s} {'roofline':16s} {'secs':>5s}")
    for r in rows:
        print(f"{r[0]:26s} {r[1]:28s} {r[2]:28s} {r[3]:14s} {r[4]:16s} {r[5]:>5s}")
    return 0


def breakdown(cache: Path) -> None:
    """Where the profiling seconds of one candidate go: the process alone, ncu light, ncu as used."""
    task_file, name, _, _, source = CASES[0]
    task = load_task(ROOT / "corpus" / "profiler" / task_file)
    work = Path(tempfile.mkdtemp())
    req = ProfileCall(device="cuda:0", task=task, candidate=Candidate.from_source(source)).write(work / "request.json")
    env, ncu = worker_env("cuda:0", cache), find_ncu()
    target = [sys.executable, "-m", "forge_lsp.profiler.target", str(req)]
    variants = {
        "process alone (no ncu)": target,
        "ncu, launch stats only": [
            ncu,
            "--clock-control",
            "none",
            "--target-processes",
            "all",
            "--nvtx",
            "--nvtx-include",
            "forge_profile/",
            "--section",
            "LaunchStats",
            "-f",
            "-o",
            str(work / "light"),
            *target,
        ],
        "ncu as forge runs it": ncu_command(ncu, work / "full", target),
    }
    print("\n== profiling overhead breakdown (one candidate, warm caches) ==")
    for label, cmd in variants.items():
        t0 = time.perf_counter()
        code, log, _ = _run(cmd, env, 300, work)
        print(f"{label:28s} {time.perf_counter() - t0:6.1f} s  rc={code}")


if __name__ == "__main__":
    sys.exit(main())

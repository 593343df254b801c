"""The README's figures are the ones `benchmarks/readme_figures.py` measured, for the files it measured.

The benchmark writes `benchmarks/results/<date>-cpu-readme-figures.json`; the README names that date. These tests
read both (no timing here): a figure typed by hand, a stale date, or an example changed since it was measured
fails until the benchmark is run again and its figures copied.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RESULTS = ROOT / "benchmarks" / "results"
DASH = "[–-]"  # an en dash in prose, a hyphen accepted


def measured(date: str) -> dict:
    path = RESULTS / f"{date}-cpu-readme-figures.json"
    assert path.is_file(), f"the README cites {path.name}, which benchmarks/readme_figures.py did not write"
    return json.loads(path.read_text())


def test_the_readme_cites_the_newest_measurement():
    dates = re.findall(r"`benchmarks/readme_figures\.py` \((\d{4}-\d\d-\d\d)", README)
    assert dates, "the README names benchmarks/readme_figures.py and the date of its figures"
    newest = max(p.name[:10] for p in RESULTS.glob("*-cpu-readme-figures.json"))
    assert set(dates) == {newest}, (dates, newest)


def example_claim() -> re.Match:
    m = re.search(
        rf"`benchmarks/readme_figures\.py` \((?P<date>[\d-]+), [^)]*?(?P<runs>\d+) runs\): (?P<c0>[\d.]+){DASH}(?P<c1>[\d.]+) ms "
        rf"against the reference's (?P<r0>[\d.]+){DASH}(?P<r1>[\d.]+) ms, (?P<s0>[\d.]+){DASH}(?P<s1>[\d.]+)× faster",
        " ".join(README.split()),
    )
    assert m, "the README states the bundled example's times and speedup as benchmarks/readme_figures.py measured them"
    return m


def test_the_example_figures_are_the_measured_ones_for_the_files_measured():
    m = example_claim()
    ex = measured(m["date"])["example"]
    for name, sha in (("bias_act_task.py", ex["task_sha"]), ("bias_act_cpp.py", ex["candidate_sha"])):
        now = hashlib.sha256((ROOT / "forge_lsp" / "examples" / name).read_bytes()).hexdigest()[:16]
        assert now == sha, f"{name} changed since its figures were measured: run benchmarks/readme_figures.py again"
    assert int(m["runs"]) == len(ex["runs"])
    assert all(r["status"] == "correct" for r in ex["runs"]), ex["runs"]
    said = [float(m[k]) for k in ("c0", "c1", "r0", "r1", "s0", "s1")]
    got = [*ex["candidate_ms"], *ex["reference_ms"], ex["speedup_min"], ex["speedup_max"]]
    assert said == pytest.approx(got, abs=0.005), (said, got)
    # a speedup claimed is one every run's interval supports: none of them reached 1.0
    assert all(r["ci95"][0] > 1.0 for r in ex["runs"]), ex["runs"]


def test_the_first_run_time_is_the_measured_one():
    m = re.search(r"The first run compiles it \(about (\d+) s", README)
    assert m, "the README says how long the example's first run (the build) takes"
    first = measured(example_claim()["date"])["example"]["first_run_s"]
    assert abs(int(m[1]) - first) <= max(5, 0.2 * first), (m[1], first)


def test_the_fast_loop_figures_are_the_measured_ones():
    m = re.search(r"under 2 min \((\d+) s, (\d+) tests here", README)
    assert m, "the README states the fast loop's time and size"
    fast = measured(example_claim()["date"])["fast_loop"]
    assert (int(m[1]), int(m[2])) == (fast["median_s"], fast["tests"]), fast
    assert fast["median_s"] < 120 and max(fast["wall_s"]) < 120, fast

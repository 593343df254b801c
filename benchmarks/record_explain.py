"""Record on the GPU machine the profile that the CPU tests replay: Explain on a module whose kernel is CUDA in its `.py`
file's string (`tests/fixtures/explain_replay/gather_half.py`, built by load_inline), under Nsight Compute, as the
editor's Explain runs it where the in-process profile is unavailable.

    python benchmarks/record_explain.py [--out DIR] [--device cuda:0]

Three explanations of the module, through the explain use case:
- **cupti**: the in-process profile (what the editor runs on a GPU), which builds the module's extension first: the
  hottest line must be the string's line marked ``// HOT``, mapped into the `.py` file;
- **ncu**: the recording. Its report must hold the module's CUDA source (ncu's ``--import-source``), and the hottest
  line must be the marked one too;
- **replay**: what the CPU tests do, here: the stand-in ncu (`tests/fixtures/explain_replay/bin/ncu`) answers with the
  report just recorded, in a new cache with none of the build's files, and the same line and time must come out.

Writes DIR/explain.ncu-rep.gz and DIR/recording.json (default DIR: tests/fixtures/explain_replay/recording, where the
tests read them) once the ncu and replay checks pass; exits 1 if any check fails (the in-process one included). Prints
a short table last. About a minute on an H100 (most of it the first build of the module's extension).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.profiler.ncu import find_ncu  # noqa: E402
from forge_lsp.profiler.peaks import driver_version  # noqa: E402
from forge_lsp.profiler.report import load_report  # noqa: E402
from forge_lsp.usecases.explain import ExplainResult, ProfileRequest, explain  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "explain_replay"
MODULE = FIXTURE / "gather_half.py"
MODEL_CLASS = "GatherHalf"
STAND_IN = FIXTURE / "bin" / "ncu"


def marked_line(text: str) -> int:
    """The 1-based line of the module marked ``// HOT``."""
    return 1 + next(i for i, line in enumerate(text.splitlines()) if "// HOT" in line)


def hottest(res: ExplainResult, module: Path) -> int | None:
    """The line of `module` with the largest share of the longest kernel's sampled stalls."""
    top = res.top
    if top is None:
        return None
    lines = [h for h in top.kernel.hot_lines if h.stall_pct > 0 and Path(h.file).resolve() == module.resolve()]
    return max(lines, key=lambda h: h.stall_pct).line if lines else None


def run(label: str, folder: Path, cache: Path, device: str, *, in_process: bool) -> tuple[dict, ExplainResult | None]:
    """Explain the module, copied into `folder`, with `cache`: a row of the table, and the explanation."""
    folder.mkdir(parents=True, exist_ok=True)
    module = folder / MODULE.name
    shutil.copy(MODULE, module)
    req = ProfileRequest(
        target=module, model_class=MODEL_CLASS, device=device, cache_dir=cache, in_process=in_process, timeout=240
    )
    t0 = time.perf_counter()
    try:
        res = explain(req)
    except Exception as exc:  # noqa: BLE001 - said in the row
        return {"path": label, "error": f"{type(exc).__name__}: {exc}"[:300], "s": time.perf_counter() - t0}, None
    top = res.top
    row = {
        "path": label,
        "s": round(time.perf_counter() - t0, 2),
        "mode": res.result.mode,
        "reason": res.result.reason[:300],
        "device_name": res.result.device_name,
        "kernels": len(res.result.kernels),
        "latency_ms": sum(k.duration_ns for k in res.result.kernels) / 1e6,
        "top_finding": top.findings[0].rule if top and top.findings else "-",
        "findings": [f.rule for f in top.findings] if top else [],
        "hot_line": hottest(res, module),
        "peaks": res.peaks_note,
        "log": res.result.log_excerpt[-1500:] if res.result.mode == "degraded" else "",
    }
    return row, res


def ncu_version(ncu: str | None) -> str:
    if ncu is None:
        return ""
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    return out.splitlines()[-1].removeprefix("Version ").strip() if out else ""


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=FIXTURE / "recording")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    text = MODULE.read_text()
    expected = marked_line(text)
    work = Path(tempfile.mkdtemp(prefix="record-explain-"))
    problems: list[str] = []
    rows: list[dict] = []
    written = False

    # 1. the in-process profile, as the editor explains on a GPU; it builds the module's extension (cached after)
    cupti, _ = run("cupti (in-process)", work / "ws", work / "cache", args.device, in_process=True)
    rows.append(cupti)
    if cupti.get("hot_line") != expected:
        problems.append(f"in the process: the hottest line is {cupti.get('hot_line')}, not {expected}")

    # 2. the recording: under ncu, as a machine without the in-process profile explains
    row, res = run("ncu (recorded)", work / "ws", work / "cache", args.device, in_process=False)
    rows.append(row)
    report_path = Path(res.result.report_path) if res is not None and res.result.report_path else None
    recorded_ok = res is not None and row["mode"] == "ncu" and report_path is not None and report_path.exists()
    if not recorded_ok:
        problems.append(f"no ncu report: {row.get('error') or row.get('reason')} {row.get('log', '')[-600:]}")
    else:
        assert report_path is not None
        if not any("// HOT" in source for source in load_report(report_path).sources.values()):
            recorded_ok = False
            problems.append("the report does not hold the module's CUDA source (ncu's --import-source)")
        if row["hot_line"] != expected:
            recorded_ok = False
            problems.append(f"ncu: the hottest line is {row['hot_line']}, not the marked line {expected}")

    if recorded_ok and report_path is not None:
        recording = work / "recording"
        recording.mkdir()
        with open(report_path, "rb") as src, gzip.open(recording / "explain.ncu-rep.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        manifest = {
            "recorded_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "forge_commit": commit(),
            "device_name": row["device_name"],
            "driver": driver_version(),
            "ncu_version": ncu_version(find_ncu()),
            "module": MODULE.name,
            "model_class": MODEL_CLASS,
            "module_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "report": "explain.ncu-rep.gz",
            "kernels": row["kernels"],
            "latency_ms": row["latency_ms"],
            "top_finding": row["top_finding"],
            "findings": row["findings"],
            "hot_line": row["hot_line"],
            "in_process": {k: cupti.get(k) for k in ("mode", "latency_ms", "top_finding", "hot_line")},
        }
        (recording / "recording.json").write_text(json.dumps(manifest, indent=1) + "\n")

        # 3. the replay, as the CPU tests run it: the stand-in ncu, a cache with none of the build's files
        replay_cache = work / "replay-cache"
        if (work / "cache" / "peaks").is_dir():  # the peaks measured above: the replay measures nothing
            shutil.copytree(work / "cache" / "peaks", replay_cache / "peaks")
        stand_in = work / "bin" / "ncu"  # executable whatever mode the checkout gave the file
        stand_in.parent.mkdir()
        shutil.copy(STAND_IN, stand_in)
        stand_in.chmod(0o755)
        calls = work / "stand-in-calls.jsonl"
        saved = {k: os.environ.get(k) for k in ("NCU", "FORGE_NCU_RECORDING", "FORGE_NCU_STANDIN_LOG")}
        os.environ.update(NCU=str(stand_in), FORGE_NCU_RECORDING=str(recording), FORGE_NCU_STANDIN_LOG=str(calls))
        try:
            replay, _ = run("replay (stand-in)", work / "replay", replay_cache, args.device, in_process=False)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        rows.append(replay)
        answered = len(calls.read_text().splitlines()) if calls.exists() else 0
        if answered != 1:
            problems.append(f"the stand-in ncu answered {answered} profiles, not the replay's one")
        elif replay.get("hot_line") != expected or abs(replay.get("latency_ms", 0) - row["latency_ms"]) > 1e-9:
            problems.append(f"the replay differs: {json.dumps(replay)[:600]}")
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            for f in recording.iterdir():
                shutil.copy(f, args.out / f.name)
            written = True

    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows), flush=True)
    device = next((r["device_name"] for r in rows if r.get("device_name")), args.device)
    print(f"\n== Explain on {MODULE.name} ({MODEL_CLASS}), {device}: the hottest line should be {expected} ==")
    print(f"{'path':20s} {'ran':6s} {'s':>6s} {'kernel µs':>10s}  {'top finding':28s} {'hot line':>8s}")
    for r in rows:
        print(
            f"{r['path']:20s} {r.get('mode', '-'):6s} {r.get('s', 0):6.1f} {r.get('latency_ms', 0) * 1000:10.1f}  "
            f"{r.get('top_finding', r.get('error', '-'))[:28]:28s} {r.get('hot_line') or '-'!s:>8s}"
        )
    wrote = (
        f"wrote {args.out}/ (explain.ncu-rep.gz {(args.out / 'explain.ncu-rep.gz').stat().st_size // 1024} KB)"
        if written
        else "wrote nothing"
    )
    for p in problems:
        print(f"PROBLEM: {p}")
    print(f"{wrote}; total {time.perf_counter() - t_start:.0f} s; work folder {work}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Read Nsight Compute reports into `KernelProfile`s.

NVIDIA's own reader first: the `ncu_report` module (PyPI package `ncu-report`, or the copy in
``<ncu>/extras/python``). Where it cannot be imported, ``ncu --import R --csv --page raw``.
"""

from __future__ import annotations

import csv
import importlib
import io
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from .model import HotLine, KernelProfile, LaunchConfig

_PCSAMP = "smsp__pcsamp_warps_issue_stalled_"


def import_ncu_report(ncu: str | None = None) -> Any | None:
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    if ncu:
        extras = Path(ncu).resolve().parent / "extras" / "python"
        if (extras / "ncu_report.py").is_file():
            sys.path.insert(0, str(extras))
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                return None
    return None


def read_report(path: str | Path, *, ncu: str | None = None) -> list[KernelProfile]:
    module = import_ncu_report(ncu)
    if module is not None:
        return from_context(module.load_report(str(path)))
    if ncu is None:
        raise RuntimeError("cannot read an ncu report: the ncu_report module is not importable and ncu was not found")
    out = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"ncu --import failed: {out.stderr[-2000:]}")
    return from_raw_csv(out.stdout)


def _launch(metrics: dict[str, float]) -> LaunchConfig | None:
    def dim(prefix: str) -> tuple[int, int, int] | None:
        vals = [metrics.get(f"{prefix}_{a}") for a in "xyz"]
        return tuple(int(v) for v in vals) if all(v is not None for v in vals) else None  # type: ignore[return-value]

    grid, block = dim("launch__grid_dim"), dim("launch__block_dim")
    if grid is None or block is None:
        return None
    get = metrics.get
    return LaunchConfig(
        grid=grid, block=block,
        registers_per_thread=int(get("launch__registers_per_thread")) if get("launch__registers_per_thread") is not None else None,
        shared_mem_static=int(get("launch__shared_mem_per_block_static", 0)),
        shared_mem_dynamic=int(get("launch__shared_mem_per_block_dynamic", 0)),
    )


def _duration_ns(metrics: dict[str, float]) -> float:
    return float(metrics.get("gpu__time_duration.sum", 0.0))


def from_context(ctx: Any) -> list[KernelProfile]:
    """Kernels of an `ncu_report` context (every range, every action)."""
    kernels = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            metrics: dict[str, float] = {}
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                if metric is None or not metric.has_value() or "STRING" in str(metric.kind()).upper():
                    continue
                try:
                    metrics[name] = float(metric.as_double())
                except (TypeError, ValueError):
                    continue
            kernels.append(KernelProfile(name=str(action.name()), duration_ns=_duration_ns(metrics),
                                         launch=_launch(metrics), metrics=metrics, hot_lines=hot_lines(action)))
    return kernels


def hot_lines(action: Any, top: int = 10) -> list[HotLine]:
    """Per-source-line warp stall samples: PC-sampled stall metrics mapped through line info."""
    per_line: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name in action.metric_names():
        if not name.startswith(_PCSAMP) or name.endswith("_not_issued"):
            continue
        metric = action.metric_by_name(name)
        if metric is None or not metric.has_correlation_ids():
            continue
        reason = name[len(_PCSAMP):]
        pcs = metric.correlation_ids()
        for i in range(metric.num_instances()):
            samples = metric.as_uint64(i)
            if not samples:
                continue
            info = action.source_info(pcs.as_uint64(i))
            if info is None:
                continue
            per_line[(str(info.file_name()), int(info.line()))][reason] += samples
    total = sum(sum(r.values()) for r in per_line.values())
    if not total:
        return []
    rows = []
    for (file, line), reasons in per_line.items():
        count = sum(reasons.values())
        dominant = max(reasons.items(), key=lambda kv: kv[1])[0]
        rows.append(HotLine(file=file, line=line, stall_pct=100.0 * count / total, dominant_stall=dominant,
                            samples=int(count)))
    rows.sort(key=lambda h: -h.stall_pct)
    return rows[:top]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def from_raw_csv(text: str) -> list[KernelProfile]:
    """Kernels from ``ncu --csv --page raw --print-units base``: metric names, a units row, a row per kernel."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r and not r[0].startswith("==")]
    if len(rows) < 2:
        return []
    header, data = rows[0], rows[1:]
    if data and all(_number(c) is None for c in data[0][len(data[0]) // 2:] if c):  # the units row
        data = data[1:]
    kernels = []
    for row in data:
        record = dict(zip(header, row))
        metrics = {k: v for k, v in ((k, _number(x)) for k, x in record.items()) if v is not None}
        name = record.get("Kernel Name") or record.get("Function Name") or "kernel"
        kernels.append(KernelProfile(name=name, duration_ns=_duration_ns(metrics), launch=_launch(metrics),
                                     metrics=metrics))
    return kernels


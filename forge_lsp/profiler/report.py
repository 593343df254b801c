"""Read Nsight Compute reports into `KernelProfile`s.

NVIDIA's own reader first: the `ncu_report` module (PyPI package `ncu-report`, or the copy in
``<ncu>/extras/python``). Where it cannot be imported, ``ncu --import R --csv --page raw``.
"""

from __future__ import annotations

import csv
import importlib
import io
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

from ..sandbox import kill_tree, scrubbed_env, spawn
from .model import HotLine, KernelProfile, LaunchConfig

_PCSAMP = "smsp__pcsamp_warps_issue_stalled_"


def _reader_dirs(ncu: str | None) -> list[Path]:
    """Where ncu installs keep ``extras/python/ncu_report.py``: beside the ncu found, then known roots."""
    roots: list[Path] = []
    if ncu:
        roots += [Path(ncu).resolve().parent, Path(ncu).parent]
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    roots += sorted(cuda.glob("nsight-compute-*"), reverse=True)
    roots += sorted(Path("/opt/nvidia/nsight-compute").glob("*"), reverse=True)
    return [r / "extras" / "python" for r in roots if (r / "extras" / "python" / "ncu_report.py").is_file()]


def import_ncu_report(ncu: str | None = None) -> Any | None:
    """NVIDIA's report reader: the installed `ncu_report` package, else the copy an ncu install ships."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for extras in _reader_dirs(ncu):
        sys.path.insert(0, str(extras))
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(str(extras))
    return None


@dataclass
class Report:
    """What a report holds: its kernels, the device they ran on, and the source files ncu imported into it (by the
    path their line info names; ``--import-source yes``), so that hot lines can be read without the build's files."""

    kernels: list[KernelProfile]
    device_name: str = ""
    sources: dict[str, str] = dataclass_field(default_factory=dict)


def read_report(path: str | Path, *, ncu: str | None = None) -> list[KernelProfile]:
    return load_report(path, ncu=ncu).kernels


def load_report(path: str | Path, *, ncu: str | None = None) -> Report:
    """The report at `path`, by NVIDIA's reader; where it cannot be imported, by ``ncu --import`` (its raw page: the
    kernels' metrics and the device's name, no source)."""
    module = import_ncu_report(ncu)
    if module is not None:
        ctx = module.load_report(str(path))
        return Report(from_context(ctx), *_device_and_sources(ctx))
    if ncu is None:
        raise RuntimeError("cannot read an ncu report: the ncu_report module is not importable and ncu was not found")
    text = _ncu_import_csv(ncu, Path(path))
    rows = csv.DictReader(line for line in io.StringIO(text) if not line.startswith("=="))
    device = next((name for row in rows if (name := row.get(_DEVICE_NAME))), "")  # the units row has none
    return Report(from_raw_csv(text), device)


_DEVICE_NAME = "device__attribute_display_name"


def _device_and_sources(ctx: Any) -> tuple[str, dict[str, str]]:
    """The device the report's kernels ran on, and the text of every source file imported into it (files whose
    content was not imported, such as an NVRTC program, are left out)."""
    device, sources = "", {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            metric = action.metric_by_name(_DEVICE_NAME)
            if not device and metric is not None and metric.has_value():
                device = str(metric.as_string())
            sources.update({str(k): str(v) for k, v in dict(action.source_files()).items() if v})
    return device, sources


def _ncu_import_csv(ncu: str, path: Path, timeout: float = 300.0) -> str:
    """`ncu --import PATH --csv --page raw`'s stdout, run as a child the sandbox owns (its tree ends with
    this process, on a timeout and on any exception here); stderr apart, so warnings never reach the CSV."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = spawn(
            [ncu, "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"],
            env=scrubbed_env(),
            cwd=path.parent,
            stdout=out,
            stderr=err,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"ncu --import did not finish in {timeout:.0f} s") from None
        finally:
            kill_tree(proc, wait=5.0)
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"ncu --import failed (exit {code}): {err.read().decode('utf-8', 'replace')[-2000:]}")
        out.seek(0)
        return out.read().decode("utf-8", "replace")


def _launch(metrics: dict[str, float]) -> LaunchConfig | None:
    def dim(prefix: str) -> tuple[int, int, int] | None:
        x, y, z = (metrics.get(f"{prefix}_{a}") for a in "xyz")
        return (int(x), int(y), int(z)) if x is not None and y is not None and z is not None else None

    grid, block = dim("launch__grid_dim"), dim("launch__block_dim")
    if grid is None or block is None:
        return None
    get = metrics.get
    registers = get("launch__registers_per_thread")
    return LaunchConfig(
        grid=grid,
        block=block,
        registers_per_thread=int(registers) if registers is not None else None,
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
            kernels.append(
                KernelProfile(
                    name=str(action.name()),
                    duration_ns=_duration_ns(metrics),
                    launch=_launch(metrics),
                    metrics=metrics,
                    hot_lines=hot_lines(action),
                )
            )
    return kernels


_GLOBAL_SECTORS = "memory_l2_theoretical_sectors_global"
_SHARED_EXCESS = "derived__memory_l1_wavefronts_shared_excessive"


def _per_pc(action: Any, name: str) -> dict[int, float]:
    """An instanced source-level metric as {pc: value} (empty when the report lacks it)."""
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    pcs = metric.correlation_ids()
    return {int(pcs.as_uint64(i)): float(metric.as_double(i)) for i in range(metric.num_instances())}


def hot_lines(action: Any, top: int = 12) -> list[HotLine]:
    """Per-source-line data of one kernel: PC-sampled warp stalls, global sectors vs. ideal, shared
    wavefronts beyond one per instruction, register live spans; SASS PCs mapped through line info.

    Keeps the `top` lines by stall samples plus every line with excess memory traffic or long
    register spans (the rules point at those), hottest first.
    """
    stalls: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    where: dict[int, tuple[str, int] | None] = {}

    def line_of(pc: int) -> tuple[str, int] | None:
        if pc not in where:
            info = action.source_info(pc)
            where[pc] = (str(info.file_name()), int(info.line())) if info is not None and info.line() else None
        return where[pc]

    for name in action.metric_names():
        if not name.startswith(_PCSAMP) or name.endswith("_not_issued"):
            continue
        reason = name[len(_PCSAMP) :]
        for pc, samples in _per_pc(action, name).items():
            if samples and (key := line_of(pc)) is not None:
                stalls[key][reason] += samples
    counters: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for field, values in (
        ("global_sectors", _per_pc(action, _GLOBAL_SECTORS)),
        ("global_sectors_ideal", _per_pc(action, _GLOBAL_SECTORS + "_ideal")),
        ("shared_excess_wavefronts", _per_pc(action, _SHARED_EXCESS)),
    ):
        for pc, value in values.items():
            if value and (key := line_of(pc)) is not None:
                counters[key][field] += value
    pcs = sorted(_per_pc(action, "inst_executed"))
    spans = register_spans([str(action.sass_by_pc(pc)) for pc in pcs])
    for pc, span in zip(pcs, spans, strict=True):
        if span and (key := line_of(pc)) is not None:
            counters[key]["register_span"] += span

    total = sum(sum(r.values()) for r in stalls.values())
    rows = []
    for key in set(stalls) | set(counters):
        reasons = stalls.get(key, {})
        count = sum(reasons.values())
        c = counters.get(key, {})
        rows.append(
            HotLine(
                file=key[0],
                line=key[1],
                stall_pct=100.0 * count / total if total else 0.0,
                dominant_stall=max(reasons.items(), key=lambda kv: kv[1])[0] if count else "",
                samples=int(count),
                global_sectors=c.get("global_sectors", 0.0),
                global_sectors_ideal=c.get("global_sectors_ideal", 0.0),
                shared_excess_wavefronts=c.get("shared_excess_wavefronts", 0.0),
                register_span=int(c.get("register_span", 0)),
            )
        )
    rows.sort(key=lambda h: (-h.stall_pct, h.file, h.line))
    keep = rows[:top]
    for rank in (
        lambda h: h.global_sectors - h.global_sectors_ideal,
        lambda h: h.shared_excess_wavefronts,
        lambda h: h.register_span,
    ):
        keep += [h for h in sorted(rows, key=rank, reverse=True)[:3] if rank(h) > 0 and h not in keep]
    return keep


_REG = re.compile(r"\bR(\d+)(?:\.(64|128))?\b")
# SASS opcodes whose first operand is not a destination register.
_NO_DEST = re.compile(
    r"^(?:ST|STG|STS|STL|STAS|RED|REDG|REDAS|BRA|BRX|JMP|EXIT|RET|CALL|BAR|BSYNC|BSSY|WARPSYNC|"
    r"MEMBAR|FENCE|NOP|YIELD|CCTL|ERRBAR|DEPBAR|SYNCS|UBLKCP|UTMA)\b"
)


def _regs(operand: str, width_hint: int = 1) -> list[int]:
    regs: list[int] = []
    for m in _REG.finditer(operand):
        n = {"64": 2, "128": 4}.get(m.group(2) or "", width_hint)
        regs += range(int(m.group(1)), int(m.group(1)) + n)
    return regs


def register_spans(sass: list[str]) -> list[int]:
    """For each instruction (in address order), the summed live range of the registers it defines.

    A value lives from its definition to its last read before the register is written again;
    the range is counted in instructions. Long spans on a line mean that line's values occupy
    registers for long, which is what limits occupancy under register pressure. Straight-line
    approximation: branches are not followed (unrolled code, the usual culprit, has none).
    """
    defs: list[list[int]] = []
    uses: list[list[int]] = []
    for text in sass:
        text = re.sub(r"^\s*@!?U?P\w+\s+", "", text.strip())
        opcode, _, rest = text.partition(" ")
        operands = [o.strip() for o in rest.split(",")] if rest else []
        width = 4 if ".128" in opcode else 2 if ".64" in opcode else 1
        if operands and not _NO_DEST.match(opcode) and _REG.match(operands[0]):
            defs.append(_regs(operands[0], width if opcode.startswith(("LD", "LDG", "LDS", "LDL")) else 1))
            uses.append([r for o in operands[1:] for r in _regs(o)])
        else:
            defs.append([])
            uses.append([r for o in operands for r in _regs(o, width if opcode.startswith("ST") else 1)])
    spans = [0] * len(sass)
    open_def: dict[int, int] = {}  # register -> index of its live definition
    last_use: dict[int, int] = {}
    for i, (d, u) in enumerate(zip(defs, uses, strict=True)):
        for r in u:
            if r in open_def:
                last_use[r] = i
        for r in d:
            if r in open_def and r in last_use:
                spans[open_def[r]] += last_use[r] - open_def[r]
            open_def[r], last_use[r] = i, i
            last_use.pop(r)
    for r, start in open_def.items():
        if r in last_use:
            spans[start] += last_use[r] - start
    return spans


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
    if data and all(_number(c) is None for c in data[0][len(data[0]) // 2 :] if c):  # the units row
        data = data[1:]
    kernels = []
    for row in data:
        record = dict(zip(header, row, strict=False))
        metrics = {k: v for k, v in ((k, _number(x)) for k, x in record.items()) if v is not None}
        name = record.get("Kernel Name") or record.get("Function Name") or "kernel"
        kernels.append(
            KernelProfile(
                name=name, duration_ns=_duration_ns(metrics), launch=_launch(metrics), metrics=metrics, reader="csv"
            )
        )
    return kernels

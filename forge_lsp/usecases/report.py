"""Use case: one self-contained HTML report of a run (`forge report`, the editor's report page).

`run_report_html` gathers a run from the workspace's run store (`forge_lsp.report.gather`), with the
device's roofline ceilings where they are known and, when the run optimized a module of a model-wide run,
that model-wide result; `write_run_report` writes it to ``.forge/reports/<run>.html``.
`model_wide_report_html` / `write_model_wide_report` do the same for a model-wide result
(``.forge/model_wide/<stamp>/result.json``): its hot-spot table, its end-to-end check and each module's run,
whose own reports are written beside it.

The run store is only read: a run still being written is reported as it stands.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..agent.store import RunStore
from ..profiler.model import DevicePeaks
from ..report import ModelWideModule, ModelWideSection, ReportData, gather, render_html
from ..sandbox import default_cache_dir
from .common import UseCaseError
from .model_wide import ModelWideResult, load_model_wide_results
from .runs import workspace_store

LATEST = "latest"


@dataclass
class ReportFile:
    path: Path
    run_id: str  # the run, or the model-wide result's stamp
    bytes: int
    seconds: float  # to gather and render
    candidates: int
    in_progress: bool
    also: list[Path]  # other reports written with it (a model-wide result's module runs)


def reports_dir(workspace: Path) -> Path:
    return Path(workspace) / ".forge" / "reports"


def _store(workspace: Path) -> RunStore:
    store = workspace_store(Path(workspace))
    if store is None:
        raise UseCaseError(
            f"no runs in {Path(workspace).resolve()} (no .forge/runs.sqlite): run `forge optimize` first"
        )
    return store


def _run_id(store: RunStore, run: str) -> str:
    from .runs import resolve_run

    return resolve_run(store, run)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "device"


def device_peaks_for(device_name: str, device: str, cache_dir: Path | None = None) -> tuple[DevicePeaks | None, str]:
    """The roofline ceilings of the device a run ran on: measured (forge's peaks cache), else the datasheet;
    None with the reason on the CPU or for an unknown device."""
    if not device_name or device.startswith("cpu") or device_name.lower() == "cpu":
        return None, "a CPU run has no roofline ceilings (they are measured on NVIDIA GPUs)"
    folder = (cache_dir or default_cache_dir()) / "peaks"
    cached = sorted(folder.glob(f"{_slug(device_name)}__*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in cached:
        try:
            return DevicePeaks.model_validate_json(path.read_text()), f"measured ({path.name})"
        except (OSError, ValueError):
            continue
    from ..profiler.peaks import datasheet_peaks

    peaks = datasheet_peaks(device_name)
    if peaks is None:
        return None, f"no measured or datasheet peaks for {device_name}"
    return peaks, "datasheet (not measured on this machine yet)"


def _module_row(module: Any, store: RunStore | None) -> ModelWideModule:
    row = ModelWideModule(
        name=module.name,
        cls=module.cls,
        total_pct=module.total_pct,
        run_id=module.run_id,
        speedup=module.speedup,
        status=module.status,
        reason=module.reason,
        instances=list(module.instances),
        carried=list(module.carried),
        not_carried=list(module.not_carried),
    )
    if store is not None and module.run_id:
        try:
            run = store.get_run(module.run_id)
        except KeyError:
            return row
        cands = store.candidates(run.id)
        best = next((c for c in cands if c.id == run.best_candidate), None)
        row.run_status, row.run_candidates = run.status, len(cands)
        row.run_best = best.speedup if best else None
    return row


def model_wide_section(result: ModelWideResult, store: RunStore | None) -> ModelWideSection:
    report = result.report
    hot = [
        {
            "name": k.name,
            "key": k.key,
            "file": k.file,
            "line": k.line,
            "library": k.library,
            "instances": k.instances,
            "calls": k.calls,
            "total_ms": k.total_ms,
            "total_pct": k.total_pct,
            "self_ms": k.self_ms,
            "self_pct": k.self_pct,
        }
        for k in sorted(report.classes, key=lambda k: -k.total_pct)[:25]
    ]
    return ModelWideSection(
        stamp=result.folder.name if result.folder else "",
        entry=report.entry,
        model=report.model,
        device=report.device_name or report.device,
        timer=report.timer,
        model_ms=report.model_ms,
        eager_ms=report.eager_ms,
        iterations=report.iterations,
        hot_classes=hot,
        modules=[_module_row(m, store) for m in result.modules],
        check=result.check.model_dump(mode="json") if result.check is not None else None,
        notes=list(result.notes),
        patch_file=str(result.patch_file) if result.patch_file else None,
        created=result.created,
        state=result.state,
        outcome=result.outcome,
    )


def _model_wide_of(workspace: Path, run_id: str) -> ModelWideResult | None:
    return next(
        (r for r in load_model_wide_results(Path(workspace)) if any(m.run_id == run_id for m in r.modules)), None
    )


def run_report_data(workspace: Path, run: str = LATEST, cache_dir: Path | None = None) -> ReportData:
    """One run (an id, a unique prefix, or "latest") as report data."""
    store = _store(workspace)
    try:
        run_id = _run_id(store, run)
        section = None
        mw = _model_wide_of(workspace, run_id)
        if mw is not None:
            section = model_wide_section(mw, store)
        data = gather(store, run_id, model_wide=section, forge_version=__version__)
        peaks, note = device_peaks_for(data.device, data.device_type, cache_dir)
        if peaks is None and not data.device:
            note = "no candidate was evaluated, so the device is not known"
        data.peaks, data.peaks_note = peaks, note
        return data
    finally:
        store.close()


def run_report_html(workspace: Path, run: str = LATEST, cache_dir: Path | None = None) -> tuple[str, str]:
    """(run id, the page)."""
    data = run_report_data(workspace, run, cache_dir)
    return data.run_id, render_html(data)


def write_run_report(
    workspace: Path, run: str = LATEST, out: Path | None = None, cache_dir: Path | None = None
) -> ReportFile:
    """Write the report of one run (default ``.forge/reports/<run>.html``)."""
    started = time.perf_counter()
    data = run_report_data(workspace, run, cache_dir)
    html = render_html(data)
    path = out or reports_dir(workspace) / f"{data.run_id}.html"
    _write(path, html)
    return ReportFile(
        path=path,
        run_id=data.run_id,
        bytes=len(html.encode()),
        seconds=time.perf_counter() - started,
        candidates=len(data.candidates),
        in_progress=data.in_progress,
        also=[],
    )


def _write(path: Path, html: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)


def find_model_wide(workspace: Path, stamp: str = LATEST) -> ModelWideResult:
    results = load_model_wide_results(Path(workspace))
    if not results:
        raise UseCaseError(
            f"no model-wide result in {Path(workspace).resolve()}/.forge/model_wide/: run `forge optimize ENTRY --model-wide`"
        )
    if stamp == LATEST:
        return results[0]
    found = [r for r in results if r.folder is not None and r.folder.name.startswith(stamp)]
    if len(found) != 1:
        raise UseCaseError(
            f"no model-wide result {stamp!r}" if not found else f"model-wide result {stamp!r} is ambiguous"
        )
    return found[0]


def model_wide_report_data(workspace: Path, stamp: str = LATEST) -> ReportData:
    """A model-wide result as report data: its section, no run of its own."""
    result = find_model_wide(workspace, stamp)
    store = workspace_store(Path(workspace))
    try:
        section = model_wide_section(result, store)
    finally:
        if store is not None:
            store.close()
    return ReportData(
        generated=time.time(),
        forge_version=__version__,
        run_id="",
        status="done" if result.state == "finished" else "interrupted",
        message=f"{len(section.modules)} hot modules; model-wide result {section.stamp}: {result.outcome.replace('_', ' ')}",
        in_progress=False,
        task_path=section.entry,
        model_class=section.model,
        created=result.created,
        updated=result.created,
        reference=0,
        texts=[""],
        candidates=[],
        calls=[],
        rounds=[],
        over_time=[],
        cost=[],
        model_wide=section,
    )


def model_wide_report_html(workspace: Path, stamp: str = LATEST) -> tuple[str, str]:
    data = model_wide_report_data(workspace, stamp)
    assert data.model_wide is not None
    return data.model_wide.stamp, render_html(data, title=f"forge model-wide report {data.model_wide.stamp}")


def write_model_wide_report(
    workspace: Path, stamp: str = LATEST, out: Path | None = None, cache_dir: Path | None = None
) -> ReportFile:
    """Write a model-wide result's report, and beside it the report of each module's run (linked from it)."""
    started = time.perf_counter()
    data = model_wide_report_data(workspace, stamp)
    section = data.model_wide
    assert section is not None
    html = render_html(data, title=f"forge model-wide report {section.stamp}")
    path = out or reports_dir(workspace) / f"model-wide-{section.stamp}.html"
    _write(path, html)
    also = []
    for module in section.modules:
        if module.run_id and module.run_status is not None:
            also.append(
                write_run_report(workspace, module.run_id, path.parent / f"{module.run_id}.html", cache_dir).path
            )
    return ReportFile(
        path=path,
        run_id=section.stamp,
        bytes=len(html.encode()),
        seconds=time.perf_counter() - started,
        candidates=0,
        in_progress=False,
        also=also,
    )

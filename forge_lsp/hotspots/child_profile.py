"""The hot-spot child's run: the whole model under ``torch.profiler`` (child process only: `runner`).

`run` wraps the module constructors and calls (`child_source`, `child_observe`), builds and warms up a function
entry and times its forward, then profiles its forwards, or runs a script entry whole under the profiler (each
model's first forward its warm-up; a model the script runs once is run again after it on a clone of that call,
`_run_again`, so that its figures are not its first call's). On the CPU, torch's threads are first fitted to the
cores the child gets (`child.fit_cpu_threads`). It then attributes the time (`child_attribute`), ranks the targets
and saves the hot instances' captures (`child_capture`). `Progress` writes each step to the request's progress
file, one JSON line per step.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..child import fit_cpu_threads, run_script_as_main
from .child_attribute import attribute
from .child_capture import save_captures
from .child_entry import SCRIPT, build_entry, entry_script, sync
from .child_observe import RANGE, Observer
from .child_source import CtorRecorder
from .report import HotspotReport, rank_targets
from .requests import HotspotRequest


def _run_again(
    torch: Any, observer: Observer, keys: list[int], times: int, device: str, progress: Progress
) -> dict[int, str | None]:
    """Run each of a script's once-run models again `times` times after the script, on a clone of its first call's
    inputs: key -> None when it ran, else why not (said, never raised: the script's own forward still counts)."""
    observer.capturing = False
    said: dict[int, str | None] = {}
    for n, k in enumerate(keys, 1):
        if k not in observer.first_calls:
            said[k] = observer.replay_skips.get(k, "its first call's inputs were not kept")
            continue
        progress("running the model again", n, len(keys))
        try:
            observer.replay(k, times)
            sync(torch, device)
            said[k] = None
        except Exception as exc:  # noqa: BLE001 - a forward that cannot run twice (state the script consumed)
            said[k] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    observer.first_calls.clear()
    return said


class Progress:
    def __init__(self, path: str | Path | None) -> None:
        self.path = path

    def __call__(self, step: str, done: int | None = None, of: int | None = None) -> None:
        if not self.path:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "done": done, "of": of, "t": time.time()}) + "\n")


def run(req: HotspotRequest) -> HotspotReport:
    t_start = time.time()
    progress = Progress(req.progress)
    entry = req.entry
    device = req.device
    workspace = req.workspace
    progress("importing torch")
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ctors = CtorRecorder(torch)
    ctors.install()
    observer = Observer(
        torch,
        capture_calls=req.capture_calls,
        call_limit=req.capture_call_mb << 20,
        total_limit=req.capture_total_mb << 20,
    )
    observer.install()
    report = HotspotReport(entry=entry.text, device=device)
    if device.startswith("cuda"):
        report.device_name = torch.cuda.get_device_name(torch.device(device))
    share = fit_cpu_threads(torch) if device == "cpu" else None
    if share is not None and share.says():
        report.notes.append(share.says())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    report.timer = "device" if device.startswith("cuda") else "cpu"
    warmup, iters = req.warmup, req.iterations

    if entry.kind == "function":
        progress("building the model")
        model, args, call_kwargs = build_entry(torch, entry, device, workspace)
        report.model = type(model).__name__
        with torch.no_grad():
            for i in range(warmup):
                progress("warming up", i + 1, warmup)
                model(*args, **call_kwargs)
            sync(torch, device)
            observer.capturing = False
            t0 = time.perf_counter()
            for _ in range(3):  # the forward's own wall time, for the share the device was busy
                model(*args, **call_kwargs)
            sync(torch, device)
            report.eager_ms = (time.perf_counter() - t0) / 3 * 1000
            observer.profiling = True
            t0 = time.perf_counter()
            with profile(activities=activities) as prof:
                for i in range(iters):
                    progress("profiling", i + 1, iters)
                    model(*args, **call_kwargs)
                sync(torch, device)
            report.wall_ms = (time.perf_counter() - t0) * 1000
        report.warmup, report.iterations = warmup, iters
        roots = {id(model): model}
        counted = {id(model): iters}
        excluded: set[str] = set()
    else:
        progress("running the script")
        observer.profiling = True
        observer.keep_first = True
        script = entry_script(entry)
        SCRIPT["path"] = script.resolve()
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            run_script_as_main(script, entry.argv)
            sync(torch, device)
            report.wall_ms = (time.perf_counter() - t0) * 1000
            if not observer.roots:
                raise SystemExit(f"the script {entry.text} ran no nn.Module")
            forwards = dict(observer.roots)  # each model's forwards in the script itself
            once = [k for k, n in forwards.items() if n == 1]
            replayed = _run_again(torch, observer, once, warmup + iters, device, progress)
        roots = {k: observer.modules[k] for k in observer.roots}
        excluded = {f"{RANGE}{k}#1" for k, n in forwards.items() if n > 1}  # each model's first forward
        counted = {k: n - 1 if n > 1 else n for k, n in forwards.items()}
        for k in once:
            if replayed.get(k) is None:  # run again: its first forward and the warm-up ones are left out
                excluded |= {f"{RANGE}{k}#{i}" for i in range(1, 2 + warmup)}
                counted[k] = iters
            else:  # not run again (or failed part way): its one forward is all there is
                excluded |= {f"{RANGE}{k}#{i}" for i in range(2, observer.roots[k] + 1)}
        for k in once:
            name = type(observer.modules[k]).__name__
            if replayed.get(k) is None:
                report.notes.append(
                    f"the script ran {name} once: that forward (its first, capture included) is left out, and the "
                    f"same call was run again after the script {warmup + iters} times ({warmup} warm-up, {iters} "
                    "profiled), under the grad and autocast state it had; its buffers were put back"
                )
            else:
                report.notes.append(
                    f"the script ran {name} once and it could not be run again ({replayed[k]}): its one forward is "
                    "profiled with no warm-up, capture included"
                )
    observer.uninstall()
    progress("attributing time")
    keys = attribute(torch, prof, report, observer, roots, counted, excluded, workspace)
    if report.timer == "device" and report.eager_ms and report.model_ms < 0.7 * report.eager_ms:
        report.notes.append(
            f"the GPU ran kernels for {report.model_ms:.2f} of the {report.eager_ms:.2f} ms a forward takes: the rest "
            "it waited for the host to launch them (launch-bound); fewer, larger kernels or a CUDA graph help there"
        )
    report.targets = rank_targets(report, req.top)
    progress("saving captures")
    save_captures(torch, req, report, observer, ctors, workspace, keys)
    report.seconds = time.time() - t_start
    return report

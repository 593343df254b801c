"""The hot-spot child's run: the whole model under ``torch.profiler`` (child process only: `runner`).

`run` wraps the module constructors and calls (`child_source`, `child_observe`), builds and warms up a function
entry and times its forward, then profiles its forwards, or runs a script entry whole under the profiler (each
model's first forward its warm-up). It then attributes the time (`child_attribute`), ranks the targets and saves
the hot instances' captures (`child_capture`). `Progress` writes each step to the request's progress file, one
JSON line per step.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..child import run_script_as_main
from .child_attribute import attribute
from .child_capture import save_captures
from .child_entry import SCRIPT, build_entry, entry_script, sync
from .child_observe import RANGE, Observer
from .child_source import CtorRecorder
from .report import HotspotReport, rank_targets
from .requests import HotspotRequest


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
        script = entry_script(entry)
        SCRIPT["path"] = script.resolve()
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            run_script_as_main(script, entry.argv)
            sync(torch, device)
        report.wall_ms = (time.perf_counter() - t0) * 1000
        if not observer.roots:
            raise SystemExit(f"the script {entry.text} ran no nn.Module")
        roots = {k: observer.modules[k] for k in observer.roots}
        excluded = {f"{RANGE}{k}#1" for k, n in observer.roots.items() if n > 1}  # each model's first forward
        counted = {k: n - 1 if n > 1 else n for k, n in observer.roots.items()}
        if any(n == 1 for n in observer.roots.values()):
            report.notes.append("a model ran only once: its one forward is profiled with no warm-up, capture included")
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

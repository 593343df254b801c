"""Whole models: where an unmodified model spends its time, and its hot modules' real inputs.

`parse_entry` reads an entry (a script, or a function returning ``(model, args)``); `find_hotspots` runs it
in a child process under ``torch.profiler`` and returns a `HotspotReport` (time by module instance, class and
op, per forward) with the hot instances' captures; `extract_tasks` writes KernelBench-format tasks from
those captures, so that ``forge eval`` and ``forge optimize`` take them unchanged.
"""

from .entry import Entry, EntryError, parse_entry
from .report import Capture, HotspotReport, Instance, ModuleClass, Op, TensorSpec
from .run import HotspotError, HotspotOptions, find_hotspots, latest_report

__all__ = [
    "Capture",
    "Entry",
    "EntryError",
    "HotspotError",
    "HotspotOptions",
    "HotspotReport",
    "Instance",
    "ModuleClass",
    "Op",
    "TensorSpec",
    "find_hotspots",
    "latest_report",
    "parse_entry",
]

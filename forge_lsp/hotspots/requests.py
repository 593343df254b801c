"""The requests of the whole-model children, each defined once for both sides (`forge_lsp.child`).

`run.find_hotspots` writes a `HotspotRequest` for ``python -m forge_lsp.hotspots.runner``; `verify.check_model` a
`ModelCheckRequest` for ``python -m forge_lsp.hotspots.model_check``. Every field is the parent's to give: the
knobs' defaults are the parent's API (`HotspotOptions`, `check_model`'s keywords), never restated here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..child import ChildRequest
from .entry import Entry


class HotspotRequest(ChildRequest):
    """Run the entry with every module call observed; ``report.json`` (or ``error.txt``) and the hot instances'
    captures go to `out`, one JSON line per step to `progress`."""

    entry: Entry
    device: str
    workspace: Path
    out: Path
    progress: Path
    warmup: int  # forwards before the profiled ones (function entries); their first calls are captured
    iterations: int  # profiled forwards (function entries)
    top: int  # classes to capture and rank as targets
    classes: list[str]  # more classes to capture, by key or name
    capture_calls: int  # calls captured per hot instance
    capture_call_mb: int  # largest inputs of one call that are captured
    capture_total_mb: int  # all captures of one run


class ModelCheckRequest(ChildRequest):
    """Check the whole model end to end with `patches` in place; ``result.json`` (or ``error.txt``) goes to `out`."""

    entry: Entry
    device: str
    workspace: Path
    out: Path
    patches: list[dict[str, Any]]  # as `patching.install` takes them
    tolerances: dict[str, list[float]]  # output dtype -> [atol, rtol]
    reps: int  # pairs timed per round
    timing_budget_s: float
    model_modes: list[str]  # whole-forward modes to try on top of the kept replacements
    blocks: list[str]  # the hot blocks' instances a "blocks" mode compiles one by one
    root: str | None  # a script entry: the class name of its model, whose first forward is taken

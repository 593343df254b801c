"""The whole model, end to end, with verified candidates in place of its hot modules (`check_model`).

Runs ``python -m forge_lsp.hotspots.model_check`` through the sandbox (see there for what it does) and reads
its answer as a `ModelCheck`. `write_patch_file` writes what a user imports to get the same replacements.
"""

from __future__ import annotations

import pprint
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..child import CpuShare
from ..sandbox import child_env, default_cache_dir, run_sandboxed
from .entry import Entry
from .requests import ModelCheckRequest


class Reverted(BaseModel):
    cls: str
    why: str


class ModelCheck(BaseModel):
    kept: list[str] = []  # class keys whose candidates stay in place
    reverted: list[Reverted] = []
    #: per output: ok, dtype, shape, max_abs, atol, rtol; for a bf16/fp16 output outside the tolerance, `fp32`: its
    #: error and eager's against the model run in fp32 (err_max, err_mean, eager_err_max, eager_err_mean, factor, ok)
    outputs: list[dict[str, Any]] = []
    before_ms: float = 0.0
    after_ms: float = 0.0
    speedup: float | None = None
    ci: list[float] | None = None
    reps: int = 0
    #: the kept module replacements alone (the fields above are for the configuration chosen in the end)
    modules_speedup: float | None = None
    modules_ci: list[float] | None = None
    #: the whole forward compiled on top of them, per mode: mode, ok, why, compile_s, before_ms, after_ms,
    #: speedup, ci, outputs; and the mode chosen, when one beat the replacements alone (its interval above 1)
    model_modes: list[dict[str, Any]] = []
    model_mode: str | None = None
    #: the chosen mode was timed without the replacements, and beat both them alone and the mode on top of them
    model_mode_alone: bool = False
    #: for a chosen "blocks" mode whose every-block compile changed the outputs: the blocks it compiles (the rest eager)
    model_blocks: list[str] | None = None
    #: why the model's bf16/fp16 outputs could not also be judged against the model run in fp32 (when it could not)
    fp32_note: str | None = None
    #: on the CPU: the threads the check ran with, fitted to the cores it got (`child.fit_cpu_threads`)
    cpu: CpuShare | None = None
    #: "kept" (replacements or a mode decidedly faster), "nothing_kept" (none faster, equal within 1%, or they
    #: changed the outputs), "inconclusive" (the 99% interval still held 1, wider, at the time budget: nothing kept)
    outcome: str = "nothing_kept"
    #: the decision on the replacements (`decide.Decision`): outcome, speedup, ci, pairs, rounds, noise_pct, outliers
    decision: dict[str, Any] | None = None

    @property
    def outputs_match(self) -> bool:
        return all(o.get("ok") for o in self.outputs)


class ModelCheckError(RuntimeError):
    pass


def check_model(
    entry: Entry,
    workspace: Path,
    device: str,
    patches: list[dict[str, Any]],
    tolerances: dict[str, list[float]],
    *,
    reps: int = 30,
    timing_budget_s: float = 30.0,
    timeout: float = 1800.0,
    cancel: threading.Event | None = None,
    cache_dir: Path | None = None,
    python: str | None = None,
    model_modes: tuple[str, ...] = (),
    root: str | None = None,
    blocks: tuple[str, ...] = (),
) -> ModelCheck:
    """Runs `model_check` in a sandboxed child. `model_modes`: torch.compile modes to try on the whole forward,
    the kept replacements in place (none: the replacements only); `blocks`: the hot block classes' instances (by
    their names in the hot-spot report) a "blocks" mode compiles one by one. `root`: for a script entry, the class name of
    its model (the hot-spot report's `model`): the check takes that model's first forward in the script."""
    import sys

    out = (
        workspace
        / ".forge"
        / "model_wide"
        / "checks"
        / (time.strftime("%Y%m%d-%H%M%S") + f"-{time.monotonic_ns() % 10**6:06d}")
    )
    out.mkdir(parents=True, exist_ok=True)
    request = ModelCheckRequest(
        entry=entry,
        device=device,
        workspace=workspace,
        out=out,
        patches=patches,
        tolerances=tolerances,
        reps=reps,
        timing_budget_s=timing_budget_s,
        model_modes=list(model_modes),
        blocks=list(blocks),
        root=root,
    ).write(out / "request.json")
    env = child_env(device, Path(cache_dir or default_cache_dir()))
    cmd = [python or sys.executable, "-m", "forge_lsp.hotspots.model_check", str(request)]
    run = run_sandboxed(cmd, env=env, cwd=workspace, timeout=timeout, cancel=cancel)
    if run.cancelled:
        raise ModelCheckError("cancelled")
    if run.timed_out:
        raise ModelCheckError(f"the end-to-end check did not finish within {timeout:g} s")
    if (out / "error.txt").exists():
        raise ModelCheckError(f"the end-to-end check failed: {(out / 'error.txt').read_text().strip()}")
    if run.returncode != 0 or not (out / "result.json").exists():
        raise ModelCheckError(f"the end-to-end check exited with code {run.returncode}: {run.output.strip()[-2000:]}")
    return ModelCheck.model_validate_json((out / "result.json").read_text())


PATCH_FILE = '''"""Verified replacements for the hot modules of `{entry}` (forge optimize --model-wide, {stamp}).

    import forge_patch
    forge_patch.apply(model)   # the model the entry builds, on its device and in its dtype

Each replaced instance keeps its parameters, and its candidate computes with those same tensors; calls shaped
like the captured ones, inside the domain each candidate was verified on (its patch's "domain": dtypes, sizes,
layouts, stream) and not recorded by autograd go to the candidate, any other call to the original.{mode_doc}
`remove(model)` undoes it. Needs forge-lsp importable.
"""

import pathlib

from forge_lsp.hotspots.patching import compile_model, install, uncompile_model, uninstall

HERE = pathlib.Path(__file__).resolve().parent
PATCHES = {patches}
#: the whole-model mode on top of the replacements (a torch.compile mode, channels_last, cuda_graphs, blocks, or
#: several joined with "+"; None: none), and the instances a "blocks" mode compiles one by one
MODEL_MODE = {mode!r}
BLOCKS = {blocks!r}


def apply(model):
    names = install(model, [dict(p, source_file=str(HERE / p["source_file"])) for p in PATCHES])
    if MODEL_MODE is not None:
        compile_model(model, MODEL_MODE, BLOCKS)
    return names


def remove(model):
    uncompile_model(model)
    uninstall(model)
'''


def write_patch_file(
    folder: Path,
    entry: Entry,
    patches: list[dict[str, Any]],
    model_mode: str | None = None,
    blocks: tuple[str, ...] = (),
) -> Path:
    """``forge_patch.py`` and the candidates it installs, in `folder`; `model_mode`: the whole-model mode then put on
    top (`patching.compile_model`; `blocks` for a "blocks" mode). Each patch goes in as it is, its ``domain`` (what its candidate was
    verified on, which `patching.install` keeps its calls inside) included."""
    folder.mkdir(parents=True, exist_ok=True)
    local: list[dict[str, Any]] = []
    for p in patches:
        src = Path(p["source_file"])
        name = f"candidate_{len(local)}_{src.stem}.py"
        (folder / name).write_text(src.read_text())
        local.append(dict(p, source_file=name))
    path = folder / "forge_patch.py"
    path.write_text(
        PATCH_FILE.format(
            entry=entry.text,
            stamp=time.strftime("%Y-%m-%d %H:%M"),
            patches=pprint.pformat(local, width=110, sort_dicts=False),
            mode=model_mode,
            blocks=list(blocks) if model_mode and "blocks" in model_mode.split("+") else [],
            mode_doc=(
                f" Then the model is put in the whole-model mode {model_mode!r} in place,"
                " which the end-to-end check found faster."
                if model_mode
                else ""
            ),
        )
    )
    return path

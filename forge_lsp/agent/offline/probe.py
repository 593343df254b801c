"""Describe a task's FX graph, in a subprocess, as plain JSON.

    python -m forge_lsp.agent.offline.probe REQUEST.json

The caller (`probe_task`, or `probe_tasks` for several tasks in one child; used by the CLI and
the language server) never imports the task module or torch: it writes a request, runs this
module in a child process with `forge_lsp.sandbox` (the scrubbed worker environment with CUDA
hidden, as tracing needs no GPU; its own session; a timeout; a cancel event that kills its tree at
once), and reads the JSON answer.
The child loads the task with the engine's `exec_module`, builds ``Model(*get_init_inputs())``,
traces it with ``torch.fx.symbolic_trace`` and, when it can, propagates shapes with fake
tensors (no real compute). A model that does not trace is reported with ``traced: false``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ...child import ChildRequest
from ...engine.task import Task
from ...sandbox import child_env, default_cache_dir, run_sandboxed

_EXCERPT = 4000


class ProbeRequest(ChildRequest):
    """What the probe child traces: each task's model, its graph written as one `ProbeReport` per task to `out`."""

    out: Path
    tasks: list[Task]


class ProbeNode(BaseModel):  # type: ignore[no-redef]  # pydantic's mypy plugin clashes with a field named kwargs
    """One FX node. `args`/`kwargs` hold constants, ``{"node": name}`` for node inputs,
    ``{"dtype": "float32"}`` for dtypes and ``{"repr": text}`` for anything else."""

    name: str
    op: str
    target: str
    kind: str | None = None
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    users: list[str] = []
    shape: list[int] | None = None
    dtype: str | None = None
    module: dict[str, Any] | None = None  # call_module: {"type", "attrs", "params"}
    attr: dict[str, Any] | None = None  # get_attr: {"shape", "dtype", "kind": parameter|buffer|tensor}


class ProbeReport(BaseModel):
    ok: bool = False  # the task loaded and the model was built
    traced: bool = False
    shapes: bool = False  # shape propagation succeeded
    error: str = ""
    nodes: list[ProbeNode] = []
    seconds: float = 0.0
    log_excerpt: str = ""

    def node(self, name: str) -> ProbeNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    @property
    def kinds(self) -> list[str]:
        return [n.kind for n in self.nodes if n.kind]


def probe_tasks(
    tasks: list[Task],
    *,
    device: str = "cuda",
    python: str | None = None,
    timeout: float = 120.0,
    cache_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> list[ProbeReport]:
    """Trace each task's model, all in one child process (one torch import for the batch).

    Never raises for problems of the tasks' code: each gets a report, with `error` set when it
    could not be built or traced. `timeout` is for the whole batch. Setting `cancel` kills the
    probe's process tree at once (each report then says it was cancelled).
    """
    if not tasks:
        return []
    cache = Path(cache_dir or default_cache_dir())
    work_root = cache / "offline"
    work_root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="probe-", dir=work_root) as tmp:
        work = Path(tmp)
        request = ProbeRequest(out=work / "graph.json", tasks=tasks).write(work / "request.json")
        # tracing needs no GPU: keep the probe off it (it may run while a worker is timing)
        env = child_env(device, cache, {"CUDA_VISIBLE_DEVICES": ""})
        cmd = [python or sys.executable, "-m", "forge_lsp.agent.offline.probe", str(request)]
        run = run_sandboxed(cmd, env=env, cwd=work, timeout=timeout, cancel=cancel, excerpt=_EXCERPT)
        code, log = run.returncode, run.output
        seconds = time.perf_counter() - t0
        out = work / "graph.json"
        if code is None or not out.exists():
            if run.cancelled:
                why = "the graph probe was cancelled"
            elif code is None:
                why = f"the graph probe did not finish within {timeout:g} s"
            else:
                why = f"the graph probe exited with code {code} without an answer"
            return [ProbeReport(error=why, seconds=seconds, log_excerpt=log) for _ in tasks]
        reports = [ProbeReport.model_validate(r) for r in json.loads(out.read_text())["reports"]]
        for r in reports:
            r.seconds = seconds
            r.log_excerpt = log if (code != 0 or r.error) else ""
        return reports


def probe_task(
    task: Task,
    *,
    device: str = "cuda",
    python: str | None = None,
    timeout: float = 120.0,
    cache_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> ProbeReport:
    """Trace the task's model in a child process. Never raises for problems of the task's code."""
    return probe_tasks([task], device=device, python=python, timeout=timeout, cache_dir=cache_dir, cancel=cancel)[0]


# ----------------------------------------------------------------------------- child side
def _tables():
    import operator

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    funcs: dict[Any, str] = {}

    def add(kind: str, *objs: Any) -> None:
        for obj in objs:
            if obj is not None:
                funcs[obj] = kind

    nn_c = getattr(torch._C, "_nn", None)
    add("softmax", torch.softmax, F.softmax, getattr(torch.special, "softmax", None))
    add("layer_norm", F.layer_norm, torch.layer_norm)
    add("group_norm", F.group_norm, torch.group_norm)
    add("rms_norm", getattr(F, "rms_norm", None), getattr(torch, "rms_norm", None))
    add(
        "adaptive_avg_pool2d",
        F.adaptive_avg_pool2d,
        getattr(nn_c, "adaptive_avg_pool2d", None),
        getattr(torch, "adaptive_avg_pool2d", None),
    )
    add("linear", F.linear, getattr(nn_c, "linear", None))
    add("relu", F.relu, torch.relu, torch.relu_, F.relu_)
    add("gelu", F.gelu)
    add("silu", F.silu)
    add("add", operator.add, torch.add)
    add("mul", operator.mul, torch.mul)
    add("pow", operator.pow, torch.pow)
    add("mean", torch.mean)
    add("rsqrt", torch.rsqrt)
    methods = {
        "softmax": "softmax",
        "relu": "relu",
        "relu_": "relu",
        "add": "add",
        "mul": "mul",
        "pow": "pow",
        "mean": "mean",
        "rsqrt": "rsqrt",
    }
    modules: dict[type, tuple[str, tuple[str, ...]]] = {
        nn.Softmax: ("softmax", ("dim",)),
        nn.LayerNorm: ("layer_norm", ("normalized_shape", "eps", "elementwise_affine")),
        nn.GroupNorm: ("group_norm", ("num_groups", "num_channels", "eps", "affine")),
        nn.AdaptiveAvgPool2d: ("adaptive_avg_pool2d", ("output_size",)),
        nn.Linear: ("linear", ("in_features", "out_features")),
        nn.ReLU: ("relu", ("inplace",)),
        nn.GELU: ("gelu", ("approximate",)),
        nn.SiLU: ("silu", ("inplace",)),
    }
    if hasattr(nn, "RMSNorm"):
        modules[nn.RMSNorm] = ("rms_norm", ("normalized_shape", "eps", "elementwise_affine"))
    return funcs, methods, modules


def _value(v: Any) -> Any:
    import math

    import torch
    import torch.fx

    if isinstance(v, torch.fx.Node):
        return {"node": v.name}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"repr": repr(v)}
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).removeprefix("torch.")}
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return {"repr": repr(v)[:200]}


def _target_name(node: Any) -> str:
    # keep in sync with library/rewrite.py `_forge_target_name`
    if node.op == "call_function":
        return getattr(node.target, "__name__", repr(node.target))
    return str(node.target)


def _describe(model: Any, graph: Any) -> list[dict[str, Any]]:
    import torch

    funcs, methods, modules = _tables()
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    out = []
    for node in graph.nodes:
        d: dict[str, Any] = {
            "name": node.name,
            "op": node.op,
            "target": _target_name(node),
            "kind": None,
            "args": _value(list(node.args)),
            "kwargs": {k: _value(v) for k, v in node.kwargs.items()},
            "users": [u.name for u in node.users],
        }
        if node.op == "call_function":
            try:
                d["kind"] = funcs.get(node.target)
            except TypeError:  # unhashable target
                d["kind"] = None
        elif node.op == "call_method":
            d["kind"] = methods.get(node.target)
        elif node.op == "call_module":
            mod = model.get_submodule(node.target)
            entry = modules.get(type(mod))  # exact type: a subclass may override forward
            info: dict[str, Any] = {
                "type": f"{type(mod).__module__}.{type(mod).__qualname__}",
                "attrs": {},
                "params": {k: list(p.shape) for k, p in mod.named_parameters(recurse=False) if p is not None},
            }
            if entry is not None:
                d["kind"] = entry[0]
                info["attrs"] = {a: _value(getattr(mod, a, None)) for a in entry[1]}
                if isinstance(mod, torch.nn.Linear) or isinstance(mod, torch.nn.LayerNorm):
                    info["attrs"]["bias"] = getattr(mod, "bias", None) is not None
            d["module"] = info
        elif node.op == "get_attr":
            obj: Any = None
            try:
                obj = model.get_parameter(node.target) if node.target in params else None
            except AttributeError:
                obj = None
            kind = "parameter" if node.target in params else "buffer" if node.target in buffers else "tensor"
            if obj is None:
                obj = buffers.get(node.target)
            if obj is None:
                cur: Any = model
                for part in node.target.split("."):
                    cur = getattr(cur, part, None)
                obj = cur
            if isinstance(obj, torch.Tensor):
                d["attr"] = {"shape": list(obj.shape), "dtype": str(obj.dtype).removeprefix("torch."), "kind": kind}
        meta = node.meta.get("tensor_meta")
        if meta is not None and hasattr(meta, "shape"):
            d["shape"] = [int(s) for s in meta.shape]
            d["dtype"] = str(meta.dtype).removeprefix("torch.")
        out.append(d)
    return out


def _propagate_shapes(gm: Any, mod: Any, inputs_fn: str, seed: int) -> None:
    """Shapes and dtypes of every node, with fake tensors (no real compute, no real memory)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.shape_prop import ShapeProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    torch.manual_seed(seed + 1)
    try:
        with mode:
            inputs = list(getattr(mod, inputs_fn)())
    except Exception:  # noqa: BLE001 - some input builders need real tensors
        torch.manual_seed(seed + 1)
        inputs = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in getattr(mod, inputs_fn)()]
    ShapeProp(gm, fake_mode=mode).propagate(*inputs)


def _probe_one(task: Task) -> dict[str, Any]:
    result: dict[str, Any] = {"ok": False, "traced": False, "shapes": False, "error": "", "nodes": []}
    try:
        import torch
        import torch.fx

        from ...engine.harness.loading import exec_module

        mod = exec_module(task.source, task.name, "task")
        seed = task.seed
        torch.manual_seed(seed)
        init = list(getattr(mod, task.init_inputs_fn)())
        torch.manual_seed(seed)
        model = getattr(mod, task.model_class)(*init)
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001 - a broken task is an answer, not a crash
        result["error"] = f"the task could not be built: {type(exc).__name__}: {exc}"[:2000]
        return result
    try:
        gm = torch.fx.symbolic_trace(model)
        result["traced"] = True
    except Exception as exc:  # noqa: BLE001 - untraceable models get no library matches
        result["error"] = f"torch.fx.symbolic_trace failed: {type(exc).__name__}: {exc}"[:2000]
        return result
    try:
        _propagate_shapes(gm, mod, task.inputs_fn, seed)
        result["shapes"] = True
    except Exception as exc:  # noqa: BLE001 - shapes are optional
        result["error"] = f"shape propagation failed (shapes unknown): {type(exc).__name__}: {exc}"[:2000]
    try:
        result["nodes"] = _describe(model, gm.graph)
    except Exception as exc:  # noqa: BLE001 - a graph we cannot describe matches nothing
        result["traced"] = False
        result["error"] = f"the traced graph could not be described: {type(exc).__name__}: {exc}"[:2000]
    return result


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    request = ProbeRequest.read(args[0])
    out_path = request.out
    reports = [_probe_one(t) for t in request.tasks]
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"reports": reports}))
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

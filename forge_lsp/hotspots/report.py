"""What `forge hotspots` finds: plain data, written by the child that ran the model, read by every front end."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class TensorSpec(BaseModel):
    """One tensor argument of a module call: where it sits in the call, its shape and dtype, and for integer
    tensors the range of its values (token ids, indices), so that random inputs can be drawn like it."""

    name: str  # the parameter's name in forward(), or "args[i]" where it has none
    shape: list[int]
    dtype: str
    low: float | None = None
    high: float | None = None

    def label(self) -> str:
        return f"({', '.join(map(str, self.shape))}) {_short_dtype(self.dtype)}"


class CallArg(BaseModel):
    """One argument of a captured call: a tensor (a parameter of the task's forward, in order) or a constant
    (its Python source), passed by position or by keyword."""

    name: str
    how: str  # "pos" or "kw"
    tensor: bool
    source: str | None = None  # a constant's value as Python source


class Capture(BaseModel):
    """What was saved of one hot module instance, under ``.forge/captures/``."""

    folder: str  # relative to the workspace
    calls: list[str] = []  # input sets (torch.save'd lists of tensors), relative to `folder`
    state_dict: str | None = None
    init_source: str | None = None  # the constructor call as Python source, where it could be recovered
    init_imports: list[str] = []  # import lines that source needs
    init_missing: str | None = None  # why the constructor could not be recovered
    training: bool = False  # the instance's mode when it was captured (dropout, batch-norm statistics)
    dtype: str | None = None  # its floating parameters' and buffers' dtype, where they share one
    forward: str = ""  # the Model wrapper's forward() over the captured tensors, as Python source
    call: list[CallArg] = []  # the same call, argument by argument
    output: str = ""  # what the call returned: "tensor", or the type's name (a tuple, a model output...)
    #: Its structure, where it can be rebuilt from its tensors (`patching.rebuild`): "tensor", None, constants,
    #: tuples and lists, dicts and model outputs of importable classes; None where it cannot.
    output_spec: Any = None
    inputs: list[TensorSpec] = []  # the tensors of one call, in the order of the saved lists
    skipped: str | None = None  # why nothing was saved (over the size budget, ...)


class Instance(BaseModel):
    """One module instance of the model and the time attributed to it."""

    name: str  # qualified name in the model ("layer1.0.conv1"); the root is its class name
    cls: str  # class key, as in `ModuleClass.key`
    calls: int
    self_ms: float  # time of the ops it ran itself (not in child modules), per forward of the model
    total_ms: float  # self time plus its descendants'
    self_pct: float
    total_pct: float
    inputs: list[TensorSpec] = []  # of its first call
    capture: Capture | None = None


class ModuleClass(BaseModel):
    """A module class, its instances' times summed, and where it is defined."""

    key: str  # "module.QualName"
    name: str
    module: str
    file: str | None = None
    line: int | None = None  # 1-based line of the class statement
    library: bool = False  # defined in torch.nn (a building block, not a target to rewrite)
    instances: int
    calls: int
    self_ms: float
    total_ms: float
    self_pct: float
    total_pct: float
    inputs: list[TensorSpec] = []  # of the hottest instance's first call

    def summary(self) -> str:
        """The hover's line: ``18.2% of model time · 2 instances · inputs (8, 77, 768) bf16``."""
        head = f"{self.total_pct:.1f}% of model time"
        if self.self_pct < self.total_pct - 0.05:
            head += f" ({self.self_pct:.1f}% in its own ops)"
        parts = [head, f"{self.instances} instance{'s' if self.instances != 1 else ''}"]
        if self.inputs:
            parts.append("inputs " + ", ".join(t.label() for t in self.inputs[:3]))
        return " · ".join(parts)


class Op(BaseModel):
    name: str
    calls: int
    self_ms: float
    pct: float


class HotspotReport(BaseModel):
    """A model's time by module instance, module class and op, per forward, from profiled iterations only."""

    entry: str
    device: str
    device_name: str = ""
    timer: str = ""  # "device" (CUDA kernel time) or "cpu" (host self time of the ops)
    warmup: int = 0  # forwards run before the profiled ones (excluded)
    iterations: int = 0  # profiled forwards of the model
    model: str = ""  # the root module's class
    model_ms: float = 0.0  # attributed time per forward
    wall_ms: float = 0.0  # the profiled part's wall time (all its forwards, the profiler's overhead included)
    eager_ms: float | None = None  # one forward's wall time without the profiler (function entries)
    instances: list[Instance] = []
    classes: list[ModuleClass] = []
    ops: list[Op] = []
    targets: list[str] = []  # class keys worth optimizing, hottest first (see `rank_targets`)
    capture_folder: str | None = None
    notes: list[str] = []
    seconds: float = 0.0

    def cls(self, key: str) -> ModuleClass | None:
        return next((c for c in self.classes if c.key == key), None)

    def instances_of(self, key: str) -> list[Instance]:
        return [i for i in self.instances if i.cls == key]


def rank_targets(report: HotspotReport, top: int) -> list[str]:
    """Classes worth optimizing as a unit, hottest first: defined outside torch.nn (a block of the user's or a
    library's model, not a building block like Conv2d), not the model itself, and not a wrapper that holds
    nearly the whole model in one instance (an Encoder around every layer); ranked by their total time."""
    out = []
    for c in sorted(report.classes, key=lambda c: -c.total_ms):
        if c.library or c.name == report.model or c.total_pct <= 0.0:
            continue
        if c.instances == 1 and c.total_pct >= 90.0:
            continue
        out.append(c.key)
    return out[:top]


def _short_dtype(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}.get(
        dtype.removeprefix("torch."), dtype.removeprefix("torch.")
    )

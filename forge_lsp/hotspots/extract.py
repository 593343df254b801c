"""KernelBench-format tasks from a hot-spot report's captures (`extract_tasks`), one per hot module class.

Each task subclasses the captured class (imported by its module name, or loaded from the workspace file that
defines it), builds it with the recorded constructor arguments, replays the captured call's other
arguments as constants, and lists the captured calls as its ``input_sets``, so that ``forge eval`` and
``forge optimize`` verify against the real inputs as well as random ones drawn like them. A class whose
constructor could not be recovered, or whose calls were not captured, gets no task and a reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from .report import Capture, HotspotReport, TensorSpec

TEMPLATE = Path(__file__).with_name("task.py.j2")


@dataclass
class ExtractedTask:
    cls: str  # class key
    path: Path
    input_sets: list[Path]
    instances: list[str]  # whose captures it holds
    left_out: list[str] = field(default_factory=list)  # instances of the class built differently
    #: the class's other instances, built or called differently, one task per group (``Name__2.py``, ...), hottest
    #: first: a run optimizes the main task; its answer is then carried over to these and checked on each
    variants: list[ExtractedTask] = field(default_factory=list)


@dataclass
class Extraction:
    tasks: list[ExtractedTask] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (class key, why)


def _draw(t: TensorSpec) -> str:
    shape = "(" + ", ".join(str(d) for d in t.shape) + ("," if len(t.shape) == 1 else "") + ")"
    if t.dtype == "bool":
        return f"torch.rand({shape}) < 0.5"
    if t.low is not None and t.high is not None and t.dtype.startswith(("int", "uint")):
        return f"torch.randint({int(t.low)}, {int(t.high) + 1}, {shape}, dtype=torch.{t.dtype})"
    if t.dtype.startswith("complex"):
        return f"torch.randn({shape}, dtype=torch.{t.dtype})"
    return f"torch.randn({shape}, dtype=torch.{t.dtype})"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # noqa: S701 - Python source, not HTML
    )
    env.filters["draw"] = _draw
    return env


def extract_tasks(
    report: HotspotReport, workspace: Path, out_dir: Path | None = None, classes: list[str] | None = None
) -> Extraction:
    """Write one task per class of `classes` (default: the report's targets) under `out_dir` (default
    ``.forge/tasks``); returns the tasks written and the classes skipped, each with its reason."""
    workspace = workspace.resolve()
    out = (out_dir or workspace / ".forge" / "tasks").resolve()
    result = Extraction()
    env = _env()
    for key in classes or report.targets:
        cls = report.cls(key) or next((c for c in report.classes if c.name == key), None)
        if cls is None:
            result.skipped.append((key, "no such class in the report"))
            continue
        captured = [i for i in report.instances_of(cls.key) if i.capture is not None]
        usable = [i for i in captured if i.capture and i.capture.calls and i.capture.init_source]
        if not usable:
            why = next(
                (
                    (i.capture.init_missing and f"its constructor cannot be recovered: {i.capture.init_missing}")
                    or i.capture.skipped
                    for i in captured
                    if i.capture and (i.capture.init_missing or i.capture.skipped)
                ),
                "none of its instances was captured",
            )
            result.skipped.append((cls.key, str(why)))
            continue
        groups: list[list] = []  # instances built and called alike
        for inst in sorted(usable, key=lambda i: -i.total_ms):
            group = next(
                (g for g in groups if inst.capture and g[0].capture and _same_call(inst.capture, g[0].capture)), None
            )
            if group is None:
                groups.append([inst])
            else:
                group.append(inst)
        groups.sort(key=lambda g: -sum(i.total_ms for i in g))  # the group with the most time is the main task
        out.mkdir(parents=True, exist_ok=True)
        main: ExtractedTask | None = None
        for n, same in enumerate(groups):
            left_out = [i.name for i in captured if i not in same]
            stem = _module_name(cls.name) + (f"__{n + 1}" if n else "")
            task = _write_task(env, report, cls, same, left_out, workspace, out / f"{stem}.py")
            if main is None:
                main = task
            else:
                main.variants.append(task)
        assert main is not None
        result.tasks.append(main)
    return result


def _write_task(
    env: jinja2.Environment, report: HotspotReport, cls, same: list, left_out: list[str], workspace: Path, path: Path
) -> ExtractedTask:
    """The task of the instances `same` (built and called alike; the hottest first) at `path`."""
    chosen = same[0]
    cap = chosen.capture
    assert cap is not None and cap.init_source is not None
    sets = [workspace / i.capture.folder / c for i in same if i.capture for c in i.capture.calls]
    target, _, rest = cap.init_source.partition("(")
    source = env.get_template(TEMPLATE.name).render(
        cls=cls,
        report=report,
        chosen=chosen,
        same=same,
        left_out=left_out,
        imports=cap.init_imports,
        loads=any("_load(" in line.split("#")[0] for line in cap.init_imports),
        workspace=str(workspace),
        target=target,
        init_args=rest[:-1],
        forward=cap.forward,
        training=cap.training,
        dtype=cap.dtype,
        inputs=cap.inputs,
        input_sets=[os.path.relpath(p, path.parent) for p in sets],
    )
    path.write_text(source)
    return ExtractedTask(cls.key, path, sets, [i.name for i in same], left_out)


def _same_call(a: Capture, b: Capture) -> bool:
    """Two instances fit one task: built the same way, called the same way, with tensors of the same kinds."""
    return (
        a.init_source == b.init_source
        and a.forward == b.forward
        and [(t.name, t.dtype, len(t.shape)) for t in a.inputs] == [(t.name, t.dtype, len(t.shape)) for t in b.inputs]
    )


def _module_name(name: str) -> str:
    text = "".join(ch if ch.isalnum() else "_" for ch in name)
    return text if text[:1].isalpha() else f"m_{text}"

"""KernelBench-compatible task files, read into a typed `Task` without executing them.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``.
It may also carry a literal ``FORGE = {...}`` dict with verification settings::

    FORGE = {
        "vary": {"batch_size": [7, 33]},          # module constants verified at other sizes
        "tolerances": {"float32": [1e-4, 1e-4]},  # dtype -> [atol, rtol]
        "input_sets": ["captured/batch0.pt"],     # torch.save'd lists of input tensors
        "trials": 3,
    }

Only the AST is read here: the engine process never imports user code or torch for this.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from pydantic import BaseModel, Field


class TaskError(ValueError):
    """The task file cannot be used; the message says what to change."""


class Tolerance(BaseModel):
    atol: float
    rtol: float


#: Default tolerances per output dtype. ``atol`` is scaled by max(1, rms(reference)) so that
#: large-magnitude outputs (sums, matmuls) are judged relative to their scale.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "complex64": Tolerance(atol=1e-4, rtol=1e-4),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    "float8_e4m3fn": Tolerance(atol=1e-1, rtol=1e-1),
    "float8_e5m2": Tolerance(atol=1e-1, rtol=1e-1),
}


class InputSet(BaseModel):
    """Captured real inputs: a file written with ``torch.save(list_of_tensors, path)``."""

    name: str
    path: Path


class Task(BaseModel):
    """A reference module to optimize, with everything needed to verify candidates for it."""

    path: Path
    source: str
    model_class: str = "Model"
    inputs_fn: str = "get_inputs"
    init_inputs_fn: str = "get_init_inputs"
    tolerances: dict[str, Tolerance] = Field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    input_sets: list[InputSet] = []
    vary: dict[str, list[int]] = Field(
        default_factory=dict,
        description="module-level size constants and the other values to verify them at",
    )
    trials: int = 3
    seed: int = 42

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sha(self) -> str:
        settings = self.model_dump_json(exclude={"source", "path"})
        return hashlib.sha256((self.source + "\0" + settings).encode()).hexdigest()[:16]

    def tolerance_for(self, dtype: str) -> Tolerance | None:
        return self.tolerances.get(dtype.removeprefix("torch."))


def _module_constants(tree: ast.Module) -> dict[str, object]:
    consts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                consts[node.targets[0].id] = None
    return consts


def load_task(
    path: str | Path,
    *,
    model_class: str | None = None,
    vary: dict[str, list[int]] | None = None,
    trials: int | None = None,
    input_sets: list[str | Path] | None = None,
    tolerances: dict[str, tuple[float, float]] | None = None,
) -> Task:
    """Read a KernelBench-style task file; keyword arguments override its ``FORGE`` settings."""
    path = Path(path).resolve()
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"cannot read task file {path}: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}:{exc.lineno}: syntax error in task file: {exc.msg}") from exc

    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    cls = model_class or "Model"
    if cls not in classes:
        raise TaskError(
            f"{path}: no class {cls!r} at module level"
            + (f" (classes found: {', '.join(sorted(classes))})" if classes else "")
        )
    missing = [fn for fn in ("get_inputs", "get_init_inputs") if fn not in functions]
    if missing:
        raise TaskError(
            f"{path}: missing {' and '.join(f'{m}()' for m in missing)}; a task needs "
            "get_inputs() returning the forward arguments and get_init_inputs() returning "
            "the constructor arguments"
        )

    consts = _module_constants(tree)
    settings = consts.get("FORGE") or {}
    if not isinstance(settings, dict):
        raise TaskError(f"{path}: FORGE must be a literal dict")

    task_vary: dict[str, list[int]] = {k: list(v) for k, v in (vary or settings.get("vary") or {}).items()}
    for name, values in task_vary.items():
        if name not in consts:
            raise TaskError(f"{path}: vary names {name!r}, which is not a module-level constant")
        if not isinstance(consts[name], int) or not all(isinstance(v, int) and v > 0 for v in values):
            raise TaskError(f"{path}: vary[{name!r}] needs an int constant and positive int values")

    tol = dict(DEFAULT_TOLERANCES)
    for dtype, pair in (tolerances or settings.get("tolerances") or {}).items():
        atol, rtol = pair
        tol[dtype.removeprefix("torch.")] = Tolerance(atol=float(atol), rtol=float(rtol))

    sets: list[InputSet] = []
    for p in input_sets if input_sets is not None else settings.get("input_sets", []):
        p = Path(p)
        p = p if p.is_absolute() else (path.parent / p)
        if not p.is_file():
            raise TaskError(f"{path}: captured input set {p} does not exist")
        sets.append(InputSet(name=p.stem, path=p.resolve()))

    n_trials = trials if trials is not None else int(settings.get("trials", 3))
    if n_trials < 1:
        raise TaskError("trials must be at least 1")
    return Task(
        path=path,
        source=source,
        model_class=cls,
        tolerances=tol,
        input_sets=sets,
        vary=task_vary,
        trials=n_trials,
    )

"""Which executor a run uses: `parse_executor` reads ``--executor`` / ``[tool.forge] executor`` and `make_executor`
makes it, a `LocalPool` (`executor.py`) or a `RayExecutor` (`ray_executor.py`, imported only when asked for). The
factory is its own module so that neither executor imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from .executor import Executor, ExecutorUnavailable, reason_line
from .local_pool import LocalPool
from .options import EvalOptions


def parse_executor(spec: str | None) -> tuple[Literal["local", "ray"], str | None]:
    """``local`` → (local, None); ``ray`` → (ray, None): the cluster ``RAY_ADDRESS`` names, else a local Ray
    instance; ``ray://HOST:PORT`` → (ray, that address). Raises ValueError for anything else."""
    text = (spec or "local").strip()
    if text in ("", "local"):
        return "local", None
    if text == "ray":
        return "ray", None
    if text.startswith("ray://") and len(text) > len("ray://"):
        return "ray", text
    raise ValueError(f"unknown executor {spec!r}: use local, ray or ray://HOST:PORT")


def make_executor(
    spec: str | None,
    device: str = "auto",
    *,
    options: EvalOptions | None = None,
    cache_dir: Path | None = None,
    build_workers: int | None = None,
    lanes: int | None = None,
) -> Executor:
    """The executor ``--executor`` / ``[tool.forge] executor`` names (see `parse_executor`). Raises ValueError
    for a name that is none of them, and `ExecutorUnavailable` (one line) where Ray is missing or its cluster
    cannot be reached or refuses the connection. `lanes`: candidates a local GPU evaluates at once (`LocalPool`);
    a Ray cluster's actors are one a GPU."""
    kind, address = parse_executor(spec)
    if kind == "local":
        return LocalPool(device, options=options, cache_dir=cache_dir, build_workers=build_workers, lanes=lanes)
    from .ray_executor import RayExecutor

    try:
        return RayExecutor(address, device=device, options=options, cache_dir=cache_dir, build_workers=build_workers)
    except ExecutorUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - a cluster that cannot be reached (ConnectionError, grpc...) is the user's
        raise ExecutorUnavailable(f"executor {spec!r}: {reason_line(exc)}") from exc
